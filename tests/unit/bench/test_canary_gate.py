"""The canary gate: p99s from deltas of vLLM histograms (rendered by the simulator's registry, vLLM's names)."""

from __future__ import annotations

import math

import pytest

from gridready.bench import canary_gate
from gridready.spec import Slo
from sandbox.engine.metrics import Registry

BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def engine_metrics() -> tuple[Registry, dict[str, object]]:
    reg = Registry()
    hists = {name: reg.histogram(name, "h", BUCKETS) for name in canary_gate.SLO_METRICS.values()}
    return reg, hists


def observe(hists: dict[str, object], n: int, ttft_s: float, tpot_s: float, tier: str = "next") -> None:
    labels = (("model_name", "llama"), ("tier", tier))
    for _ in range(n):
        hists["vllm:time_to_first_token_seconds"].observe(labels, ttft_s)  # type: ignore[attr-defined]
        hists["vllm:request_time_per_output_token_seconds"].observe(labels, tpot_s)  # type: ignore[attr-defined]
        hists["vllm:e2e_request_latency_seconds"].observe(labels, ttft_s + 16 * tpot_s)  # type: ignore[attr-defined]


def test_quantile_interpolates_inside_the_bucket() -> None:
    buckets = {0.1: 50.0, 0.2: 100.0, math.inf: 100.0}
    assert canary_gate.quantile(0.5, buckets) == pytest.approx(0.1)
    assert canary_gate.quantile(0.99, buckets) == pytest.approx(0.198)
    assert math.isnan(canary_gate.quantile(0.99, {math.inf: 0.0}))


def test_only_the_window_counts() -> None:
    reg, hists = engine_metrics()
    observe(hists, 200, ttft_s=3.0, tpot_s=0.2)  # before the window: slow
    before = reg.render()
    observe(hists, 50, ttft_s=0.04, tpot_s=0.02)
    gate = canary_gate.judge(before, reg.render(), Slo(ttft_ms_p99=200, tpot_ms_p99=60), min_requests=20)
    assert gate.passed, gate.reason
    assert gate.requests == 50
    assert {c.slo: c.measured_ms for c in gate.checks}["ttft_ms_p99"] <= 50


def test_slow_canary_fails_naming_the_slo() -> None:
    reg, hists = engine_metrics()
    before = reg.render()
    observe(hists, 40, ttft_s=0.04, tpot_s=0.3)
    gate = canary_gate.judge(before, reg.render(), Slo(ttft_ms_p99=200, tpot_ms_p99=60), min_requests=20)
    assert not gate.passed
    assert gate.failed_slo == "tpot_ms_p99"
    assert "tpot_ms_p99" in gate.reason


def test_no_traffic_never_passes() -> None:
    reg, _ = engine_metrics()
    text = reg.render()
    gate = canary_gate.judge(text, text, Slo(ttft_ms_p99=200), min_requests=1)
    assert not gate.passed and gate.failed_slo == "requests"


def test_weights_after_promote_and_rollback() -> None:
    reg, hists = engine_metrics()
    before = reg.render()
    observe(hists, 30, ttft_s=0.04, tpot_s=0.02)
    ok = canary_gate.judge(before, reg.render(), Slo(ttft_ms_p99=200), min_requests=10)
    assert canary_gate.weights_after(ok, {"batch": 90, "next": 10}, "next") == {"next": 1}
    bad = canary_gate.judge(before, before, Slo(ttft_ms_p99=200), min_requests=10)
    assert canary_gate.weights_after(bad, {"batch": 90, "next": 10}, "next") == {"batch": 90}
