"""From request results to the benchmark's numbers: latency percentiles, throughput, goodput."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from gridready.bench.client import LevelRun
from gridready.bench.protocols import RequestResult
from gridready.bench.workload import Level
from gridready.spec.serving import Slo


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Stats(BaseModel):
    """Milliseconds. Empty when nothing was measured (n = 0; values null)."""

    model_config = ConfigDict(extra="forbid")

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def of_seconds(cls, values: Sequence[float]) -> Stats:
        if not values:
            return cls()
        ms = [v * 1000.0 for v in values]
        return cls(n=len(ms), mean=sum(ms) / len(ms), p50=percentile(ms, 50), p90=percentile(ms, 90),
                   p99=percentile(ms, 99), min=min(ms), max=max(ms))


class LevelSummary(BaseModel):
    """One load level's results, as written to results.json and compared in decision records."""

    model_config = ConfigDict(extra="forbid")

    level: Level
    completed: int
    failed: int
    duration_s: float
    request_throughput: float  # completed requests / s
    output_throughput: float  # output tokens / s
    total_token_throughput: float  # (prompt + output) tokens / s
    goodput: float | None  # share of all requests that met every SLO (None: no requests)
    goodput_rps: float  # requests meeting every SLO / s
    ttft: Stats
    tpot: Stats
    itl: Stats
    e2e: Stats
    send_lag: Stats  # actual - scheduled send time (client overhead; rate mode)
    mean_input_tokens: float
    mean_output_tokens: float
    max_in_flight: int
    errors: list[str]
    simulated: bool


def meets_slo(r: RequestResult, slo: Slo) -> bool:
    """A request counts toward goodput when it succeeded and met every SLO the spec sets."""
    if not r.ok:
        return False
    checks = (("ttft", slo.ttft_ms_p99, r.ttft), ("tpot", slo.tpot_ms_p99, r.tpot), ("e2e", slo.e2e_ms_p99, r.e2e))
    for name, limit, value in checks:
        if limit is None:
            continue
        if value is None:
            if name == "tpot" and r.output_tokens < 2:
                continue  # TPOT is undefined for one-token answers
            return False
        if value * 1000.0 > limit:
            return False
    return True


def _max_in_flight(results: list[RequestResult]) -> int:
    edges = sorted([(r.sent, 1) for r in results] + [(r.sent + (r.e2e or 0.0), -1) for r in results],
                   key=lambda e: (e[0], e[1]))
    cur = peak = 0
    for _t, d in edges:
        cur += d
        peak = max(peak, cur)
    return peak


def summarize(run: LevelRun, slo: Slo) -> LevelSummary:
    rs = run.results
    ok = [r for r in rs if r.ok]
    dur = run.wall_s if run.wall_s > 0 else math.nan
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    good = sum(1 for r in rs if meets_slo(r, slo))
    errors = list(dict.fromkeys(r.error for r in rs if r.error))[:5]

    def rate(x: float) -> float:
        return 0.0 if math.isnan(dur) else x / dur

    return LevelSummary(
        level=run.level, completed=len(ok), failed=len(rs) - len(ok), duration_s=0.0 if math.isnan(dur) else dur,
        request_throughput=rate(len(ok)), output_throughput=rate(out_tokens),
        total_token_throughput=rate(out_tokens + in_tokens),
        goodput=(good / len(rs)) if rs else None, goodput_rps=rate(good),
        ttft=Stats.of_seconds([r.ttft for r in ok if r.ttft is not None]),
        tpot=Stats.of_seconds([t for r in ok if (t := r.tpot) is not None]),
        itl=Stats.of_seconds([x for r in ok for x in r.itl]),
        e2e=Stats.of_seconds([r.e2e for r in ok if r.e2e is not None]),
        send_lag=Stats.of_seconds([max(0.0, r.sent - r.scheduled) for r in rs]) if run.level.kind == "rate"
        else Stats(),
        mean_input_tokens=in_tokens / len(ok) if ok else 0.0, mean_output_tokens=out_tokens / len(ok) if ok else 0.0,
        max_in_flight=_max_in_flight(ok), errors=[e for e in errors if e],
        simulated=bool(rs) and all(r.simulated for r in rs if r.status),
    )
