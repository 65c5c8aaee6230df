"""A serving tier of cluster.yml at the value level: its one model source, refused engines and names, settings
that belong to another engine, Triton's ports and parameters per mode, the autoscaling bounds, the tier routers'
port range and the decision's GPU-hour price per tier, each with the exact one-line error."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.spec.decision import DecisionSpec
from gridready.spec.serving import REFUSED_ENGINES, Autoscaling, ModelSource, ServingSpec, Tier
from gridready.spec.triton import ENGINE_MODELS, TritonSettings
from tests.unit.spec.spec_lines import lines
from tests.unit.spec.test_rule_messages import REV, tier

P = "cluster.yml: (top level): "


@pytest.mark.parametrize(("data", "want"), [
    ({"hf_id": "a/b", "revision": REV}, []), ({"local_path": "/models/x"}, []),
    ({"local_path": "/models/x", "revision": REV}, []),
    ({}, [P + "set exactly one of hf_id or local_path"]),
    ({"hf_id": "a/b", "revision": REV, "local_path": "/models/x"}, [P + "set exactly one of hf_id or local_path"]),
    ({"hf_id": "a/b"}, [P + "hf_id needs a pinned revision"]),
    ({"hf_id": "a/b", "revision": ""}, [P + "hf_id needs a pinned revision"]),
])
def test_one_model_source(data, want):
    assert lines(ModelSource, data) == want


def test_source_is_what_the_engine_loads():
    assert ModelSource.model_validate({"local_path": "/models/x"}).source == "/models/x"
    assert ModelSource.model_validate({"hf_id": "a/b", "revision": REV}).source == "a/b"


@pytest.mark.parametrize("engine", ["tgi", "TGI", "Tgi"])
def test_a_refused_engine_says_why(engine):
    assert lines(Tier, tier(engine=engine)) == ["cluster.yml: engine: " + REFUSED_ENGINES["tgi"]]


@pytest.mark.parametrize("engine", ["tgi-2", 5, None])
def test_an_unknown_engine_is_a_plain_literal_error(engine):
    assert lines(Tier, tier(engine=engine)) == [
        "cluster.yml: engine: Input should be 'vllm', 'triton-trtllm', 'sglang' or 'triton-embedding'"]


NAME = "cluster.yml: name: must not be `vllm` or start with `vllm-` (Service env vars clash with vLLM's)"


@pytest.mark.parametrize(("name", "want"), [
    ("vllm", [NAME]), ("vllm-a", [NAME]), ("vllm-", [NAME]),
    ("vllma", []), ("my-vllm", []), ("llama", []), ("vllx-a", []),
])
def test_tier_name_never_clashes_with_vllm_env(name, want):
    assert lines(Tier, tier(name=name)) == want


@pytest.mark.parametrize(("over", "want"), [
    ({"engine": "triton-trtllm", "triton": {}}, []),
    ({"engine": "vllm", "triton": {}}, [P + "`triton` settings need engine triton-trtllm"]),
    ({"engine": "sglang", "triton": {}}, [P + "`triton` settings need engine triton-trtllm"]),
    ({"engine": "sglang", "sglang": {}}, []),
    ({"engine": "vllm", "sglang": {}}, [P + "`sglang` settings need engine sglang"]),
    ({"engine": "triton-trtllm", "sglang": {}}, [P + "`sglang` settings need engine sglang"]),
    ({"engine": "sglang", "quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}, []),
    ({"engine": "vllm", "quantization": "compressed-tensors", "kv_cache_dtype": "fp8"}, []),  # vLLM takes both
    ({"engine": "sglang", "quantization": "compressed-tensors", "kv_cache_dtype": "fp8"}, [
        P + "quantization: 'compressed-tensors' is not an SGLang --quantization choice (of the spec's: awq, fp8, "
        "gptq, modelopt); kv_cache_dtype: 'fp8' is not an SGLang --kv-cache-dtype choice (auto, fp8_e4m3, "
        "fp8_e5m2)"]),
    ({"engine": "triton-embedding"}, [
        P + "engine triton-embedding needs `embedding` (its inputs and outputs), and `embedding` needs engine "
            "triton-embedding"]),
])
def test_settings_belong_to_their_engine(over, want):
    assert lines(Tier, tier(**over)) == want


def test_embedding_settings_need_the_embedding_engine():
    from tests.unit.spec.test_rule_messages_tiers import EMBED
    assert lines(Tier, tier(embedding=EMBED["embedding"])) == [
        P + "engine triton-embedding needs `embedding` (its inputs and outputs), and `embedding` needs engine "
            "triton-embedding"]


@pytest.mark.parametrize(("data", "want"), [
    ({}, []), ({"min_replicas": 2, "max_replicas": 2}, []), ({"min_replicas": 1, "max_replicas": 4}, []),
    ({"min_replicas": 3}, []), ({"max_replicas": 1}, []),
    ({"min_replicas": 3, "max_replicas": 2}, [P + "min_replicas must be <= max_replicas"]),
])
def test_autoscaling_bounds(data, want):
    assert lines(Autoscaling, data) == want


@pytest.mark.parametrize(("data", "want"), [
    ({}, []),
    ({"frontend": "trtllm-serve", "mode": "llmapi"}, []),
    ({"frontend": "trtllm-serve", "mode": "engine"},
     [P + "frontend trtllm-serve needs mode llmapi (it serves no TensorRT engines)"]),
    ({"bls": True, "mode": "engine"}, []),
    ({"bls": True, "mode": "llmapi"},
     [P + "bls is a model of the engine-mode repository; set mode: engine or drop bls"]),
    ({"grpc_port": 8000}, [P + "http_port, grpc_port and metrics_port must differ, got [8000, 8000, 8002]"]),
    ({"metrics_port": 8001}, [P + "http_port, grpc_port and metrics_port must differ, got [8000, 8001, 8001]"]),
    ({"http_port": 8002}, [P + "http_port, grpc_port and metrics_port must differ, got [8002, 8001, 8002]"]),
    ({"parameters": {"tensorrt_llm": {"k": "v"}}}, []),
    ({"mode": "engine", "parameters": {"tensorrt_llm_bls": {"k": "v"}, "ensemble": {"k": "v"}}}, []),
    ({"parameters": {"ensemble": {"k": "v"}}},
     [P + "parameters: no model 'ensemble' in llmapi mode (models: tensorrt_llm)"]),
    ({"mode": "engine", "parameters": {"tensorrt_llm": {}, "bls": {"k": "v"}}},
     [P + "parameters: no model 'bls' in engine mode (models: " + ", ".join(ENGINE_MODELS) + ")"]),
])
def test_triton_settings_consistent(data, want):
    assert lines(TritonSettings, data) == want


ROUTER = {"enabled": True, "port": 4000, "keys": [{"name": "team-a", "vault_var": "vault_router_a"}]}


def serving(ports: list[int], tier_router_port: int = 4100, enabled: bool = True, tr: bool = True) -> dict[str, Any]:
    return {"tiers": [tier(f"t{i}", port=p) for i, p in enumerate(ports)],
            "router": {**ROUTER, "enabled": enabled, "tier_routers": {"enabled": tr, "port": tier_router_port}}}


@pytest.mark.parametrize(("data", "want"), [
    (serving([8000, 8001]), []),
    (serving([8000, 4101]), [P + "router.tier_routers.port: the tier routers listen on 4100..4101, which includes "
                                 "4101, the port of tier t1"]),
    (serving([8000, 4102]), []),                       # just past the last tier router
    (serving([8000, 4099]), []),                       # just below the first
    (serving([8000], tier_router_port=4000), [P + "router.tier_routers.port: the tier routers listen on 4000..4000, "
                                                  "which includes 4000, router.port"]),
    (serving([8000, 8001, 8002], tier_router_port=3998),
     [P + "router.tier_routers.port: the tier routers listen on 3998..4000, which includes 4000, router.port"]),
    (serving([8000], tier_router_port=8000),
     [P + "router.tier_routers.port: the tier routers listen on 8000..8000, which includes 8000, the port of tier t0"]),
    (serving([4101, 4100]), [P + "router.tier_routers.port: the tier routers listen on 4100..4101, which includes "
                                 "4100, the port of tier t1"]),
    (serving([8000], tier_router_port=8000, tr=False), []),
    (serving([8000], tier_router_port=8000, enabled=False), []),
])
def test_tier_router_ports(data, want):
    assert lines(ServingSpec, data) == want


@pytest.mark.parametrize(("data", "tier_name", "price"), [
    ({}, "a", None),
    ({"gpu_hour_price_usd": 2.5}, "a", 2.5),
    ({"gpu_hour_price_usd": 2.5, "tier_gpu_hour_price_usd": {"b": 4.0}}, "b", 4.0),
    ({"gpu_hour_price_usd": 2.5, "tier_gpu_hour_price_usd": {"b": 4.0}}, "a", 2.5),
    ({"tier_gpu_hour_price_usd": {"b": 4.0}}, "a", None),
])
def test_gpu_hour_price_per_tier(data, tier_name, price):
    assert DecisionSpec.model_validate(data).price(tier_name) == price
