"""The Triton/TensorRT-LLM part of a serving tier: `tiers[].triton` in cluster.yml.

`Tier` (gridready/spec/serving.py) references this as `triton: TritonSettings | None`; a tier with
`engine: triton-trtllm` and no `triton:` key gets `TritonSettings()` (LLM-API mode, Triton front).
Only what is Triton-specific lives here; the tier's own fields are reused: model, tensor/pipeline parallel,
max_model_len, max_num_seqs (max batch size), max_num_batched_tokens (max tokens per iteration), dtype,
quantization/kv_cache_dtype fp8, enable_prefix_caching (KV reuse), enable_chunked_prefill (chunked context),
lora_adapters and max_lora_rank. What follows (world size, build flags, the engine cache key) is derived
in gridready/serving/triton/plan.py and triton_build.py, never typed by hand.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator

# The models of an in-flight batching repository (engine mode) and of the LLM-API repository.
ENGINE_MODELS = ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing", "tensorrt_llm_bls")
LLMAPI_MODELS = ("tensorrt_llm",)


class VersionOverride(BaseModel):
    """Replace pins of gridready/data/triton_versions.yml for one tier (all or nothing per key)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    image: str | None = None
    image_digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    tensorrt_llm: str | None = None
    tensorrt: str | None = None
    cuda: str | None = None
    triton: str | None = None


class TritonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    mode: Literal["llmapi", "engine"] = Field(
        "llmapi",
        description="llmapi: LLM-API model.yaml (PyTorch backend, no build); engine: legacy trtllm-build, "
        "pinned to the last TensorRT-LLM release line that has it",
    )
    frontend: Literal["triton", "trtllm-serve"] = Field(
        "triton", description="trtllm-serve: no Triton at all (llmapi mode only)"
    )
    openai_frontend: bool = Field(True, description="run Triton's OpenAI-compatible frontend on the tier port")
    http_port: int = Field(8000, ge=1024, le=65535, description="Triton HTTP/KServe v2 (/v2/health/ready)")
    grpc_port: int = Field(8001, ge=1024, le=65535)
    metrics_port: int = Field(8002, ge=1024, le=65535)
    max_batch_size: PositiveInt | None = Field(None, description="triton_max_batch_size; default tier.max_num_seqs")
    max_input_len: PositiveInt | None = Field(None, description="default: tier.max_model_len")
    kv_cache_free_gpu_mem_fraction: float = Field(
        0.9, gt=0, le=1, description="share of the memory left after weights (not vLLM's share of the total)"
    )
    batch_scheduler_policy: Literal["guaranteed_no_evict", "max_utilization"] = "guaranteed_no_evict"
    streaming: bool = Field(True, description="decoupled transaction policy (token streaming)")
    bls: bool = Field(False, description="add tensorrt_llm_bls beside the ensemble (engine mode)")
    preprocessing_instances: PositiveInt = 1
    postprocessing_instances: PositiveInt = 1
    bls_instances: PositiveInt = 1
    max_queue_delay_microseconds: NonNegativeInt = 0
    max_queue_size: NonNegativeInt = 0
    parameters: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="extra config.pbtxt `parameters` per model, e.g. {tensorrt_llm: {kv_cache_host_memory_bytes: "
        "'0'}}; unknown models or keys fail generation",
    )
    model_family: str | None = Field(
        None, pattern=r"^[a-z0-9_]+$",
        description="engine mode: the TensorRT-LLM example whose convert_checkpoint.py converts this model "
        "(examples/models/core/<family>); default: told from the model name (llama, mistral, qwen, gemma, phi)",
    )
    build_workers: PositiveInt | None = Field(None, description="trtllm-build --workers (default: TP x PP)")
    startup_timeout_s: PositiveInt = Field(1800, description="model load (and on Kubernetes, startup probe) budget")
    versions: VersionOverride = Field(default_factory=VersionOverride)

    @model_validator(mode="after")
    def _consistent(self) -> TritonSettings:
        if self.frontend == "trtllm-serve" and self.mode != "llmapi":
            raise ValueError("frontend trtllm-serve needs mode llmapi (it serves no TensorRT engines)")
        if self.bls and self.mode != "engine":
            raise ValueError("bls is a model of the engine-mode repository; set mode: engine or drop bls")
        ports = [self.http_port, self.grpc_port, self.metrics_port]
        if len(set(ports)) != len(ports):
            raise ValueError(f"http_port, grpc_port and metrics_port must differ, got {ports}")
        allowed = ENGINE_MODELS if self.mode == "engine" else LLMAPI_MODELS
        for model in self.parameters:
            if model not in allowed:
                raise ValueError(f"parameters: no model {model!r} in {self.mode} mode (models: {', '.join(allowed)})")
        return self


class FixedCostOverride(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    image: str | None = None
    image_digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")


class SitePins(BaseModel):
    """`<inventory>/triton_versions.yml`: the site's replacements of the pins (gridready/serving/triton/versions.py
    says how they apply)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    lines: dict[Literal["llmapi", "engine"], VersionOverride] = Field(default_factory=dict)
    fixed_cost: FixedCostOverride | None = None
