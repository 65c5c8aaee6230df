"""verify_tier: readiness -> smoke -> benchmark sweep -> SLO gate, for one tier. What `serve` calls."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gridready.bench.client import run_level
from gridready.bench.endpoint import Endpoint
from gridready.bench.fixed_cost import BatchingReading, batching, smoke_infer
from gridready.bench.gate import GateOutcome, failed_gate, slo_gate
from gridready.bench.prefix_reading import PrefixCacheReading, reading, scrape
from gridready.bench.protocols import Api
from gridready.bench.readiness import LogLines, ReadinessReport, UnitState, await_ready
from gridready.bench.smoke import SmokeReport, smoke
from gridready.bench.stats import LevelSummary, summarize
from gridready.bench.workload import Workload
from gridready.exitcodes import ExitCode
from gridready.spec.serving import Slo, Tier

Progress = Callable[[str], None]


class TierReport(BaseModel):
    """Everything verify_tier learned about one tier; results.json is this model."""

    model_config = ConfigDict(extra="forbid")

    tier: str
    engine: str
    model: str
    endpoint: Endpoint
    gpus: int = Field(description="GPUs the tier occupies (for cost per token)")
    slo: Slo
    workload: Workload
    readiness: ReadinessReport
    smoke: SmokeReport | None = None
    levels: list[LevelSummary] = []
    gate: GateOutcome
    prefix_cache: PrefixCacheReading | None = Field(
        None, description="the engine's prefix-cache hit rate over the benchmark, from its own metrics")
    batching: BatchingReading | None = Field(
        None, description="fixed-cost tiers: the batches Triton's dynamic batcher formed over the benchmark")
    started: str
    finished: str
    simulated: bool = Field(description="the engine said it is gridready's simulator")

    @property
    def ok(self) -> bool:
        return self.gate.passed

    @property
    def exit_code(self) -> ExitCode:
        return self.gate.exit_code

    def level(self, value: float) -> LevelSummary | None:
        return next((lv for lv in self.levels if lv.level.value == value), None)


def level_line(s: LevelSummary) -> str:
    """One load level in a progress line: completed/failed, throughput, p99 TTFT and goodput."""
    ttft = f"{s.ttft.p99:.0f} ms" if s.ttft.p99 is not None else "n/a"
    good = f"{s.goodput:.0%}" if s.goodput is not None else "n/a"
    return (f"{s.completed} done, {s.failed} failed in {s.duration_s:.1f} s; {s.request_throughput:.2f} req/s, "
            f"{s.output_throughput:.0f} output tok/s; p99 TTFT {ttft}; goodput {good}")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


async def averify_tier(endpoint: Endpoint, tier: Tier, workload: Workload, *, gpus: int,
                       ready_timeout_s: float = 600.0, unit_state: UnitState | None = None,
                       log_lines: LogLines | None = None, progress: Progress | None = None) -> TierReport:
    say = progress or (lambda _m: None)
    started = _now()
    wl = workload if workload.api is not None else workload.model_copy(update={"api": endpoint.api})
    say(f"{tier.name}: waiting for {endpoint.url} (at most {ready_timeout_s:.0f} s)")
    ready = await await_ready(endpoint, tier.name, timeout_s=ready_timeout_s, unit_state=unit_state,
                              log_lines=log_lines)
    common: dict[str, Any] = {"tier": tier.name, "engine": tier.engine, "model": endpoint.model, "endpoint": endpoint,
              "gpus": gpus, "slo": tier.slo, "workload": wl, "readiness": ready,
              "started": started, "simulated": bool(ready.simulated)}
    if not ready.ready:
        return TierReport(**common, gate=failed_gate(tier.name, "readiness", ready.reason), finished=_now())
    say(f"{tier.name}: ready after {ready.waited_s:.1f} s; smoke")
    fixed = getattr(tier, "embedding", None) if endpoint.api is Api.KSERVE_INFER else None
    sm = await (smoke_infer(endpoint, fixed) if fixed is not None else smoke(endpoint))
    if not sm.ok:
        return TierReport(**common, smoke=sm, gate=failed_gate(tier.name, "smoke", sm.reason), finished=_now())
    api = wl.api or Api.OPENAI_CHAT
    before = await scrape(endpoint.metrics_url)
    levels = []
    for level in wl.levels():
        say(f"{tier.name}: benchmark {level.label} ({wl.duration_s:g} s or {wl.num_prompts} requests)")
        run = await run_level(endpoint.base, api, endpoint.model, level, wl, tag=f"{tier.name}-")
        levels.append(summarize(run, tier.slo))
        say(f"{tier.name}: {level.label}: {level_line(levels[-1])}")
    after = await scrape(endpoint.metrics_url)
    gate_level = wl.gate()
    summary = next((s for s in levels if s.level == gate_level), None)
    gate = slo_gate(tier.name, summary, tier.slo)
    say(gate.message)
    return TierReport(**common, smoke=sm, levels=levels, gate=gate, prefix_cache=reading(tier.engine, before, after),
                      batching=batching(before, after) if fixed is not None else None, finished=_now())


def verify_tier(endpoint: Endpoint, tier: Tier, workload: Workload, **kwargs: object) -> TierReport:
    """Synchronous averify_tier (runs its own event loop). Keyword arguments as averify_tier."""
    return asyncio.run(averify_tier(endpoint, tier, workload, **kwargs))  # type: ignore[arg-type]
