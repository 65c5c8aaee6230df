"""The max_queue_delay_microseconds sweep of a fixed-cost tier, and its decision record.

For each setting the tier is redeployed with it (`redeploy(delay_us)`: the serve stage re-renders config.pbtxt
and runs the Triton role, whose handler restarts Triton), then measured at one Poisson rate: throughput, p50/p99
latency, goodput against the tier's SLO, and the mean batch size and queue time Triton reports. The best
setting is the one with the lowest p99 among those that meet the SLO (goodput_min of requests within every SLO
at the offered rate); when none does, the one with the highest goodput, and the record says no setting met it.
The tier is left serving its own (configured) setting: the record advises, cluster.yml decides.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gridready.artifacts import write_atomic
from gridready.bench.client import run_level
from gridready.bench.endpoint import Endpoint
from gridready.bench.fixed_cost import BatchingReading, batching, workload_for
from gridready.bench.gate import slo_gate
from gridready.bench.prefix_reading import scrape
from gridready.bench.protocols import Api
from gridready.bench.readiness import await_ready
from gridready.bench.stats import LevelSummary, summarize
from gridready.bench.workload import Level
from gridready.spec.serving import Slo, Tier

Redeploy = Callable[[int], None]
RECORD = "queue-delay"


class SweepPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_queue_delay_microseconds: int
    ready: bool
    summary: LevelSummary | None = None
    batching: BatchingReading | None = None
    meets_slo: bool = False
    reason: str = Field(description="the SLO gate's message at this setting, or why it was not measured")

    @property
    def p99_ms(self) -> float | None:
        return self.summary.e2e.p99 if self.summary else None


class QueueDelayDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = "queue-delay-sweep"
    tier: str
    model: str
    request_rate: float
    slo: Slo
    configured_us: int
    points: list[SweepPoint]
    best_us: int | None
    met_slo: bool
    reason: str
    simulated: bool
    started: str
    finished: str


def choose(points: list[SweepPoint]) -> tuple[SweepPoint | None, bool, str]:
    """(best point, whether it met the SLO, one sentence why)."""
    measured = [p for p in points if p.summary is not None and p.summary.completed]
    passing = [p for p in measured if p.meets_slo]
    if passing:
        best = min(passing, key=lambda p: (p.p99_ms if p.p99_ms is not None else float("inf"),
                                           p.max_queue_delay_microseconds))
        return best, True, (f"{best.max_queue_delay_microseconds} us has the lowest p99 ({best.p99_ms:.1f} ms) of the "
                            f"{len(passing)} setting(s) that meet the SLO")
    if not measured:
        return None, False, "no setting could be measured"
    best = max(measured, key=lambda p: (p.summary.goodput or 0.0 if p.summary else 0.0,
                                        -(p.p99_ms or float("inf"))))
    good = best.summary.goodput if best.summary else None
    return best, False, (f"no setting met the SLO; {best.max_queue_delay_microseconds} us has the highest goodput "
                         f"({(good or 0.0):.1%})")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


async def asweep(endpoint: Endpoint, tier: Tier, redeploy: Redeploy, *, ready_timeout_s: float = 600.0,
                 progress: Callable[[str], None] | None = None) -> QueueDelayDecision:
    say = progress or (lambda _m: None)
    settings = tier.embedding
    assert settings is not None and settings.sweep is not None
    started = _now()
    rate = settings.sweep.request_rate or max(settings.bench.request_rates)
    wl = workload_for(settings, [rate])
    points: list[SweepPoint] = []
    for delay in settings.delays():
        say(f"{tier.name}: max_queue_delay_microseconds {delay}: redeploying")
        await asyncio.to_thread(redeploy, delay)
        ready = await await_ready(endpoint, tier.name, timeout_s=ready_timeout_s)
        if not ready.ready:
            points.append(SweepPoint(max_queue_delay_microseconds=delay, ready=False, reason=ready.reason))
            continue
        before = await scrape(endpoint.metrics_url)
        run = await run_level(endpoint.base, Api.KSERVE_INFER, endpoint.model, Level(kind="rate", value=rate), wl,
                              tag=f"{tier.name}-qd{delay}-")
        summary = summarize(run, tier.slo)
        gate = slo_gate(tier.name, summary, tier.slo)
        points.append(SweepPoint(max_queue_delay_microseconds=delay, ready=True, summary=summary,
                                 batching=batching(before, await scrape(endpoint.metrics_url)),
                                 meets_slo=gate.passed, reason=gate.message))
        say(f"{tier.name}: {delay} us: {gate.message}")
    best, met, reason = choose(points)
    return QueueDelayDecision(
        tier=tier.name, model=endpoint.model, request_rate=rate, slo=tier.slo,
        configured_us=settings.dynamic_batching.max_queue_delay_microseconds, points=points,
        best_us=best.max_queue_delay_microseconds if best else None, met_slo=met, reason=reason,
        simulated=bool(points) and all(p.summary.simulated for p in points if p.summary), started=started,
        finished=_now())


def sweep(endpoint: Endpoint, tier: Tier, redeploy: Redeploy, **kwargs: object) -> QueueDelayDecision:
    return asyncio.run(asweep(endpoint, tier, redeploy, **kwargs))  # type: ignore[arg-type]


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def markdown(d: QueueDelayDecision) -> str:
    sim = " (SIMULATED engine)" if d.simulated else ""
    lines = [
        f"# Queue-delay sweep: tier {d.tier}, model {d.model}{sim}",
        "",
        f"Offered load: Poisson, {d.request_rate:g} requests/s. SLO: e2e p99 "
        f"{_cell(d.slo.e2e_ms_p99, 'g')} ms, goodput >= {d.slo.goodput_min:.0%}.",
        "",
        "| max_queue_delay_microseconds | req/s | p50 ms | p99 ms | goodput | mean batch | queue us | SLO |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in d.points:
        s, b = p.summary, p.batching
        if s is None:
            lines.append(f"| {p.max_queue_delay_microseconds} | - | - | - | - | - | - | not measured: {p.reason} |")
            continue
        lines.append(
            f"| {p.max_queue_delay_microseconds} | {s.request_throughput:.1f} | {_cell(s.e2e.p50, '.1f')} | "
            f"{_cell(s.e2e.p99, '.1f')} | {_cell(s.goodput, '.1%')} | "
            f"{_cell(b.mean_batch_size if b else None, '.2f')} | {_cell(b.mean_queue_us if b else None, '.0f')} | "
            f"{'met' if p.meets_slo else 'missed'} |")
    verdict = (f"**Best: {d.best_us} us.** {d.reason}." if d.best_us is not None else f"**No best setting.** "
               f"{d.reason}.")
    same = d.best_us == d.configured_us
    lines += ["", verdict,
              f"cluster.yml sets {d.configured_us} us" + (" (the best)." if same else
                                                         f"; the sweep advises {d.best_us} us.")]
    return "\n".join(lines) + "\n"


def write(directory: Path, decision: QueueDelayDecision) -> list[Path]:
    """<directory>/queue-delay.json and .md (the decision record of the sweep)."""
    js, md = directory / f"{RECORD}.json", directory / f"{RECORD}.md"
    write_atomic(js, json.dumps(decision.model_dump(mode="json"), indent=2) + "\n")
    write_atomic(md, markdown(decision))
    return [js, md]
