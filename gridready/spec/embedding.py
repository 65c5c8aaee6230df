"""A fixed-cost model behind Triton: `tiers[].embedding` of a tier with `engine: triton-embedding`.

An embedding (or any other fixed-cost) model is an ONNX file on Triton's ONNX Runtime backend or a serialized
TensorRT plan on the TensorRT backend. Its cost per request does not depend on what it generates, so Triton's
dynamic batcher (`max_queue_delay_microseconds`, `preferred_batch_size`) and its instance groups decide its
throughput and tail latency (Triton docs, Model Configuration, "Dynamic Batcher" and "Instance Groups",
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/model_configuration.html).
gridready/serving/triton/embedding.py turns this into config.pbtxt, validated by tritonclient's model_config_pb2.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, field_validator, model_validator

# model_config.proto DataType values an input or output may have (TYPE_STRING is BYTES on the wire)
DataType = Literal["TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16",
                   "TYPE_FP32", "TYPE_FP64", "TYPE_BF16", "TYPE_STRING"]
DATA_TYPES = get_args(DataType)
# Backend -> (config.pbtxt platform, default model file name in <model>/1/): Triton docs, Model Repository,
# "Model Files" (model.onnx for ONNX Runtime, model.plan for TensorRT)
BACKENDS = {"onnxruntime": ("onnxruntime_onnx", "model.onnx"), "tensorrt": ("tensorrt_plan", "model.plan")}
TENSOR_NAME = r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,127}$"


class Tensor(BaseModel):
    """One input or output of the model, without the batch dimension (Triton adds it when max_batch_size > 0)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=TENSOR_NAME, description="the tensor's name in the ONNX graph / TensorRT engine")
    data_type: DataType = Field(description="model_config.proto DataType, e.g. TYPE_INT64")
    dims: list[int] = Field(min_length=1, description="shape without the batch dimension; -1: variable")
    fill: Literal["token_ids", "ones", "zeros", "random"] | None = Field(
        None, description="inputs: what the benchmark sends (default: token_ids for integer inputs, random for "
                          "floating point); BERT-style models take ones for attention_mask, zeros for token_type_ids")

    @field_validator("dims")
    @classmethod
    def _dims(cls, dims: list[int]) -> list[int]:
        if any(d == 0 or d < -1 for d in dims):
            raise ValueError(f"each dimension is a positive size or -1 (variable), got {dims}")
        return dims


class DynamicBatching(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    max_queue_delay_microseconds: NonNegativeInt = Field(
        0, le=10_000_000,
        description="how long the batcher may hold a request for others to join; 0: batch only what is queued")
    preferred_batch_size: list[PositiveInt] = Field(
        default_factory=list, description="batch sizes sent at once when reached; empty: max_batch_size (Triton)")
    max_queue_size: NonNegativeInt = Field(0, description="requests queued at most (more are rejected); 0: no limit")

    @field_validator("preferred_batch_size")
    @classmethod
    def _sorted_unique(cls, sizes: list[int]) -> list[int]:
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"sizes must be distinct, got {sizes}")
        return sorted(sizes)


class InstanceGroup(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    count: PositiveInt = Field(1, le=64, description="model instances (per listed GPU for KIND_GPU)")
    kind: Literal["KIND_GPU", "KIND_CPU"] = "KIND_GPU"
    gpus: list[NonNegativeInt] | None = Field(
        None, description="KIND_GPU: GPU indices of the node; default: every GPU the tier uses")

    @model_validator(mode="after")
    def _gpus_for_gpu(self) -> InstanceGroup:
        if self.gpus is not None and self.kind != "KIND_GPU":
            raise ValueError("gpus apply to KIND_GPU groups only")
        return self


class EmbeddingBench(BaseModel):
    """The benchmark of a fixed-cost tier: Poisson arrivals at each rate, every request one batch item."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    request_rates: list[float] = Field(default_factory=lambda: [20.0, 100.0], min_length=1,
                                       description="requests/s of each level; the SLO gate judges the highest")
    requests: PositiveInt = Field(300, le=100_000, description="requests per level at most")
    duration_s: float = Field(15.0, gt=0, le=3600, description="seconds per level at most")
    seq_len: PositiveInt = Field(128, le=65536, description="what the benchmark sends for each -1 input dimension")

    @field_validator("request_rates")
    @classmethod
    def _positive(cls, rates: list[float]) -> list[float]:
        if any(r <= 0 for r in rates):
            raise ValueError(f"rates must be positive, got {rates}")
        return rates


class QueueDelaySweep(BaseModel):
    """Measure the tier at each max_queue_delay_microseconds (the tier is redeployed per setting) at one rate;
    the decision record names the best setting. The tier ends up serving with its own setting again."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    max_queue_delay_microseconds: list[NonNegativeInt] = Field(min_length=2, max_length=12)
    request_rate: float | None = Field(None, gt=0, description="requests/s; default: the highest bench rate")

    @field_validator("max_queue_delay_microseconds")
    @classmethod
    def _distinct(cls, delays: list[int]) -> list[int]:
        if len(set(delays)) != len(delays):
            raise ValueError(f"settings must be distinct, got {delays}")
        if any(d > 10_000_000 for d in delays):
            raise ValueError("each setting must be <= 10000000 (10 s)")
        return delays


class EmbeddingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    backend: Literal["onnxruntime", "tensorrt"] = Field(
        "onnxruntime", description="onnxruntime: an ONNX file; tensorrt: a TensorRT plan built for this GPU and "
                                   "TensorRT version")
    model_file: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$",
        description="with model.hf_id: the file inside the repository snapshot, e.g. onnx/model.onnx "
                    "(model.local_path names the file itself)")
    max_batch_size: PositiveInt = Field(64, le=65536)
    inputs: list[Tensor] = Field(min_length=1)
    outputs: list[Tensor] = Field(min_length=1)
    dynamic_batching: DynamicBatching = Field(default_factory=DynamicBatching)
    instance_groups: list[InstanceGroup] = Field(default_factory=lambda: [InstanceGroup()], min_length=1)
    grpc_port: int = Field(8001, ge=1024, le=65535)
    metrics_port: int = Field(8002, ge=1024, le=65535)
    startup_timeout_s: PositiveInt = Field(600, description="model load budget before the role fails the host")
    bench: EmbeddingBench = Field(default_factory=EmbeddingBench)
    sweep: QueueDelaySweep | None = Field(None, description="a max_queue_delay_microseconds sweep in serve/bench")

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddingSettings:
        too_big = [s for s in self.dynamic_batching.preferred_batch_size if s > self.max_batch_size]
        if too_big:  # Triton refuses to load it: "dynamic batching preferred size must be <= max batch size"
            raise ValueError(f"dynamic_batching.preferred_batch_size {too_big} exceeds max_batch_size "
                             f"{self.max_batch_size}")
        names = [t.name for t in self.inputs + self.outputs]
        if len(set(names)) != len(names):
            raise ValueError(f"input and output names must be distinct, got {names}")
        if any(t.fill is not None for t in self.outputs):
            raise ValueError("outputs take no `fill` (only inputs are sent)")
        return self

    @property
    def platform(self) -> str:
        return BACKENDS[self.backend][0]

    @property
    def default_file(self) -> str:
        return BACKENDS[self.backend][1]

    def delays(self) -> list[int]:
        """The sweep's settings (empty without a sweep)."""
        return list(self.sweep.max_queue_delay_microseconds) if self.sweep else []
