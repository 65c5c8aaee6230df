"""KubeRay's initializing timeout from the model's size (issue 44): a 70B first start downloads 140 GB, which
the old fixed 30 minutes cut off for good (InitializingTimeout is terminal)."""

from __future__ import annotations

from gridready.serving import k8s_startup
from gridready.spec.serving import ModelSource

REV = "6f6073b423013f6a7d4d9f39144961bfbfbc386b"


def _model(hf_id: str, **over: object) -> ModelSource:
    return ModelSource.model_validate({"hf_id": hf_id, "revision": REV, **over})


def test_the_budget_covers_the_download_at_the_stated_bandwidth():
    seventy = _model("meta-llama/Llama-3.3-70B-Instruct")
    assert k8s_startup.weights_gb(seventy) == 140
    # 140 GB at 1 Gbit/s is 1,120 s of download alone; with the load and the fixed part well past 30 minutes
    assert k8s_startup.initializing_timeout_s(seventy, 1000) > 1800
    assert k8s_startup.initializing_timeout(seventy, 1000) == "40m"
    # a slower link or a larger model gets more, never less
    assert k8s_startup.initializing_timeout_s(seventy, 500) > k8s_startup.initializing_timeout_s(seventy, 1000)
    big = _model("meta-llama/Llama-3.1-405B-Instruct")
    assert k8s_startup.initializing_timeout_s(big, 1000) > 3 * 3600 - 600
    assert k8s_startup.weights_gb(_model("mistralai/Mixtral-8x7B-Instruct-v0.1")) == 112


def test_a_stated_size_wins_and_a_small_model_keeps_the_floor():
    assert k8s_startup.weights_gb(_model("org/custom-model", weights_gb=300)) == 300
    assert k8s_startup.initializing_timeout(_model("Qwen/Qwen2.5-1.5B-Instruct"), 1000) == "30m"
