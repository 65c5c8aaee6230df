"""The fixed-cost benchmark: KServe v2 requests from the model's tensors, output checks, Triton's batching
counters, and the queue-delay sweep's choice and record."""

from __future__ import annotations

import json
import math

from gridready.bench import fixed_cost, queue_delay
from gridready.bench.protocols import Api, build
from gridready.bench.stats import LevelSummary, Stats
from gridready.bench.workload import Level
from gridready.spec.embedding import EmbeddingSettings
from gridready.spec.serving import Slo

SETTINGS = EmbeddingSettings.model_validate({
    "model_file": "onnx/model.onnx",
    "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]},
               {"name": "attention_mask", "data_type": "TYPE_INT64", "dims": [-1], "fill": "ones"},
               {"name": "pixel_bias", "data_type": "TYPE_FP32", "dims": [3]}],
    "outputs": [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 4]}],
    "bench": {"seq_len": 5, "request_rates": [10, 50], "requests": 7},
})


def test_requests_carry_the_models_tensors_with_batch_one() -> None:
    wl = fixed_cost.workload_for(SETTINGS)
    assert wl.api is Api.KSERVE_INFER and [lv.value for lv in wl.levels()] == [10, 50]
    prompts = wl.prompts()
    assert len(prompts) == 7
    ids, mask, bias = prompts[0].inputs
    assert ids["shape"] == [1, 5] and ids["datatype"] == "INT64" and len(ids["data"]) == 5
    assert all(isinstance(v, int) and 1000 <= v < 30000 for v in ids["data"])
    assert mask["data"] == [1] * 5
    assert bias["datatype"] == "FP32" and bias["shape"] == [1, 3] and all(isinstance(v, float) for v in bias["data"])
    path, body = build(Api.KSERVE_INFER, "bge-small", prompts[0], stream=True)
    assert path == "/v2/models/bge-small/infer" and body == {"inputs": list(prompts[0].inputs)}
    assert json.loads(json.dumps(body)) == body


def test_outputs_are_checked_against_the_spec() -> None:
    good = {"outputs": [{"name": "last_hidden_state", "datatype": "FP32", "shape": [1, 5, 4],
                         "data": [0.5] * 20}]}
    assert fixed_cost._check_outputs(SETTINGS, good) == []
    wrong_shape = {"outputs": [{**good["outputs"][0], "shape": [1, 4]}]}
    assert "expected FP32 [1, 5, 4]" in fixed_cost._check_outputs(SETTINGS, wrong_shape)[0]
    short = {"outputs": [{**good["outputs"][0], "data": [0.5] * 19}]}
    assert "19 values, expected 20" in fixed_cost._check_outputs(SETTINGS, short)[0]
    zeros = {"outputs": [{**good["outputs"][0], "data": [0.0] * 20}]}
    assert "no finite non-zero value" in fixed_cost._check_outputs(SETTINGS, zeros)[0]
    assert fixed_cost._check_outputs(SETTINGS, {"outputs": []}) == ["output 'last_hidden_state' missing"]


def test_batching_is_read_from_the_counters_difference() -> None:
    before = {"nv_inference_count": 100.0, "nv_inference_exec_count": 50.0, "nv_inference_request_success": 100.0,
              "nv_inference_queue_duration_us": 1000.0}
    after = {"nv_inference_count": 260.0, "nv_inference_exec_count": 70.0, "nv_inference_request_success": 260.0,
             "nv_inference_queue_duration_us": 81000.0}
    reading = fixed_cost.batching(before, after)
    assert reading is not None and reading.mean_batch_size == 8.0 and reading.mean_queue_us == 500.0
    assert fixed_cost.batching(None, after) is None
    assert fixed_cost.batching(before, {"vllm:x": 1.0}) is None


def _point(delay: int, p99: float | None, goodput: float, meets: bool) -> queue_delay.SweepPoint:
    e2e = Stats(n=10, p50=(p99 or 0) / 2, p99=p99) if p99 is not None else Stats()
    summary = LevelSummary(
        level=Level(kind="rate", value=50), completed=10 if p99 is not None else 0, failed=0, duration_s=1.0,
        request_throughput=10.0, output_throughput=0.0, total_token_throughput=0.0, goodput=goodput,
        goodput_rps=goodput * 10, ttft=Stats(), tpot=Stats(), itl=Stats(), e2e=e2e, send_lag=Stats(),
        mean_input_tokens=5.0, mean_output_tokens=0.0, max_in_flight=3, errors=[], simulated=True)
    return queue_delay.SweepPoint(max_queue_delay_microseconds=delay, ready=True, summary=summary,
                                  batching=fixed_cost.BatchingReading(inferences=10, executions=5,
                                                                      mean_batch_size=2.0, mean_queue_us=100.0),
                                  meets_slo=meets, reason="gate")


def test_the_best_setting_is_the_lowest_p99_that_meets_the_slo() -> None:
    points = [_point(0, 40.0, 0.95, True), _point(500, 12.0, 1.0, True), _point(5000, 9.0, 0.5, False)]
    best, met, why = queue_delay.choose(points)
    assert best is not None and best.max_queue_delay_microseconds == 500 and met
    assert "lowest p99 (12.0 ms) of the 2 setting(s)" in why


def test_without_a_passing_setting_the_highest_goodput_is_named_and_flagged() -> None:
    points = [_point(0, 40.0, 0.6, False), _point(500, 30.0, 0.8, False), _point(900, None, 0.0, False)]
    best, met, why = queue_delay.choose(points)
    assert best is not None and best.max_queue_delay_microseconds == 500 and not met
    assert why.startswith("no setting met the SLO")
    assert queue_delay.choose([queue_delay.SweepPoint(max_queue_delay_microseconds=0, ready=False,
                                                      reason="not ready")]) == (None, False,
                                                                                "no setting could be measured")


def test_the_record_shows_every_setting_and_the_advice(tmp_path) -> None:
    points = [_point(0, 40.0, 0.95, True), _point(500, 12.0, 1.0, True),
              queue_delay.SweepPoint(max_queue_delay_microseconds=9000, ready=False, reason="unit failed")]
    best, met, why = queue_delay.choose(points)
    decision = queue_delay.QueueDelayDecision(
        tier="embed", model="bge-small", request_rate=50, slo=Slo(e2e_ms_p99=100), configured_us=0,
        points=points, best_us=best.max_queue_delay_microseconds if best else None, met_slo=met, reason=why,
        simulated=True, started="t0", finished="t1")
    js, md = queue_delay.write(tmp_path, decision)
    assert json.loads(js.read_text())["best_us"] == 500
    text = md.read_text()
    assert "| 500 | 10.0 | 6.0 | 12.0 | 100.0% | 2.00 | 100 | met |" in text
    assert "| 9000 | - | - | - | - | - | - | not measured: unit failed |" in text
    assert "**Best: 500 us.**" in text and "cluster.yml sets 0 us; the sweep advises 500 us." in text
    assert "SIMULATED" in text and not math.isnan(decision.request_rate)
