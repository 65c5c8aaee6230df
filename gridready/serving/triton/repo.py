"""Model repository contents for both modes, as dicts (config.pbtxt) and YAML text (model.yaml).

Parameter names and values: tensorrtllm_backend docs/model_config.md and the pinned templates
(serving-anchors.md 2.5). Parameters gridready does not set are left out (the backend then uses its
default), never left as `${...}`.
"""

from __future__ import annotations

from typing import Any

import yaml

from gridready.serving.triton.build import ENGINE_SUBDIR, engine_key
from gridready.serving.triton.pbtxt import Enum
from gridready.serving.triton.plan import ENGINES_DIR, TritonPlan
from gridready.serving.triton.tensors import (
    BLS_IN,
    ENSEMBLE_IN,
    LLMAPI_IN,
    LLMAPI_OUT,
    POST_IN,
    POST_OUT,
    PRE_IN,
    PRE_OUT,
    RESULT_OUT,
    TRTLLM_IN,
    TRTLLM_OUT,
    tensors,
)

# Every `parameters` key each model reads (from the pinned templates); anything else is a typo.
KNOWN_PARAMETERS: dict[str, frozenset[str]] = {
    "ensemble": frozenset(),
    "preprocessing": frozenset(
        {"tokenizer_dir", "add_special_tokens", "multimodal_model_path", "gpt_model_path", "max_num_images",
         "hf_model_path"}
    ),
    "postprocessing": frozenset({"tokenizer_dir", "skip_special_tokens"}),
    "tensorrt_llm_bls": frozenset(
        {"accumulate_tokens", "tensorrt_llm_model_name", "tensorrt_llm_draft_model_name", "multimodal_encoders_name"}
    ),
    "tensorrt_llm": frozenset(
        {
            "max_beam_width", "FORCE_CPU_ONLY_INPUT_TENSORS", "gpt_model_type", "gpt_model_path",
            "encoder_model_path", "max_tokens_in_paged_kv_cache", "max_attention_window_size",
            "sink_token_length", "batch_scheduler_policy", "kv_cache_free_gpu_mem_fraction",
            "cross_kv_cache_fraction", "kv_cache_host_memory_bytes", "kv_cache_onboard_blocks",
            "enable_trt_overlap", "exclude_input_in_output", "cancellation_check_period_ms",
            "stats_check_period_ms", "iter_stats_max_iterations", "request_stats_max_iterations",
            "enable_kv_cache_reuse", "normalize_log_probs", "enable_chunked_context", "gpu_device_ids",
            "participant_ids", "num_nodes", "lora_cache_optimal_adapter_size", "lora_cache_max_adapter_size",
            "lora_cache_gpu_memory_fraction", "lora_cache_host_memory_bytes", "lora_prefetch_dir",
            "decoding_mode", "executor_worker_path", "lookahead_window_size", "lookahead_ngram_size",
            "lookahead_verification_set_size", "medusa_choices", "eagle_choices", "gpu_weights_percent",
            "enable_context_fmha_fp32_acc", "multi_block_mode", "cuda_graph_mode", "cuda_graph_cache_size",
            "speculative_decoding_fast_logits", "tokenizer_dir", "guided_decoding_backend",
            "xgrammar_tokenizer_info_path",
        }
    ),
}
LLMAPI_KNOWN_PARAMETERS: dict[str, frozenset[str]] = {"tensorrt_llm": frozenset()}
EXECUTOR_WORKER = "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"
LOGITS = "FP32"


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _cpu(count: int) -> list[dict[str, Any]]:
    return [{"count": count, "kind": Enum("KIND_CPU")}]


def _queue(plan: TritonPlan) -> dict[str, Any]:
    # Triton's dynamic batcher is only the queue in front; TensorRT-LLM batches in flight behind it.
    s = plan.settings
    return {
        "max_queue_delay_microseconds": s.max_queue_delay_microseconds,
        "default_queue_policy": {"max_queue_size": s.max_queue_size},
    }


def _params(plan: TritonPlan, model: str, base: dict[str, str]) -> dict[str, str]:
    return {**base, **plan.settings.parameters.get(model, {})}


def engine_dir(plan: TritonPlan) -> str:
    return f"{ENGINES_DIR}/{engine_key(plan).dirname}/{ENGINE_SUBDIR}"


def preprocessing(plan: TritonPlan) -> dict[str, Any]:
    return {
        "name": "preprocessing",
        "backend": "python",
        "max_batch_size": plan.max_batch_size,
        "dynamic_batching": _queue(plan),
        "input": tensors(PRE_IN),
        "output": tensors(PRE_OUT),
        "parameters": _params(plan, "preprocessing", {"tokenizer_dir": plan.weights_dir, "add_special_tokens": "true"}),
        "instance_group": _cpu(plan.settings.preprocessing_instances),
    }


