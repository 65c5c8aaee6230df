"""DecisionSpec (`serving.decision` in cluster.yml): how gridready.bench chooses between tiers serving the same
model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

Objective = Literal["goodput", "throughput", "cost"]


class PrefixReuse(BaseModel):
    """The prefix-reuse shootout: the benchmark's prompts start with one shared system prompt."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    system_prompt_tokens: PositiveInt = Field(description="length of the shared system prompt, in tokens")
    share: float = Field(1.0, gt=0, le=1, description="share of requests that carry it")


class DecisionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    objective: Objective = Field(
        "goodput",
        description="goodput: most requests/s meeting every SLO (capacity at SLO); throughput: most output "
                    "tokens/s; cost: lowest USD per million output tokens at SLO")
    gpu_hour_price_usd: PositiveFloat | None = Field(None, description="price of one GPU-hour (cost objective)")
    tier_gpu_hour_price_usd: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="per-tier GPU-hour price overriding gpu_hour_price_usd (other SKU/lease)")
    tie_margin: float = Field(0.02, ge=0, le=0.5,
                              description="relative difference under which two tiers tie; ties go to the next "
                                          "objective in goodput -> throughput -> cost order")

    prefix_reuse: PrefixReuse | None = Field(
        None, description="run the benchmark with a shared system prompt and compare each tier's prefix-cache "
                          "hit rate (vLLM vs SGLang shootout); the record states the prefix-reuse winner")

    def price(self, tier: str) -> float | None:
        return self.tier_gpu_hour_price_usd.get(tier, self.gpu_hour_price_usd)
