"""The canary gate on /metrics scrapes as vLLM writes them, not as the simulator's registry does.

No vLLM /metrics capture can be had here (no engine runs on this machine), so the scrape is derived from vLLM's own
source: the histograms are declared as vllm-project/vllm `vllm/v1/metrics/loggers.py` (PrometheusStatLogger) declares
them (names, documentation, labelnames ["model_name", "engine"], bucket bounds; @005a810bc40f for TTFT, per-token and
e2e, and the per-request `vllm:request_time_per_output_token_seconds` from the later loggers.py, same bounds as the
per-token one) and rendered by prometheus_client, the library vLLM serves /metrics with: HELP/TYPE lines, labels in
its order, `_count`/`_sum`/`_created` beside the buckets, one label set per engine of a data-parallel server.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from gridready.bench import canary_gate
from gridready.spec import Slo

# vllm/v1/metrics/loggers.py: name -> (documentation, buckets)
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0]
VLLM_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": (
        "Histogram of time to first token in seconds.",
        [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
         160.0, 640.0, 2560.0]),
    "vllm:time_per_output_token_seconds": ("Histogram of time per output token in seconds.", TPOT_BUCKETS),
    "vllm:request_time_per_output_token_seconds": (
        "Histogram of time_per_output_token_seconds per request.", TPOT_BUCKETS),
    "vllm:e2e_request_latency_seconds": (
        "Histogram of e2e request latency in seconds.",
        [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
         1920.0, 7680.0]),
}
MODEL = "llama-3.3-70b"
SLO = Slo(ttft_ms_p99=200, tpot_ms_p99=60, e2e_ms_p99=5000)


class VllmServer:
    """The four histograms of one vLLM API server on their own registry; each engine a label set."""

    def __init__(self, per_request_tpot: bool = True) -> None:
        self.registry = CollectorRegistry()
        self.hist = {name: Histogram(name, doc, labelnames=["model_name", "engine"], buckets=buckets,
                                     registry=self.registry)
                     for name, (doc, buckets) in VLLM_HISTOGRAMS.items()
                     if per_request_tpot or name != "vllm:request_time_per_output_token_seconds"}

    def serve(self, n: int, ttft: float, tpot: float, tokens: int = 64, engine: int = 0, itl: float | None = None
              ) -> None:
        """n finished requests on one engine, as loggers.py records them: TTFT and e2e once per request, the
        per-token histogram once per decoded token (here `itl`), the per-request TPOT once per request."""
        labels = (MODEL, str(engine))
        for _ in range(n):
            self.hist["vllm:time_to_first_token_seconds"].labels(*labels).observe(ttft)
            self.hist["vllm:e2e_request_latency_seconds"].labels(*labels).observe(ttft + tokens * tpot)
            if "vllm:request_time_per_output_token_seconds" in self.hist:
                self.hist["vllm:request_time_per_output_token_seconds"].labels(*labels).observe(tpot)
            for _ in range(4):  # a sample of the decode steps
                self.hist["vllm:time_per_output_token_seconds"].labels(*labels).observe(itl or tpot)

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()


def test_the_scrape_is_vllms_exposition() -> None:
    server = VllmServer()
    server.serve(1, ttft=0.03, tpot=0.02, engine=1)
    text = server.scrape()
    assert "# TYPE vllm:time_to_first_token_seconds histogram" in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="1",le="0.04",model_name="llama-3.3-70b"} 1.0' in text
    assert 'vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf",model_name="llama-3.3-70b"} 1.0' in text
    assert "vllm:e2e_request_latency_seconds_created{" in text
    assert canary_gate.histogram(text, "vllm:e2e_request_latency_seconds")[7680.0] == 1.0
    assert len(canary_gate.histogram(text, "vllm:time_to_first_token_seconds")) == 23  # 22 bounds and +Inf


def test_healthy_canary_passes_with_the_interpolated_p99s() -> None:
    server = VllmServer()
    server.serve(500, ttft=3.0, tpot=0.3)  # before the window: slow, must not count
    before = server.scrape()
    server.serve(100, ttft=0.03, tpot=0.02)  # e2e 0.03 + 64 * 0.02 = 1.31 s
    gate = canary_gate.judge(before, server.scrape(), SLO, min_requests=50)
    assert gate.passed and gate.requests == 100, gate.reason
    # every request in one bucket: p99 = lower + width * 0.99 (PromQL histogram_quantile)
    assert {c.slo: c.measured_ms for c in gate.checks} == {
        "ttft_ms_p99": pytest.approx(39.8), "tpot_ms_p99": pytest.approx(24.85), "e2e_ms_p99": pytest.approx(1495.0)}
    assert gate.reason == "canary met every SLO over 100 requests"


def test_data_parallel_engines_are_summed() -> None:
    server = VllmServer()
    before = server.scrape()
    server.serve(60, ttft=0.03, tpot=0.02, engine=0)
    server.serve(40, ttft=0.3, tpot=0.02, engine=1)  # the slow engine's 40% decide the p99
    gate = canary_gate.judge(before, server.scrape(), SLO, min_requests=50)
    assert gate.requests == 100 and not gate.passed and gate.failed_slo == "ttft_ms_p99"
    assert gate.checks[0].measured_ms == pytest.approx(493.75)  # rank 99 of 100: 0.25 + 0.25 * 39 / 40
    assert gate.reason == "canary ttft_ms_p99 493.75 ms > 200 ms over 100 requests"


def test_tpot_is_the_per_request_histogram_not_the_per_token_one() -> None:
    """vLLM also keeps a per-decode-step histogram; a request's TPOT SLO reads the per-request one."""
    server = VllmServer()
    before = server.scrape()
    server.serve(100, ttft=0.03, tpot=0.02, itl=0.7)  # slow single steps, fast requests on average
    gate = canary_gate.judge(before, server.scrape(), SLO, min_requests=50)
    assert gate.passed, gate.reason
    slow = VllmServer()
    before = slow.scrape()
    slow.serve(100, ttft=0.03, tpot=0.09, itl=0.02)
    gate = canary_gate.judge(before, slow.scrape(), SLO, min_requests=50)
    assert gate.failed_slo == "tpot_ms_p99" and gate.checks[1].measured_ms == pytest.approx(99.75)