def postprocessing(plan: TritonPlan) -> dict[str, Any]:
    return {
        "name": "postprocessing",
        "backend": "python",
        "max_batch_size": plan.max_batch_size,
        "dynamic_batching": {},
        "input": tensors(POST_IN),
        "output": tensors(POST_OUT),
        "parameters": _params(
            plan, "postprocessing", {"tokenizer_dir": plan.weights_dir, "skip_special_tokens": "true"}
        ),
        "instance_group": _cpu(plan.settings.postprocessing_instances),
    }


def tensorrt_llm(plan: TritonPlan) -> dict[str, Any]:
    s = plan.settings
    params = {
        "gpt_model_type": "inflight_fused_batching",
        "gpt_model_path": engine_dir(plan),
        "max_beam_width": "1",
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "batch_scheduler_policy": s.batch_scheduler_policy,
        "kv_cache_free_gpu_mem_fraction": f"{plan.kv_fraction:g}",
        "enable_kv_cache_reuse": _b(plan.kv_reuse),
        "enable_chunked_context": _b(plan.chunked_context),
        "exclude_input_in_output": "true",
        "executor_worker_path": EXECUTOR_WORKER,
    }
    return {
        "name": "tensorrt_llm",
        "backend": "tensorrtllm",
        "max_batch_size": plan.max_batch_size,
        "model_transaction_policy": {"decoupled": s.streaming},
        "dynamic_batching": _queue(plan),
        "input": tensors(TRTLLM_IN, LOGITS),
        "output": tensors(TRTLLM_OUT, LOGITS),
        "instance_group": _cpu(1),
        "parameters": _params(plan, "tensorrt_llm", params),
    }


def tensorrt_llm_bls(plan: TritonPlan) -> dict[str, Any]:
    return {
        "name": "tensorrt_llm_bls",
        "backend": "python",
        "max_batch_size": plan.max_batch_size,
        "model_transaction_policy": {"decoupled": plan.settings.streaming},
        "input": tensors(BLS_IN),
        "output": tensors("text_output STRING -1\n" + RESULT_OUT, LOGITS),
        "parameters": _params(
            plan, "tensorrt_llm_bls", {"accumulate_tokens": "false", "tensorrt_llm_model_name": "tensorrt_llm"}
        ),
        "instance_group": _cpu(plan.settings.bls_instances),
    }


_PRE_MAP = {
    "QUERY": "text_input", "DECODER_QUERY": "decoder_text_input", "REQUEST_OUTPUT_LEN": "max_tokens",
    "BAD_WORDS_DICT": "bad_words", "STOP_WORDS_DICT": "stop_words", "EMBEDDING_BIAS_WORDS": "embedding_bias_words",
    "EMBEDDING_BIAS_WEIGHTS": "embedding_bias_weights", "END_ID": "end_id", "PAD_ID": "pad_id",
    "PROMPT_TABLE_EXTRA_ID": "prompt_table_extra_id",
}
_PRE_OUT_MAP = {
    "REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN", "INPUT_ID": "_INPUT_ID",
    "REQUEST_DECODER_INPUT_LEN": "_REQUEST_DECODER_INPUT_LEN", "DECODER_INPUT_ID": "_DECODER_INPUT_ID",
    "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN", "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
    "BAD_WORDS_IDS": "_BAD_WORDS_IDS", "EMBEDDING_BIAS": "_EMBEDDING_BIAS", "OUT_END_ID": "_PREPROCESSOR_END_ID",
    "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID", "OUT_PROMPT_TABLE_EXTRA_IDS": "_OUT_PROMPT_TABLE_EXTRA_IDS",
}
_TRT_MAP = {
    "input_ids": "_INPUT_ID", "decoder_input_ids": "_DECODER_INPUT_ID", "input_lengths": "_REQUEST_INPUT_LEN",
    "decoder_input_lengths": "_REQUEST_DECODER_INPUT_LEN", "exclude_input_in_output": "exclude_input_in_output",
    "request_output_len": "_REQUEST_OUTPUT_LEN", "end_id": "_PREPROCESSOR_END_ID", "pad_id": "_PREPROCESSOR_PAD_ID",
    "embedding_bias": "_EMBEDDING_BIAS", "runtime_top_k": "top_k", "runtime_top_p": "top_p",
    "temperature": "temperature", "len_penalty": "length_penalty", "repetition_penalty": "repetition_penalty",
    "min_tokens": "min_tokens", "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
    "seed": "seed", "return_log_probs": "return_log_probs", "return_context_logits": "return_context_logits",
    "return_generation_logits": "return_generation_logits", "return_perf_metrics": "return_perf_metrics",
    "return_num_input_tokens": "return_num_input_tokens", "return_num_output_tokens": "return_num_output_tokens",
    "num_return_sequences": "num_return_sequences", "beam_width": "beam_width", "streaming": "stream",
    "prompt_embedding_table": "prompt_embedding_table", "prompt_vocab_size": "prompt_vocab_size",
    "stop_words_list": "_STOP_WORDS_IDS", "bad_words_list": "_BAD_WORDS_IDS",
    "prompt_table_extra_ids": "_OUT_PROMPT_TABLE_EXTRA_IDS", "lora_task_id": "lora_task_id",
    "lora_weights": "lora_weights", "lora_config": "lora_config",
    "guided_decoding_guide_type": "guided_decoding_guide_type", "guided_decoding_guide": "guided_decoding_guide",
}


