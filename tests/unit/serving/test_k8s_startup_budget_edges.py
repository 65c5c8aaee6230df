"""KubeRay's initializing timeout at its edges: the size read from the model's name (the last path part, NxM
experts, decimals, the lower-case b, a unit-less name), the budget in whole seconds computed here from the
documented parts (GB x 8000 / Mbit/s x 1.5 download, GB / 2 load, 600 s fixed), whole minutes rounded up and the
30-minute floor equal, below and above."""

from __future__ import annotations

import math

import pytest

from gridready.serving import k8s_startup
from gridready.spec.serving import ModelSource

REV = "6f6073b423013f6a7d4d9f39144961bfbfbc386b"


def hub(hf_id: str, **over: object) -> ModelSource:
    return ModelSource.model_validate({"hf_id": hf_id, "revision": REV, **over})


def local(path: str, **over: object) -> ModelSource:
    return ModelSource.model_validate({"local_path": path, **over})


@pytest.mark.parametrize("model, gb", [
    (hub("meta-llama/Llama-3.1-8B-Instruct"), 16.0),  # "3.1-" is no size: the first number before a B is
    (hub("Qwen/Qwen2.5-1.5B-Instruct"), 3.0),
    (hub("mistralai/Mixtral-8x22B-v0.1"), 352.0),  # 8 x 22 B parameters x 2 bytes
    (local("/models/70b/llama-8b"), 16.0),  # the last path part only: not the folder's 70b
    (local("/models/llama-8b-chat"), 16.0),
    (hub("org/Name-7Bit"), 140.0),  # a B followed by letters is no size: unknown, a 70B model's
    (hub("gpt2"), 140.0),  # no "/" in the id, no size in it
    (hub("org/13B"), 26.0),
    (hub("org/custom", weights_gb=12.5), 12.5),
])
def test_the_size_in_gb(model, gb):
    assert k8s_startup.weights_gb(model) == gb
    assert isinstance(k8s_startup.weights_gb(model), float)


def test_the_budget_is_the_sum_of_its_documented_parts():
    model = hub("org/custom", weights_gb=10)
    # download 10 GB = 80,000 Mbit at 100 Mbit/s is 800 s, x 1.5 = 1,200; load 10 / 2 = 5; fixed 600
    assert k8s_startup.initializing_timeout_s(model, 100) == 1200 + 5 + 600
    assert k8s_startup.initializing_timeout(model, 100) == "31m"  # 1,805 s: 30.08 min, rounded up
    # a local path downloads nothing: only the load and the fixed part
    assert k8s_startup.initializing_timeout_s(local("/m/x", weights_gb=10), 100) == 605


@pytest.mark.parametrize("gb, seconds, minutes", [
    (2400.0, 1800, "30m"),  # 1,200 s of load + 600: exactly the floor
    (2401.0, 1800, "30m"),  # 1,800.5 s: whole seconds (int) before the minutes are rounded
    (2402.0, 1801, "31m"),  # one second above the floor is a minute more
    (2518.0, 1859, "31m"),
    (2520.0, 1860, "31m"),  # exactly 31 minutes
    (2522.0, 1861, "32m"),
    (100.0, 650, "30m"),  # well below the floor: the floor
])
def test_minutes_round_up_and_never_go_under_the_floor(gb, seconds, minutes):
    model = local("/m/x", weights_gb=gb)
    assert k8s_startup.initializing_timeout_s(model, 1000) == seconds
    assert k8s_startup.initializing_timeout(model, 1000) == minutes


def test_the_hub_bandwidth_divides_the_download():
    model = hub("meta-llama/Llama-3.3-70B-Instruct")
    for mbps in (100, 250, 1000, 10000):  # at 100 Mbit/s one part in 8000 of the factor is 2 s
        download = 140 * 8000 / mbps * 1.5
        assert k8s_startup.initializing_timeout_s(model, mbps) == int(download + 70 + 600)
    assert k8s_startup.initializing_timeout(model, 250) == f"{math.ceil((6720 + 670) / 60)}m"
