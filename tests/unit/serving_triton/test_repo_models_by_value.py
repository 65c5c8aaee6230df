"""The model repository's contents (gridready/serving/triton/repo.py) by exact value: each engine-mode model's
parameters, batching and instances, the extra parameters a tier sets over them, the ensemble's wiring, and the
LLM-API arguments and model.yaml for both precisions and with LoRA."""

from __future__ import annotations

import yaml

from gridready.serving.triton import repo
from gridready.serving.triton.build import engine_key
from gridready.serving.triton.pbtxt import Enum

from .conftest import plan

W8 = "/models/hf/meta-llama/Llama-3.1-8B-Instruct/0e9e39f2"


def test_tensorrt_llm_parameters_and_batching() -> None:
    p = plan("8b", mode="engine", kv_cache_free_gpu_mem_fraction=0.85, streaming=False,
             max_queue_delay_microseconds=50, max_queue_size=7, batch_scheduler_policy="max_utilization",
             parameters={"tensorrt_llm": {"decoding_mode": "top_k_top_p", "max_beam_width": "2"}},
             tier_over={"enable_prefix_caching": False})
    m = repo.tensorrt_llm(p)
    assert m["parameters"] == {
        "gpt_model_type": "inflight_fused_batching",
        "gpt_model_path": f"/engines/{engine_key(p).dirname}/engine", "max_beam_width": "2",
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no", "batch_scheduler_policy": "max_utilization",
        "kv_cache_free_gpu_mem_fraction": "0.85", "enable_kv_cache_reuse": "false",
        "enable_chunked_context": "true", "exclude_input_in_output": "true",
        "executor_worker_path": "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
        "decoding_mode": "top_k_top_p"}
    assert (m["name"], m["backend"], m["max_batch_size"], m["model_transaction_policy"]) == (
        "tensorrt_llm", "tensorrtllm", 256, {"decoupled": False})
    assert m["dynamic_batching"] == {"max_queue_delay_microseconds": 50, "default_queue_policy": {"max_queue_size": 7}}
    assert m["instance_group"] == [{"count": 1, "kind": Enum("KIND_CPU")}]
    assert repo.engine_dir(p) == f"/engines/{engine_key(p).dirname}/engine"


def test_python_models_parameters_and_instances() -> None:
    p = plan("8b", mode="engine", bls=True, preprocessing_instances=3, postprocessing_instances=2, bls_instances=4,
             max_batch_size=32, parameters={"postprocessing": {"skip_special_tokens": "false"}})
    pre, post, bls = repo.preprocessing(p), repo.postprocessing(p), repo.tensorrt_llm_bls(p)
    assert pre["parameters"] == {"tokenizer_dir": W8, "add_special_tokens": "true"}
    assert post["parameters"] == {"tokenizer_dir": W8, "skip_special_tokens": "false"}
    assert bls["parameters"] == {"accumulate_tokens": "false", "tensorrt_llm_model_name": "tensorrt_llm"}
    assert [m["instance_group"] for m in (pre, post, bls)] == [
        [{"count": 3, "kind": Enum("KIND_CPU")}], [{"count": 2, "kind": Enum("KIND_CPU")}],
        [{"count": 4, "kind": Enum("KIND_CPU")}]]
    assert [m["max_batch_size"] for m in (pre, post, bls)] == [32, 32, 32]
    assert (pre["backend"], post["backend"], bls["backend"], post["dynamic_batching"]) == (
        "python", "python", "python", {})
    assert bls["output"][0] == {"name": "text_output", "data_type": Enum("TYPE_STRING"), "dims": [-1]}
    assert bls["model_transaction_policy"] == {"decoupled": True}
    assert sorted(repo.engine_models(p)) == ["ensemble", "postprocessing", "preprocessing", "tensorrt_llm",
                                             "tensorrt_llm_bls"]
    assert "tensorrt_llm_bls" not in repo.engine_models(plan("8b", mode="engine"))