def test_a_vllm_without_the_per_request_tpot_never_passes_a_tpot_slo() -> None:
    """loggers.py @005a810b has no vllm:request_time_per_output_token_seconds: no reading is a failure."""
    server = VllmServer(per_request_tpot=False)
    before = server.scrape()
    server.serve(100, ttft=0.03, tpot=0.02)
    gate = canary_gate.judge(before, server.scrape(), SLO, min_requests=50)
    assert not gate.passed and gate.failed_slo == "tpot_ms_p99" and gate.checks[1].measured_ms is None
    ok = canary_gate.judge(before, server.scrape(), Slo(ttft_ms_p99=200, e2e_ms_p99=5000), min_requests=50)
    assert ok.passed  # without a TPOT SLO the missing histogram is not read


def test_too_few_requests_and_latencies_past_the_last_bucket() -> None:
    server = VllmServer()
    before = server.scrape()
    server.serve(49, ttft=0.03, tpot=0.02)
    gate = canary_gate.judge(before, server.scrape(), SLO, min_requests=50)
    assert not gate.passed and gate.failed_slo == "requests" and gate.requests == 49
    stuck = VllmServer()
    before = stuck.scrape()
    stuck.serve(100, ttft=0.03, tpot=150.0, tokens=64)  # e2e 9600 s: past 7680, in +Inf
    gate = canary_gate.judge(before, stuck.scrape(), SLO, min_requests=50)
    e2e = next(c for c in gate.checks if c.slo == "e2e_ms_p99")
    assert e2e.measured_ms == 7680000.0 and not e2e.passed  # the highest finite bound, as PromQL answers
