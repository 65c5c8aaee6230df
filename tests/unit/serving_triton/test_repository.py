"""Both modes render for the 8B/70B x TP/PP matrix; every config.pbtxt parses with model_config_pb2."""

from __future__ import annotations

import json

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from gridready.serving import triton
from gridready.serving.triton.pbtxt import PLACEHOLDER

from .conftest import MATRIX, plan

ENGINE_MODELS = {"ensemble", "preprocessing", "tensorrt_llm", "postprocessing"}


def _parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize(("model", "tp", "pp"), MATRIX)
def test_engine_mode_renders_and_every_config_parses(model: str, tp: int, pp: int) -> None:
    p = plan(model, tp, pp, mode="engine", bls=True)
    repo = triton.render_repository(p)
    pbtxt = {k: v for k, v in repo.files.items() if k.endswith("config.pbtxt")}
    # the BLS model is the entry: its directory (= its Triton name, = the OpenAI model id) is the served_name
    assert {k.split("/")[0] for k in pbtxt} == ENGINE_MODELS | {p.tier.served_name}
    for name, text in pbtxt.items():
        cfg = _parse(text)
        assert cfg.name == name.split("/")[0]
        assert not PLACEHOLDER.search(text), name
    trt = _parse(pbtxt["tensorrt_llm/config.pbtxt"])
    assert trt.backend == "tensorrtllm"
    assert trt.parameters["gpt_model_type"].string_value == "inflight_fused_batching"
    assert f"-tp{tp}pp{pp}-" in trt.parameters["gpt_model_path"].string_value
    assert trt.model_transaction_policy.decoupled is True
    manifest = json.loads(repo.files[triton.MANIFEST])
    assert manifest["world_size"] == tp * pp  # derived, never typed
    assert manifest["nodes"] == (2 if pp == 2 else 1)
    assert manifest["served_model"] == p.tier.served_name != "tensorrt_llm_bls"
    bls = _parse(pbtxt[f"{p.tier.served_name}/config.pbtxt"])
    assert bls.backend == "python" and bls.parameters["tensorrt_llm_model_name"].string_value == "tensorrt_llm"


@pytest.mark.parametrize(("model", "tp", "pp"), MATRIX)
def test_llmapi_mode_renders_model_yaml(model: str, tp: int, pp: int) -> None:
    p = plan(model, tp, pp)
    repo = triton.render_repository(p)
    served = p.tier.served_name
    assert "tensorrt_llm/config.pbtxt" not in repo.files  # the LLM-API model is named after served_name
    cfg = _parse(repo.files[f"{served}/config.pbtxt"])
    assert cfg.backend == "python" and cfg.name == served
    assert {t.name for t in cfg.input} >= {"text_input", "streaming", "sampling_param_max_tokens"}
    doc = yaml.safe_load(repo.files[f"{served}/1/model.yaml"])
    assert doc["backend"] == "pytorch"
    assert (doc["tensor_parallel_size"], doc["pipeline_parallel_size"]) == (tp, pp)
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": True}
    assert doc["kv_cache_config"]["free_gpu_memory_fraction"] == 0.9
    assert doc["model"].endswith(f"{p.tier.model.hf_id}/{p.tier.model.revision}")


def test_trtllm_serve_frontend_has_no_triton_models() -> None:
    p = plan("70b", 8, 1, frontend="trtllm-serve")
    repo = triton.render_repository(p)
    assert set(repo.files) == {"extra-llm-api.yaml", triton.MANIFEST}
    argv = triton.launch_script(p)
    assert "trtllm-serve /models/hf/meta-llama/Llama-3.3-70B-Instruct/6f6073b4 --backend pytorch" in argv
    assert "--tp_size 8 --pp_size 1" in argv and "--port 9000" in argv


def test_write_repository_is_atomic_and_has_version_dirs(tmp_path) -> None:
    p = plan("8b", 1, 1, mode="engine")
    dest = tmp_path / "serve" / "triton" / "trt-8b" / "repo"
    triton.write_repository(p, dest)
    (dest / "stale.txt").write_text("from an older run")
    repo = triton.write_repository(p, dest)
    assert not (dest / "stale.txt").exists()
    for model in ENGINE_MODELS - {"ensemble"} | {p.tier.served_name}:
        assert (dest / model / "1").is_dir()
        _parse((dest / model / "config.pbtxt").read_text())
    assert repo.path == dest
    assert not list(dest.parent.glob(".repo.*"))


def test_fp8_and_lora_reach_the_llm_api() -> None:
    over = {"quantization": "fp8", "lora_adapters": [{"name": "support", "path": "/adapters/support"}]}
    doc = yaml.safe_load(triton.render_repository(plan("8b", tier_over=over)).files["llama-8b/1/model.yaml"])
    assert doc["kv_cache_config"]["dtype"] == "fp8"
    assert doc["lora_config"] == {"lora_dir": ["/adapters/support"], "max_lora_rank": 16}


def test_extra_parameters_are_written() -> None:
    p = plan("8b", mode="engine", parameters={"tensorrt_llm": {"kv_cache_host_memory_bytes": "45000000000"}})
    cfg = triton.render_repository(p).configs["tensorrt_llm"]
    assert cfg.parameters["kv_cache_host_memory_bytes"].string_value == "45000000000"


def test_the_entry_model_is_named_after_served_name() -> None:
    p = plan("8b", 1, 1, mode="engine")
    repo = triton.render_repository(p)
    served = p.tier.served_name
    ens = _parse(repo.files[f"{served}/config.pbtxt"])
    assert ens.name == served and ens.platform == "ensemble"
    assert "ensemble/config.pbtxt" not in repo.files
    assert [s.model_name for s in ens.ensemble_scheduling.step] == ["preprocessing", "tensorrt_llm", "postprocessing"]


@pytest.mark.parametrize(("served", "why"), [("meta-llama/Llama-3.1-8B", "no '/'"),
                                              ("preprocessing", "another model")])
def test_a_served_name_triton_cannot_use_is_refused(served: str, why: str) -> None:
    p = plan("8b", 1, 1, mode="engine", tier_over={"served_name": served})
    with pytest.raises(triton.RepositoryError, match=why):
        triton.render_repository(p)


@pytest.mark.parametrize("streaming", [True, False])
def test_llmapi_config_carries_decoupled_and_batch_size(streaming: bool) -> None:
    # tritonserver runs with --disable-auto-complete-config (openai_frontend: false), so model.py cannot set them
    p = plan("8b", 1, 1, openai_frontend=False, streaming=streaming)
    assert "--disable-auto-complete-config" in triton.launch_script(p)
    cfg = _parse(triton.render_repository(p).files[f"{p.tier.served_name}/config.pbtxt"])
    assert cfg.model_transaction_policy.decoupled is streaming and cfg.max_batch_size == 0
