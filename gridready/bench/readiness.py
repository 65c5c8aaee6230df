"""Readiness: health endpoint up and the model listed/ready, within a bounded wait; on failure, say why.

The caller passes gatherers (unit state, last log lines) because only it knows how to reach the host
(SSH, kubectl); they are called once, only when the tier is not ready.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from gridready import console
from gridready.bench.endpoint import Endpoint
from gridready.bench.http import HttpError, fetch

UnitState = Callable[[], str]
LogLines = Callable[[], list[str]]


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    ok: bool
    detail: str


class ReadinessReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: str
    url: str
    ready: bool
    waited_s: float
    attempts: int
    checks: list[Check]
    reason: str  # one sentence: what is not ready and why, or "ready"
    unit_state: str | None = None
    log_tail: list[str] = []
    simulated: bool | None = None


async def _checks(ep: Endpoint, timeout: float) -> tuple[list[Check], bool | None]:
    """One round: health, then the model. Stops at the first failing check."""
    health = "/v2/health/ready" if ep.triton else "/health"
    try:
        status, headers, _ = await fetch(ep.base, health, timeout=timeout)
    except HttpError as err:
        return [Check(name="health", ok=False, detail=f"GET {health}: {err}")], None
    sim = headers.get("x-gridready-simulated") == "1"
    if status != 200:
        return [Check(name="health", ok=False, detail=f"GET {health} -> HTTP {status}")], sim
    checks = [Check(name="health", ok=True, detail=f"GET {health} -> 200")]
    try:
        if ep.triton:
            path = f"/v2/models/{ep.model}/ready"
            status, _, _ = await fetch(ep.base, path, timeout=timeout)
            ok = status == 200
            checks.append(Check(name="model", ok=ok, detail=f"GET {path} -> HTTP {status}"))
        else:
            status, _, body = await fetch(ep.base, "/v1/models", timeout=timeout)
            served = [m.get("id") for m in json.loads(body).get("data", [])] if status == 200 else []
            ok = ep.model in served
            detail = (f"model {ep.model!r} listed in /v1/models" if ok
                      else f"GET /v1/models -> HTTP {status}" if status != 200
                      else f"model {ep.model!r} not in /v1/models (served: {', '.join(map(str, served)) or 'none'})")
            checks.append(Check(name="model", ok=ok, detail=detail))
    except (HttpError, ValueError, AttributeError) as err:
        checks.append(Check(name="model", ok=False, detail=f"model check: {err}"))
    return checks, sim


WAITING_EVERY_S = 30.0  # a `waiting for readiness` line at most this often

async def _gather(fn: Callable[[], object] | None) -> object:
    if fn is None:
        return None
    try:
        return await asyncio.to_thread(fn)
    except Exception as err:  # a gatherer failing must not hide the readiness report
        return f"(could not gather: {type(err).__name__}: {err})"


async def await_ready(ep: Endpoint, tier: str = "", *, timeout_s: float = 600.0, interval_s: float = 1.0,
                      unit_state: UnitState | None = None, log_lines: LogLines | None = None) -> ReadinessReport:
    """Poll until health and model are ready or timeout_s passes (bounded: at most timeout_s + one round)."""
    start = time.monotonic()
    attempts = 0
    said = 0.0
    while True:
        attempts += 1
        checks, sim = await _checks(ep, timeout=min(10.0, max(1.0, timeout_s)))
        ready = all(c.ok for c in checks) and len(checks) == 2
        waited = time.monotonic() - start
        if ready or waited + interval_s > timeout_s:
            break
        if waited - said >= WAITING_EVERY_S:  # a 70B load takes many minutes: say what is awaited, now and then
            said = waited
            bad = next((c for c in checks if not c.ok), None)
            console.info(f"[{tier or ep.url}] waiting for readiness: {waited:.0f} s of {timeout_s:.0f} s"
                         + (f" ({bad.name}: {bad.detail[:120]})" if bad else ""))
        await asyncio.sleep(interval_s)
    report = ReadinessReport(tier=tier, url=ep.url, ready=ready, waited_s=round(waited, 2), attempts=attempts,
                             checks=checks, reason="ready", simulated=sim)
    if not ready:
        bad = next(c for c in checks if not c.ok)
        state = await _gather(unit_state)
        logs = await _gather(log_lines)
        report.unit_state = None if state is None else str(state)
        report.log_tail = [] if logs is None else ([str(x) for x in logs] if isinstance(logs, list) else [str(logs)])
        report.reason = (f"tier {tier or ep.url} not ready after {waited:.0f} s: {bad.name}: {bad.detail}"
                         + (f"; unit: {report.unit_state}" if report.unit_state else ""))
    return report
