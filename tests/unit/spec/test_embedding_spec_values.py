"""tiers[].embedding (engine triton-embedding) at the value level: tensor dimensions (positive or -1), the dynamic
batcher's preferred sizes (distinct, sorted, at most max_batch_size: Triton refuses "dynamic batching preferred size
must be <= max batch size"), KIND_GPU-only GPU lists, positive bench rates, the queue-delay sweep's settings, and
what a fixed-cost tier may not carry, each with the exact one-line error."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.spec.embedding import (
    DynamicBatching,
    EmbeddingBench,
    EmbeddingSettings,
    InstanceGroup,
    QueueDelaySweep,
    Tensor,
)
from gridready.spec.serving import Tier
from tests.unit.spec.spec_lines import lines
from tests.unit.spec.test_rule_messages_tiers import EMBED

SETTINGS: dict[str, Any] = EMBED["embedding"]


def settings(**over: Any) -> dict[str, Any]:
    return {**copy.deepcopy(SETTINGS), **over}


@pytest.mark.parametrize(("dims", "ok"), [
    ([-1], True), ([1], True), ([-1, 384], True), ([3, 224, 224], True),
    ([0], False), ([-2], False), ([384, 0], False), ([-1, -3], False),
])
def test_tensor_dims(dims, ok):
    want = [] if ok else [f"cluster.yml: dims: each dimension is a positive size or -1 (variable), got {dims}"]
    assert lines(Tensor, {"name": "x", "data_type": "TYPE_FP32", "dims": dims}) == want


@pytest.mark.parametrize(("sizes", "kept", "error"), [
    ([], [], None), ([8], [8], None), ([32, 8, 16], [8, 16, 32], None),
    ([8, 16, 8], None, "cluster.yml: preferred_batch_size: sizes must be distinct, got [8, 16, 8]"),
])
def test_preferred_batch_sizes_distinct_and_sorted(sizes, kept, error):
    if error:
        assert lines(DynamicBatching, {"preferred_batch_size": sizes}) == [error]
    else:
        assert DynamicBatching.model_validate({"preferred_batch_size": sizes}).preferred_batch_size == kept


@pytest.mark.parametrize(("data", "want"), [
    ({"gpus": [0, 1]}, []), ({"kind": "KIND_CPU"}, []), ({"kind": "KIND_GPU"}, []),
    ({"kind": "KIND_GPU", "gpus": []}, []),
    ({"kind": "KIND_CPU", "gpus": [0]}, ["cluster.yml: (top level): gpus apply to KIND_GPU groups only"]),
    ({"kind": "KIND_CPU", "gpus": []}, ["cluster.yml: (top level): gpus apply to KIND_GPU groups only"]),
])
def test_gpus_only_for_gpu_groups(data, want):
    assert lines(InstanceGroup, data) == want


@pytest.mark.parametrize(("rates", "ok"), [
    ([20.0], True), ([0.001, 100.0], True), ([0.0], False), ([20.0, -1.0], False), ([5.0, 0.0, 9.0], False),
])
def test_bench_rates_positive(rates, ok):
    want = [] if ok else [f"cluster.yml: request_rates: rates must be positive, got {rates}"]
    assert lines(EmbeddingBench, {"request_rates": rates}) == want


@pytest.mark.parametrize(("delays", "want"), [
    ([0, 100], []), ([0, 10_000_000], []),
    ([0, 100, 0], ["cluster.yml: max_queue_delay_microseconds: settings must be distinct, got [0, 100, 0]"]),
    ([0, 10_000_001], ["cluster.yml: max_queue_delay_microseconds: each setting must be <= 10000000 (10 s)"]),
])
def test_sweep_settings(delays, want):
    assert lines(QueueDelaySweep, {"max_queue_delay_microseconds": delays}) == want


def test_delays_are_the_sweeps_settings_or_none():
    assert EmbeddingSettings.model_validate(settings()).delays() == []
    swept = EmbeddingSettings.model_validate(settings(sweep={"max_queue_delay_microseconds": [500, 0, 100]}))
    assert swept.delays() == [500, 0, 100]


@pytest.mark.parametrize(("backend", "platform", "file"), [
    ("onnxruntime", "onnxruntime_onnx", "model.onnx"), ("tensorrt", "tensorrt_plan", "model.plan")])
def test_backend_platform_and_default_file(backend, platform, file):
    emb = EmbeddingSettings.model_validate(settings(backend=backend))
    assert (emb.platform, emb.default_file) == (platform, file)


@pytest.mark.parametrize(("over", "want"), [
    ({"max_batch_size": 16, "dynamic_batching": {"preferred_batch_size": [8, 16]}}, []),
    ({"max_batch_size": 16, "dynamic_batching": {"preferred_batch_size": [8, 17, 32]}},
     ["cluster.yml: (top level): dynamic_batching.preferred_batch_size [17, 32] exceeds max_batch_size 16"]),
    ({"outputs": [{"name": "input_ids", "data_type": "TYPE_FP32", "dims": [4]}]},
     ["cluster.yml: (top level): input and output names must be distinct, got ['input_ids', 'input_ids']"]),
    ({"inputs": [{"name": "a", "data_type": "TYPE_INT64", "dims": [-1]},
                 {"name": "a", "data_type": "TYPE_INT64", "dims": [-1]}]},
     ["cluster.yml: (top level): input and output names must be distinct, got ['a', 'a', 'last_hidden_state']"]),
    ({"inputs": [{"name": "ids", "data_type": "TYPE_INT64", "dims": [-1], "fill": "ones"}]}, []),
    ({"outputs": [{"name": "o", "data_type": "TYPE_FP32", "dims": [4], "fill": "zeros"}]},
     ["cluster.yml: (top level): outputs take no `fill` (only inputs are sent)"]),
    ({"outputs": [{"name": "o", "data_type": "TYPE_FP32", "dims": [4]},
                  {"name": "p", "data_type": "TYPE_FP32", "dims": [4], "fill": "random"}]},
     ["cluster.yml: (top level): outputs take no `fill` (only inputs are sent)"]),
])
def test_settings_consistent(over, want):
    assert lines(EmbeddingSettings, settings(**over)) == want


def embed_tier(**over: Any) -> dict[str, Any]:
    return {**copy.deepcopy(EMBED), **over}


P = "cluster.yml: (top level): "
PP = ("triton-embedding: pipeline_parallel must be 1 or derive (each replica is one node; tensor_parallel is the "
      "number of the node's GPUs it uses)")
TOKENS = "triton-embedding: a fixed-cost model streams no tokens; set slo.e2e_ms_p99, not ttft/tpot"
LLM = "triton-embedding: lora_adapters, quantization and extra_engine_args are LLM settings"
NO_FILE = "triton-embedding: a model.hf_id needs embedding.model_file (the file in the snapshot, e.g. onnx/model.onnx)"
LOCAL = "triton-embedding: model.local_path is the model file itself; drop embedding.model_file"


@pytest.mark.parametrize(("over", "want"), [
    ({}, []),
    ({"pipeline_parallel": 1}, []), ({"pipeline_parallel": "derive"}, []),
    ({"pipeline_parallel": 2}, [P + PP]),
    ({"slo": {"e2e_ms_p99": 50.0}}, []),
    ({"slo": {"ttft_ms_p99": 50.0}}, [P + TOKENS]), ({"slo": {"tpot_ms_p99": 5.0}}, [P + TOKENS]),
    ({"lora_adapters": [{"name": "a", "path": "/l/a"}]}, [P + LLM]),
    ({"quantization": "fp8"}, [P + LLM]),
    ({"extra_engine_args": {"seed": 1}}, [P + LLM]),
    ({"embedding": settings(model_file=None)}, [P + NO_FILE]),
    ({"model": {"local_path": "/models/bge/model.onnx"}, "embedding": settings(model_file=None)}, []),
    ({"model": {"local_path": "/models/bge/model.onnx"}}, [P + LOCAL]),
    ({"pipeline_parallel": 4, "slo": {"ttft_ms_p99": 9.0}, "quantization": "awq"}, [P + "; ".join([PP, TOKENS, LLM])]),
])
def test_what_a_fixed_cost_tier_cannot_have(over, want):
    assert lines(Tier, embed_tier(**over)) == want


def test_a_fixed_cost_tier_runs_one_node_per_replica():
    assert Tier.model_validate(embed_tier()).pipeline_parallel == 1
    assert Tier.model_validate(embed_tier(pipeline_parallel="derive")).pipeline_parallel == 1