def ensemble(plan: TritonPlan) -> dict[str, Any]:
    results = [t["name"] for t in tensors(RESULT_OUT)]
    trt_out = {"output_ids": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH"} | {r: r for r in results}
    return {
        "name": "ensemble",
        "platform": "ensemble",
        "max_batch_size": plan.max_batch_size,
        "input": tensors(ENSEMBLE_IN),
        "output": tensors("text_output STRING -1\n" + RESULT_OUT, LOGITS),
        "ensemble_scheduling": {
            "step": [
                {"model_name": "preprocessing", "model_version": -1, "input_map": _PRE_MAP, "output_map": _PRE_OUT_MAP},
                {"model_name": "tensorrt_llm", "model_version": -1, "input_map": _TRT_MAP, "output_map": trt_out},
                {
                    "model_name": "postprocessing",
                    "model_version": -1,
                    "input_map": {"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
                    "output_map": {"OUTPUT": "text_output"},
                },
            ]
        },
    }


def llmapi_config(plan: TritonPlan) -> dict[str, Any]:
    # The llmapi model.py applies model.yaml's triton_config (max_batch_size, decoupled) in its
    # auto_complete_config, which tritonserver skips under --disable-auto-complete-config (Triton python_backend
    # README, "auto_complete_config"): both are written here too, so streaming works either way.
    return {
        "name": "tensorrt_llm",
        "backend": "python",
        "max_batch_size": 0,
        "model_transaction_policy": {"decoupled": plan.settings.streaming},
        "instance_group": _cpu(1),
        "input": tensors(LLMAPI_IN),
        "output": tensors(LLMAPI_OUT),
        "parameters": dict(plan.settings.parameters.get("tensorrt_llm", {})),
    }


def llm_args(plan: TritonPlan) -> dict[str, Any]:
    """Keyword arguments of tensorrt_llm.LLM (PyTorch backend), shared by model.yaml and trtllm-serve."""
    tier = plan.tier
    kv: dict[str, Any] = {"free_gpu_memory_fraction": plan.kv_fraction, "enable_block_reuse": plan.kv_reuse}
    if plan.fp8_kv:
        kv["dtype"] = "fp8"
    args: dict[str, Any] = {
        "model": plan.weights_dir,
        "backend": "pytorch",
        "tensor_parallel_size": plan.tp,
        "pipeline_parallel_size": plan.pp,
        "max_batch_size": plan.max_batch_size,
        "max_num_tokens": plan.max_num_tokens,
        "max_seq_len": plan.max_seq_len,
        "enable_chunked_prefill": plan.chunked_context,
        "kv_cache_config": kv,
    }
    if tier.lora_adapters:
        args["lora_config"] = {"lora_dir": [a.path for a in tier.lora_adapters], "max_lora_rank": tier.max_lora_rank}
    return args


def model_yaml(plan: TritonPlan) -> str:
    doc = llm_args(plan)
    # Triton batches nothing itself here: the LLM API batches in flight (template: max_batch_size 0).
    doc["triton_config"] = {"max_batch_size": 0, "decoupled": plan.settings.streaming}
    header = f"# generated by gridready for tier {plan.name}; tensorrt_llm.LLM keyword arguments + triton_config\n"
    return header + yaml.safe_dump(doc, sort_keys=False)


def engine_models(plan: TritonPlan) -> dict[str, dict[str, Any]]:
    models = {
        "ensemble": ensemble(plan),
        "preprocessing": preprocessing(plan),
        "tensorrt_llm": tensorrt_llm(plan),
        "postprocessing": postprocessing(plan),
    }
    if plan.settings.bls:
        models["tensorrt_llm_bls"] = tensorrt_llm_bls(plan)
    return models
