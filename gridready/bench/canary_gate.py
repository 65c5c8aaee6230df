"""The canary's SLO gate on live metrics: p99s from the engine's own Prometheus histograms over the observed window.

Two scrapes of the canary's /metrics (before and after the window) give per-bucket deltas; the p99 is interpolated
inside its bucket as PromQL's histogram_quantile does
(https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile).
Metric names are vLLM's ("Production Metrics", https://docs.vllm.ai/en/latest/usage/metrics.html):
time_to_first_token_seconds, request_time_per_output_token_seconds, e2e_request_latency_seconds.
Too few requests in the window fails the gate: it never passes on missing data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pydantic import BaseModel

from gridready.spec import Slo

LINE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
LE = re.compile(r'le="([^"]+)"')
SLO_METRICS = {  # SLO field -> vLLM histogram (seconds)
    "ttft_ms_p99": "vllm:time_to_first_token_seconds",
    "tpot_ms_p99": "vllm:request_time_per_output_token_seconds",
    "e2e_ms_p99": "vllm:e2e_request_latency_seconds",
}

Buckets = dict[float, float]  # upper bound (inf for +Inf) -> cumulative count, summed over label sets


def histogram(text: str, name: str) -> Buckets:
    """Cumulative buckets of one histogram in Prometheus text exposition, summed over its other labels."""
    out: Buckets = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or m["name"] != f"{name}_bucket":
            continue
        le = LE.search(m["labels"] or "")
        if le:
            bound = math.inf if le[1] == "+Inf" else float(le[1])
            out[bound] = out.get(bound, 0.0) + float(m["value"])
    return out


def delta(before: Buckets, after: Buckets) -> Buckets:
    return {le: after[le] - before.get(le, 0.0) for le in after}


def quantile(q: float, buckets: Buckets) -> float:
    """histogram_quantile over cumulative buckets; nan without observations; the highest finite bound when the
    quantile falls in +Inf."""
    bounds = sorted(buckets)
    total = buckets.get(math.inf, buckets[bounds[-1]] if bounds else 0.0)
    if not bounds or total <= 0:
        return math.nan
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return prev_le
            inside = count - prev_count
            return le if inside <= 0 else prev_le + (le - prev_le) * (rank - prev_count) / inside
        prev_le, prev_count = le, count
    return prev_le


class SloCheck(BaseModel):
    slo: str
    limit_ms: float
    measured_ms: float | None
    passed: bool


class CanaryGate(BaseModel):
    requests: int
    checks: list[SloCheck]
    passed: bool
    failed_slo: str | None
    reason: str


def judge(before: str, after: str, slo: Slo, min_requests: int) -> CanaryGate:
    """The gate over the window between two /metrics scrapes of the canary."""
    e2e = delta(histogram(before, SLO_METRICS["e2e_ms_p99"]), histogram(after, SLO_METRICS["e2e_ms_p99"]))
    requests = int(e2e.get(math.inf, 0.0))
    checks: list[SloCheck] = []
    for field, metric in SLO_METRICS.items():
        limit = getattr(slo, field)
        if limit is None:
            continue
        p99 = quantile(0.99, delta(histogram(before, metric), histogram(after, metric)))
        measured = None if math.isnan(p99) else round(p99 * 1000, 2)
        checks.append(SloCheck(slo=field, limit_ms=limit, measured_ms=measured,
                               passed=measured is not None and measured <= limit))
    if requests < min_requests:
        return CanaryGate(requests=requests, checks=checks, passed=False, failed_slo="requests",
                          reason=f"canary served {requests} requests in the window, fewer than {min_requests}")
    failed = next((c for c in checks if not c.passed), None)
    if failed:
        return CanaryGate(requests=requests, checks=checks, passed=False, failed_slo=failed.slo,
                          reason=f"canary {failed.slo} {failed.measured_ms} ms > {failed.limit_ms:g} ms "
                                 f"over {requests} requests")
    return CanaryGate(requests=requests, checks=checks, passed=True, failed_slo=None,
                      reason=f"canary met every SLO over {requests} requests")


def weights_after(gate: CanaryGate, current: Mapping[str, int], canary: str) -> dict[str, int]:
    """Promote (canary alone) or roll back (the canary removed, the others as they were)."""
    if gate.passed:
        return {canary: 1}
    return {t: w for t, w in current.items() if t != canary}
