"""Decision record: the same workload on a vLLM tier and a Triton tier serving one model -> decision.md/.json +
plots; the winner follows the spec's objective, with what would change it."""

from __future__ import annotations

import json

import pytest

from gridready.bench import DecisionSpec, Endpoint, Workload, decide, verify_tier, write_decision
from gridready.bench.protocols import Api
from gridready.spec.serving import Slo, Tier
from tests.unit.bench.conftest import start_engine, triton_repository

WL = Workload(concurrency=[1, 4], num_prompts=8, duration_s=5, input_len=16, output_len=8, warmup=0)
SLO = Slo(ttft_ms_p99=500, tpot_ms_p99=100)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decision")
    fast = start_engine(tmp, "--model", "m", "--ttft-ms", "20", "--itl-ms", "8", "--batch-slowdown", "0.02")
    slow = start_engine(tmp, "--mode", "triton", "--model-repository", triton_repository(tmp, "m"), "--ttft-ms", "30",
                        "--itl-ms", "16", "--batch-slowdown", "0.02")
    try:
        a = verify_tier(Endpoint(url=fast.url, model="m"),
                        Tier(name="fast-a", engine="vllm", model={"local_path": "/m"}, served_name="m", slo=SLO,
                             tensor_parallel=1), WL, gpus=1)
        b = verify_tier(Endpoint(url=slow.url, model="m", api=Api.TRITON_GENERATE),
                        Tier(name="trt-b", engine="triton-trtllm", model={"local_path": "/m"}, served_name="m",
                             slo=SLO, tensor_parallel=1), WL, gpus=1)
    finally:
        for e in (fast, slow):
            e.stop()
    assert a.ok and b.ok, (a.gate.message, b.gate.message)
    return [a, b]


def test_goodput_objective_picks_the_faster_tier_and_writes_the_record(reports, tmp_path):
    d = decide(reports, DecisionSpec(objective="goodput", gpu_hour_price_usd=4.0))
    assert d.winner == "fast-a" and d.decided_by == "goodput" and d.simulated
    a, b = d.tiers
    assert a.gpus == 1 and b.gpus == 1
    assert a.capacity_rps_at_slo > b.capacity_rps_at_slo > 0
    assert a.cost_per_mtok_usd == pytest.approx(4.0 * 1 / (a.output_tok_s_at_slo * 3600) * 1e6)
    assert any("trt-b would need" in w for w in d.what_would_change)
    assert any("simulated engine" in w for w in d.what_would_change)

    paths = write_decision(tmp_path, d, reports)
    for key in ("latency_plot", "throughput_plot"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[key].stat().st_size > 10_000
    md = paths["md"].read_text()
    assert "**Winner per GPU: fast-a**" in md and "SIMULATED" in md and "| **fast-a** (vllm, 1 GPU)" in md
    assert "![latency_percentiles.png](latency_percentiles.png)" in md and "What would change" in md
    data = json.loads(paths["json"].read_text())
    assert data["winner"] == "fast-a" and data["tiers"][1]["tier"] == "trt-b"


def test_tiers_on_different_gpus_are_compared_per_gpu(reports, tmp_path):
    """The faster tier on 4 GPUs serves more requests than the slower one on 1, but fewer per GPU: it loses, and the
    record says the comparison is per GPU and on how many GPUs each tier ran (issue 49: 8 GPUs against 1)."""
    big = reports[0].model_copy(update={"gpus": 4})
    d = decide([big, reports[1]], DecisionSpec(objective="goodput"))
    a, b = d.tiers
    assert a.capacity_rps_at_slo > b.capacity_rps_at_slo > a.capacity_rps_at_slo / 4
    assert d.winner == "trt-b" and d.decided_by == "goodput"
    assert d.reason.startswith("trt-b wins on goodput per GPU: ") and "fast-a on 4 GPUs" in d.reason
    md = write_decision(tmp_path, d, [big, reports[1]])["md"].read_text()
    assert "**Winner per GPU: trt-b**" in md and "compared per GPU: fast-a on 4 GPUs, trt-b on 1 GPU" in md


def test_the_ttft_panel_is_fitted_to_the_data(reports, tmp_path, monkeypatch):
    """TTFT of tens of ms under an SLO of 500 ms: the axis ends above the data, not at the SLO line, and says the
    SLO is above it."""
    from matplotlib.figure import Figure

    seen: list = []
    orig = Figure.savefig

    def keep(self, *a, **k):
        seen.extend(self.axes)
        orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    write_decision(tmp_path, decide(reports, DecisionSpec(objective="goodput")), reports)
    ttft = next(ax for ax in seen if ax.get_title().startswith("TTFT"))
    top = max(y for r in reports for lv in r.levels for y in (lv.ttft.p50, lv.ttft.p90, lv.ttft.p99) if y is not None)
    assert ttft.get_ylim()[1] < SLO.ttft_ms_p99 and top <= ttft.get_ylim()[1] <= 1.2 * top
    assert "SLO p99 500 ms: above this range" in ttft.get_ylabel()


def test_cost_objective_can_pick_the_cheaper_tier(reports):
    spec = DecisionSpec(objective="cost", gpu_hour_price_usd=4.0, tier_gpu_hour_price_usd={"trt-b": 0.5})
    d = decide(reports, spec)
    assert d.winner == "trt-b" and d.decided_by == "cost"
    assert d.by_objective["goodput"] == "fast-a"
    assert any("With objective 'goodput'" in w and "fast-a would win" in w for w in d.what_would_change)
    assert any("fast-a would win on cost if its cost per 1M tokens fell by" in w for w in d.what_would_change)


def test_decide_refuses_mismatched_inputs_and_names_the_model(reports):
    with pytest.raises(ValueError, match="at least two"):
        decide(reports[:1])
    other = reports[1].model_copy(update={"model": "ensemble"})  # same model source, another served name
    assert decide([reports[0], other]).model == "ensemble / m"
    assert decide([reports[0], other], model="meta-llama/Llama-3.1-8B").model == "meta-llama/Llama-3.1-8B"
    changed = reports[1].model_copy(update={"workload": WL.model_copy(update={"output_len": 9})})
    with pytest.raises(ValueError, match="different workloads"):
        decide([reports[0], changed])


def test_routing_inside_a_tier_joins_the_record_labelled_simulated(reports, tmp_path):
    """The cache-aware vs round-robin replay (benchmarks/router_cache_replay.py) in decision.json and decision.md."""
    from gridready.bench.decision import PolicyFigures, routing_comparison
    from gridready.bench.record import markdown

    aware = PolicyFigures(requests=288, failed=0, ttft_p50_ms=21.0, ttft_p90_ms=40.0, prefix_hit_rate=0.8,
                          seconds=9.0)
    rr = PolicyFigures(requests=288, failed=0, ttft_p50_ms=30.0, ttft_p90_ms=80.0, prefix_hit_rate=0.5, seconds=12.0)
    routing = routing_comparison(aware, rr, {"replicas": 2, "turns": 6}, router="vllm-router 0.1.17",
                                 simulated=True)
    assert routing.statement.startswith("SIMULATED engines: ") and "p90 TTFT 2.00x lower" in routing.statement
    d = decide(reports, DecisionSpec(objective="goodput")).model_copy(update={"routing": routing})
    md = markdown(d, [])
    assert "## Routing inside a tier: cache-aware vs round-robin (SIMULATED engines)" in md
    assert "| engines' prefix-cache hit rate | 80.0% | 50.0% |" in md and "| TTFT p90 (ms) | 40.0 | 80.0 |" in md
    back = type(d).model_validate_json(d.model_dump_json())
    assert back.routing == routing
