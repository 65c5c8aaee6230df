"""Canary rollout through the router: split, observe live, then promote or roll back (`invoke serve --canary`).

1. split: the route of the canary's model gets the canary at `weight` % beside the current tiers
   (gridready.serving.router.with_canary), applied by `apply` (on hosts: serve.yml's router play, which rewrites
   the LiteLLM config and restarts the unit);
2. observe: `requests` chat requests go through the router, spread over `observe_s`, while the canary's own /metrics
   are scraped before and after: the SLO gate judges the canary's p99s over that window (gridready.bench.canary_gate);
3. promote (canary at 100 %) or roll back (the route as it was), applied the same way.
Every step and its numbers go to <stage>/decision/canary-<tier>/canary.json and canary.md; a rollback is exit 3 and
its message names the SLO that failed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gridready.artifacts import make_dirs, write_atomic, write_json_atomic
from gridready.bench import canary_gate
from gridready.bench.http import Connection, HttpError, Url, fetch
from gridready.exitcodes import ExitCode
from gridready.serving import router
from gridready.spec import Slo
from gridready.spec.router import Route

Apply = Callable[[Route], None]


class CanaryStep(BaseModel):
    step: str
    at: str
    detail: dict[str, Any]


class CanaryRecord(BaseModel):
    tier: str
    model: str
    weight_pct: int
    observe_s: float
    requests_sent: int
    request_errors: int
    gate: canary_gate.CanaryGate
    decision: str  # promote | rollback
    steps: list[CanaryStep]
    exit_code: int
    message: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _weights(route: Route) -> dict[str, int]:
    return {t.tier: t.weight for t in route.targets}


async def _drive(router_url: str, key: str, model: str, requests: int, observe_s: float) -> tuple[int, int]:
    """`requests` small chat requests through the router, evenly spread over observe_s; (sent, errors)."""
    conn = Connection(Url.parse(router_url))
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "canary"}],
                       "max_tokens": 16}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    start, errors = time.monotonic(), 0
    try:
        for i in range(requests):
            delay = start + i * observe_s / requests - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                resp = await conn.request("POST", "/v1/chat/completions", body, headers)
                await conn.read(resp)
                errors += resp.status != 200
            except HttpError:
                errors += 1
                conn.close()
    finally:
        conn.close()
    return requests, errors


async def _scrape(metrics_url: str) -> str:
    status, _, body = await fetch(metrics_url, "", timeout=20)
    if status != 200:
        raise HttpError(f"{metrics_url}: HTTP {status}")
    return body.decode()


def rollout(route: Route, canary_tier: str, weight_pct: int, slo: Slo, *, router_url: str, router_key: str,
        canary_metrics_url: str, apply: Apply, observe_s: float, requests: int, out_dir: Path) -> CanaryRecord:
    """The whole canary; the record is written under out_dir whatever the outcome."""
    steps: list[CanaryStep] = []
    split = router.with_canary(route, canary_tier, weight_pct)
    apply(split)
    steps.append(CanaryStep(step="split", at=_now(), detail={"weights": _weights(split)}))
    before = asyncio.run(_scrape(canary_metrics_url))
    sent, errors = asyncio.run(_drive(router_url, router_key, route.model, requests, observe_s))
    after = asyncio.run(_scrape(canary_metrics_url))
    # the canary should see about weight % of the window's requests; half of that is the least that is judged
    gate = canary_gate.judge(before, after, slo, min_requests=max(3, int(requests * weight_pct / 200)))
    steps.append(CanaryStep(step="observe", at=_now(), detail={
        "requests_sent": sent, "request_errors": errors, "canary_requests": gate.requests,
        "checks": [c.model_dump() for c in gate.checks]}))
    if gate.passed and errors == 0:
        final, decision, code = router.with_canary(route, canary_tier, 100), "promote", ExitCode.OK
        message = f"canary {canary_tier} promoted to 100 % of {route.model}: {gate.reason}"
    else:
        final, decision, code = route, "rollback", ExitCode.STAGE_FAILED
        why = gate.reason if not gate.passed else f"{errors} of {sent} requests through the router failed"
        slo_name = gate.failed_slo if not gate.passed else "errors"
        message = f"canary {canary_tier} rolled back ({slo_name}): {why}"
    apply(final)
    steps.append(CanaryStep(step=decision, at=_now(), detail={"weights": _weights(final)}))
    record = CanaryRecord(tier=canary_tier, model=route.model, weight_pct=weight_pct, observe_s=observe_s,
                          requests_sent=sent, request_errors=errors, gate=gate, decision=decision, steps=steps,
                          exit_code=int(code), message=message)
    write_record(out_dir, record)
    return record


def write_record(out_dir: Path, record: CanaryRecord) -> None:
    make_dirs(out_dir)  # never through a link
    write_json_atomic(out_dir / "canary.json", record)
    lines = [f"# Canary {record.tier} on {record.model}: {record.decision}", "", record.message, "",
             "| step | at | numbers |", "|---|---|---|"]
    lines += [f"| {s.step} | {s.at} | `{json.dumps(s.detail, sort_keys=True)}` |" for s in record.steps]
    lines += ["", "| SLO | limit ms | canary p99 ms | pass |", "|---|---|---|---|"]
    lines += [f"| {c.slo} | {c.limit_ms:g} | {c.measured_ms} | {'yes' if c.passed else 'no'} |"
              for c in record.gate.checks]
    write_atomic(out_dir / "canary.md", "\n".join(lines) + "\n")