def test_ensemble_steps() -> None:
    e = repo.ensemble(plan("8b", mode="engine", max_batch_size=16))
    assert (e["name"], e["platform"], e["max_batch_size"]) == ("ensemble", "ensemble", 16)
    pre, trt, post = e["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in (pre, trt, post)] == ["preprocessing", "tensorrt_llm", "postprocessing"]
    assert {s["model_version"] for s in (pre, trt, post)} == {-1}
    assert pre["input_map"]["QUERY"] == "text_input" and pre["output_map"]["INPUT_ID"] == "_INPUT_ID"
    assert trt["input_map"]["input_ids"] == "_INPUT_ID" and trt["input_map"]["streaming"] == "stream"
    assert trt["output_map"]["output_ids"] == "_TOKENS_BATCH"
    assert trt["output_map"]["sequence_length"] == "_SEQUENCE_LENGTH"
    assert trt["output_map"]["cum_log_probs"] == "cum_log_probs" and len(trt["output_map"]) == 20
    assert post == {"model_name": "postprocessing", "model_version": -1,
                    "input_map": {"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
                    "output_map": {"OUTPUT": "text_output"}}
    assert e["output"][0]["name"] == "text_output" and e["output"][3]["data_type"] == Enum("TYPE_FP32")


def test_llm_api_arguments_and_model_yaml() -> None:
    p = plan("8b", 2, 1, max_batch_size=64, kv_cache_free_gpu_mem_fraction=0.8,
             tier_over={"max_num_batched_tokens": 4096, "max_model_len": 16384})
    assert repo.llm_args(p) == {
        "model": W8, "backend": "pytorch", "tensor_parallel_size": 2, "pipeline_parallel_size": 1,
        "max_batch_size": 64, "max_num_tokens": 4096, "max_seq_len": 16384, "enable_chunked_prefill": True,
        "kv_cache_config": {"free_gpu_memory_fraction": 0.8, "enable_block_reuse": True}}
    fp8 = plan("8b", tier_over={"kv_cache_dtype": "fp8", "enable_chunked_prefill": False,
                                "lora_adapters": [{"name": "a", "path": "/lora/a"}], "max_lora_rank": 32})
    args = repo.llm_args(fp8)
    assert args["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": True, "dtype": "fp8"}
    assert (args["enable_chunked_prefill"], args["lora_config"]) == (False, {"lora_dir": ["/lora/a"],
                                                                            "max_lora_rank": 32})
    text = repo.model_yaml(plan("8b", streaming=False))
    assert text.startswith("# generated by gridready for tier trt-8b; tensorrt_llm.LLM keyword arguments + "
                           "triton_config\nmodel: ")
    doc = yaml.safe_load(text)
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": False}
    assert list(doc)[:2] == ["model", "backend"]
    cfg = repo.llmapi_config(plan("8b", parameters={"tensorrt_llm": {"x": "y"}}))
    assert (cfg["max_batch_size"], cfg["model_transaction_policy"], cfg["parameters"], cfg["backend"]) == (
        0, {"decoupled": True}, {"x": "y"}, "python")
    assert cfg["instance_group"] == [{"count": 1, "kind": Enum("KIND_CPU")}]


def test_model_names_defaults_and_each_models_own_extra_parameters() -> None:
    p = plan("8b", mode="engine", bls=True)
    assert [repo.preprocessing(p)["name"], repo.postprocessing(p)["name"], repo.tensorrt_llm_bls(p)["name"],
            repo.tensorrt_llm(p)["name"], repo.llmapi_config(plan("8b"))["name"]] == [
        "preprocessing", "postprocessing", "tensorrt_llm_bls", "tensorrt_llm", "tensorrt_llm"]
    assert repo.postprocessing(p)["parameters"] == {"tokenizer_dir": W8, "skip_special_tokens": "true"}
    trt = repo.tensorrt_llm(p)["parameters"]
    assert (trt["max_beam_width"], trt["enable_kv_cache_reuse"], trt["enable_chunked_context"]) == (
        "1", "true", "true")
    extra = plan("8b", mode="engine", bls=True, parameters={"preprocessing": {"max_num_images": "2"},
                                                            "tensorrt_llm_bls": {"accumulate_tokens": "true"}})
    assert repo.preprocessing(extra)["parameters"] == {"tokenizer_dir": W8, "add_special_tokens": "true",
                                                       "max_num_images": "2"}
    assert repo.tensorrt_llm_bls(extra)["parameters"] == {"accumulate_tokens": "true",
                                                          "tensorrt_llm_model_name": "tensorrt_llm"}
