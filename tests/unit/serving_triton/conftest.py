"""Llama-3.1-8B-like and Llama-3.3-70B-like Triton tiers on HGX H200 (8 GPUs per node)."""

from __future__ import annotations

from typing import Any

from gridready import catalog
from gridready.serving.triton import make_plan
from gridready.serving.triton_plan import TritonPlan
from gridready.spec.parallel import Parallelism
from gridready.spec.serving import Tier
from gridready.spec.triton import TritonSettings

H200 = catalog.lookup("h200")
MODELS = {
    "8b": ("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f2"),
    "70b": ("meta-llama/Llama-3.3-70B-Instruct", "6f6073b4"),
}
# (model, TP, PP): the acceptance matrix of issue 8
MATRIX = [("8b", 1, 1), ("8b", 8, 1), ("70b", 8, 1), ("70b", 8, 2)]


def tier(size: str = "8b", tp: int = 1, pp: int = 1, **over: Any) -> Tier:
    hf_id, rev = MODELS[size]
    data: dict[str, Any] = {
        "name": f"trt-{size}", "engine": "triton-trtllm", "served_name": f"llama-{size}",
        "model": {"hf_id": hf_id, "revision": rev}, "tensor_parallel": tp, "pipeline_parallel": pp, "port": 9000,
    }
    data.update(over)
    return Tier(**data)


def plan(size: str = "8b", tp: int = 1, pp: int = 1, *, simulated: bool = True, tier_over: dict | None = None,
         **settings: Any) -> TritonPlan:
    return make_plan(tier(size, tp, pp, **(tier_over or {})), TritonSettings(**settings), sku=H200,
                     parallel=Parallelism(tp, pp, 8), simulated=simulated)

