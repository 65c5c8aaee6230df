"""The `serving:` section of cluster.yml: tiers, models, parallelism and SLOs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

SLUG = r"^[a-z][a-z0-9-]{1,30}$"


class ModelSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hf_id: str | None = Field(None, description="Hugging Face id, e.g. meta-llama/Llama-3.1-8B-Instruct")
    revision: str | None = Field(None, description="pinned commit of the Hugging Face repository")
    local_path: str | None = Field(None, description="a path present on every node instead of hf_id")

    @model_validator(mode="after")
    def _one_source(self) -> ModelSource:
        if (self.hf_id is None) == (self.local_path is None):
            raise ValueError("set exactly one of hf_id or local_path")
        if self.hf_id is not None and not self.revision:
            raise ValueError("hf_id needs a pinned revision")
        return self


class Slo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ttft_ms_p99: PositiveFloat | None = Field(None, description="time to first token, p99, ms")
    tpot_ms_p99: PositiveFloat | None = Field(None, description="time per output token, p99, ms")
    e2e_ms_p99: PositiveFloat | None = None
    goodput_min: float = Field(0.9, gt=0, le=1, description="share of requests meeting every SLO")


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=SLUG)
    engine: Literal["vllm", "triton-trtllm"]
    model: ModelSource
    served_name: str
    node_group: str | None = Field(None, description="the node group this tier runs on (default: the first)")
    tensor_parallel: PositiveInt | Literal["derive"] = "derive"
    pipeline_parallel: PositiveInt | Literal["derive"] = "derive"
    replicas: PositiveInt = 1
    max_model_len: PositiveInt = 8192
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_num_seqs: PositiveInt = 256
    port: int = Field(8000, ge=1024, le=65535)
    slo: Slo = Field(default_factory=Slo)


class ServingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: Literal["hosts", "kubernetes"] = "hosts"
    kubeconfig: str | None = Field(None, description="path of the kubeconfig (target kubernetes)")
    tiers: list[Tier] = Field(default_factory=list)
