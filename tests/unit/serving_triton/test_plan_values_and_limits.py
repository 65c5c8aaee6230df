"""What a Triton tier resolves to (gridready/serving/triton/plan.py), value by value: GPUs per node, the limits
and their defaults, dtype and FP8, the model family and its convert script, the container paths, the listening
ports per frontend; and each refusal of make_plan at its edge, with its exact line."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.errors import InvalidInput
from gridready.serving.triton import make_plan
from gridready.serving.triton import plan as plan_module
from gridready.serving.triton.plan import TritonPlan
from gridready.spec.parallel import Parallelism
from gridready.spec.triton import SitePins, TritonSettings

from .conftest import H200, SITE, SITE_DIGEST, tier

A100 = H200.model_copy(update={"name": "A100-SXM4-80GB"})


def plan(tp: int = 1, pp: int = 1, gpn: int = 8, *, sku: Any = H200, site: SitePins | None = SITE,
         tier_over: dict[str, Any] | None = None, **settings: Any) -> TritonPlan:
    return make_plan(tier("8b", tp, pp, **(tier_over or {})), TritonSettings(**settings), sku=sku,
                     parallel=Parallelism(tp, pp, gpn), site_pins=site)


def refusal(**kw: Any) -> list[str]:
    with pytest.raises(InvalidInput) as err:
        plan(**kw)
    return err.value.lines


@pytest.mark.parametrize(("tp", "pp", "gpn", "nodes", "on_node"),
                         [(1, 1, 8, 1, 1), (4, 1, 8, 1, 4), (8, 1, 8, 1, 8), (8, 2, 8, 2, 8), (4, 4, 4, 4, 4),
                          (2, 3, 8, 1, 6)])
def test_parallel_sizes_per_node(tp: int, pp: int, gpn: int, nodes: int, on_node: int) -> None:
    p = plan(tp, pp, gpn)
    assert (p.tp, p.pp, p.gpus_per_node, p.world_size, p.nodes, p.gpus_on_node) == (tp, pp, gpn, tp * pp, nodes,
                                                                                   on_node)


def test_limits_default_to_the_tier_and_settings_win() -> None:
    p = plan(mode="engine")
    assert (p.max_batch_size, p.max_seq_len, p.max_input_len, p.max_num_tokens) == (256, 8192, 8192, 8192)
    assert p.kv_fraction == TritonSettings().kv_cache_free_gpu_mem_fraction
    p = plan(mode="engine", max_batch_size=32, max_input_len=4096, kv_cache_free_gpu_mem_fraction=0.5,
             tier_over={"max_num_seqs": 64, "max_model_len": 16384, "max_num_batched_tokens": 2048})
    assert (p.max_batch_size, p.max_seq_len, p.max_input_len, p.max_num_tokens, p.kv_fraction) == (
        32, 16384, 4096, 2048, 0.5)
    p = plan(tier_over={"max_num_seqs": 64, "max_model_len": 16384})
    assert (p.max_batch_size, p.max_input_len) == (64, 16384)


def test_max_input_len_at_the_model_length_edge() -> None:
    assert plan(max_input_len=8192).max_input_len == 8192
    assert refusal(max_input_len=8193) == [
        "cluster.yml: serving.tiers[trt-8b].triton.max_input_len: 8193 exceeds max_model_len 8192"]


def test_dtype_and_fp8() -> None:
    assert plan().dtype == "bfloat16"
    assert plan(tier_over={"dtype": "float16"}).dtype == "float16"
    assert plan(tier_over={"dtype": "bfloat16"}).dtype == "bfloat16"
    assert (plan().fp8, plan().fp8_kv) == (False, False)
    assert (plan(tier_over={"quantization": "fp8"}).fp8, plan(tier_over={"quantization": "fp8"}).fp8_kv) == (
        True, True)
    assert plan(tier_over={"quantization": "modelopt"}).fp8
    assert plan(tier_over={"kv_cache_dtype": "fp8_e5m2"}).fp8_kv
    assert plan(tier_over={"kv_cache_dtype": "fp8"}).fp8_kv
    assert not plan(tier_over={"kv_cache_dtype": "fp8"}).fp8


def test_fp8_needs_hopper_and_other_quantizations_are_refused() -> None:
    assert plan(sku=H200.model_copy(update={"name": "H100-NVL-94GB"}), tier_over={"quantization": "fp8"}).fp8
    assert refusal(sku=A100, tier_over={"kv_cache_dtype": "fp8"}) == [
        "cluster.yml: serving.tiers[trt-8b].quantization: FP8 needs Hopper (H100/H200), node group has A100-SXM4-80GB"]
    assert plan(sku=A100).dtype == "bfloat16"
    assert refusal(tier_over={"quantization": "awq"}) == [
        "cluster.yml: serving.tiers[trt-8b].quantization: 'awq' is not supported by the Triton tier"]


def test_model_family_from_the_setting_or_the_models_name() -> None:
    def family(hf_id: str, **settings: Any) -> str | None:
        return plan(tier_over={"model": {"hf_id": hf_id, "revision": "r"}}, **settings).model_family

    assert family("mistralai/Mixtral-8x7B-Instruct-v0.1") == "llama"
    assert family("mistralai/Mistral-7B-Instruct-v0.3") == "llama"
    assert family("Qwen/Qwen2.5-7B-Instruct") == "qwen"
    assert family("google/gemma-2-9b-it") == "gemma"
    assert family("microsoft/Phi-3-mini-4k-instruct") == "phi"
    assert family("llama-org/Falcon-7B") is None  # the organisation's name is not the model's
    assert family("tiiuae/falcon-7b") is None
    assert family("tiiuae/falcon-7b", model_family="falcon") == "falcon"


def test_convert_script_of_the_family_and_its_refusal() -> None:
    p = plan(mode="engine")
    assert p.convert_script == "/app/examples/models/core/llama/convert_checkpoint.py"
    assert plan(mode="engine", model_family="falcon").convert_script == (
        "/app/examples/models/core/falcon/convert_checkpoint.py")
    assert plan().convert_script is None  # the llmapi line has no convert script
    assert refusal(mode="engine", tier_over={"model": {"hf_id": "tiiuae/falcon-7b", "revision": "r"}}) == [
        "cluster.yml: serving.tiers[trt-8b].triton.model_family: cannot tell which TensorRT-LLM example converts "
        "'tiiuae/falcon-7b'; set it (one of gemma, llama, phi, qwen or another examples/models/core dir)"]
    # FP8 engines are quantized by quantize.py, not converted: no family needed
    fp8 = plan(mode="engine", tier_over={"model": {"hf_id": "tiiuae/falcon-7b", "revision": "r"},
                                         "quantization": "fp8"})
    assert (fp8.model_family, fp8.convert_script) == (None, None)


def test_model_paths_inside_the_container() -> None:
    p = plan()
    assert (p.model_id, p.revision, p.weights_dir) == (
        "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f2", "/models/hf/meta-llama/Llama-3.1-8B-Instruct/0e9e39f2")
    local = plan(tier_over={"model": {"local_path": "/data/llama"}})
    assert (local.model_id, local.revision, local.weights_dir) == ("/data/llama", "local", "/data/llama")
    assert (p.kv_reuse, p.chunked_context) == (True, True)
    off = plan(tier_over={"enable_prefix_caching": False, "enable_chunked_prefill": False})
    assert (off.kv_reuse, off.chunked_context) == (False, False)
    assert (p.name, p.mode, plan(mode="engine").mode) == ("trt-8b", "llmapi", "engine")


def test_ports_per_frontend_and_the_metrics_entry() -> None:
    p = plan()
    assert (p.ports, p.metrics_port_name, p.openai_port) == (
        {"http": 8000, "grpc": 8001, "openai": 9000}, "openai", 9000)
    p = plan(openai_frontend=False, http_port=9100, grpc_port=9101, metrics_port=9102)
    assert (p.ports, p.metrics_port_name) == ({"http": 9100, "grpc": 9101, "metrics": 9102}, "metrics")
    p = plan(frontend="trtllm-serve")
    assert (p.ports, p.metrics_port_name) == ({"openai": 9000}, "openai")


@pytest.mark.parametrize("port", [8000, 8001, 8002])
def test_a_tier_port_on_a_triton_port_is_refused(port: int) -> None:
    assert refusal(tier_over={"port": port}) == [
        f"cluster.yml: serving.tiers[trt-8b].port: {port} collides with a Triton port"]
    # without the OpenAI frontend, or with trtllm-serve, the tier port is not opened beside Triton's
    assert plan(openai_frontend=False, tier_over={"port": port}).openai_port == port
    assert plan(frontend="trtllm-serve", tier_over={"port": port}).ports == {"openai": port}


def test_whole_nodes_at_the_edges() -> None:
    assert plan(4, 1, 8).nodes == 1  # less than a node is fine
    assert plan(8, 2, 8).nodes == 2
    assert refusal(tp=4, pp=3, gpn=8) == [
        "cluster.yml: serving.tiers[trt-8b].tensor_parallel: TP x PP = 12 must fill whole nodes of 8 GPUs"]
    assert refusal(tp=9, pp=1, gpn=8) == [
        "cluster.yml: serving.tiers[trt-8b].tensor_parallel: TP x PP = 9 must fill whole nodes of 8 GPUs"]


def test_an_unpinned_image_is_refused_naming_both_places() -> None:
    assert refusal(site=None) == [
        "cluster.yml: serving.tiers[trt-8b].triton.versions.image_digest: "
        "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3 is not pinned by digest (the tier's "
        "triton.versions.image_digest, or lines.llmapi.image_digest in the inventory's triton_versions.yml); "
        "refusing to deploy it"]
    p = plan(site=None, versions={"image_digest": SITE_DIGEST})
    assert p.release.image_ref == f"nvcr.io/nvidia/tritonserver@{SITE_DIGEST}"


def test_every_problem_on_one_line_each_with_the_source() -> None:
    with pytest.raises(InvalidInput) as err:
        make_plan(tier("8b", 4, 3, engine="vllm", port=8001, max_model_len=100, quantization="gptq"),
                  TritonSettings(max_input_len=200), sku=A100, parallel=Parallelism(4, 3, 8), site_pins=None,
                  source="inv/cluster.yml")
    assert [line.split(": ", 2)[1] for line in err.value.lines] == [
        "serving.tiers[trt-8b].engine", "serving.tiers[trt-8b].tensor_parallel",
        "serving.tiers[trt-8b].triton.max_input_len", "serving.tiers[trt-8b].quantization",
        "serving.tiers[trt-8b].triton.versions.image_digest", "serving.tiers[trt-8b].port"]
    assert err.value.lines[0] == "inv/cluster.yml: serving.tiers[trt-8b].engine: is 'vllm', not 'triton-trtllm'"
    assert all(line.startswith("inv/cluster.yml: ") for line in err.value.lines)


def test_default_settings_when_none_are_given() -> None:
    p = make_plan(tier("8b"), None, sku=H200, parallel=Parallelism(1, 1, 8), site_pins=SITE)
    assert (p.mode, p.settings.frontend, p.ports) == ("llmapi", "triton", {"http": 8000, "grpc": 8001,
                                                                            "openai": 9000})


def test_pins_without_a_convert_script_refuse_engine_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    # a pins file whose engine line names no convert_script (triton_versions.yml edited by a site)
    real = plan_module.release_line
    monkeypatch.setattr(plan_module, "release_line",
                        lambda *a, **kw: real(*a, **kw).model_copy(update={"convert_script": None}))
    assert refusal(mode="engine") == [
        "cluster.yml: serving.tiers[trt-8b].triton.versions: engine mode needs a convert_script in the pins"]
    assert plan().convert_script is None  # llmapi mode converts nothing
