"""vllm-router's command line in full (each flag of `vllm-router --help`, 0.1.17) with the defaults and with every
setting changed, the refusals' exact words, and the worker difference in sorted order."""

from __future__ import annotations

import pytest

from gridready.serving import tier_router
from gridready.serving.tier_router import TierRouter


def test_the_defaults_in_full():
    r = TierRouter(tier="hot", bind="10.0.0.1", port=4100, workers=("http://10.0.0.2:8000",))
    assert (r.policy, r.health_check_interval_s, r.retries) == ("cache_aware", 5, 1)
    assert tier_router.argv(r) == [
        "vllm-router", "--host", "10.0.0.1", "--port", "4100", "--worker-urls", "http://10.0.0.2:8000",
        "--policy", "cache_aware", "--health-check-interval-secs", "5", "--retry-max-retries", "1",
        "--log-level", "warning"]


def test_every_setting_reaches_its_flag():
    r = TierRouter(tier="batch", bind="127.0.0.1", port=4101, workers=("http://a:1", "http://b:2"),
                   policy="power_of_two", health_check_interval_s=11, retries=4)
    assert tier_router.argv(r) == [
        "vllm-router", "--host", "127.0.0.1", "--port", "4101", "--worker-urls", "http://a:1", "http://b:2",
        "--policy", "power_of_two", "--health-check-interval-secs", "11", "--retry-max-retries", "4",
        "--log-level", "warning"]
    assert r.url == "http://127.0.0.1:4101"


@pytest.mark.parametrize("policy", ["cache_aware", "round_robin", "power_of_two"])
def test_each_documented_policy_is_taken(policy):
    assert TierRouter(tier="t", bind="b", port=1, workers=("w",), policy=policy).policy == policy


def test_refusals_say_exactly_what_is_wrong():
    with pytest.raises(ValueError) as err:
        TierRouter(tier="hot", bind="b", port=1, workers=("w",), policy="random")
    assert str(err.value) == "tier router policy 'random': one of cache_aware, round_robin, power_of_two"
    with pytest.raises(ValueError) as err:
        TierRouter(tier="hot", bind="b", port=1, workers=())
    assert str(err.value) == "tier hot: a tier router needs at least one replica"


def test_worker_changes_are_sorted_and_compare_without_trailing_slashes():
    listed = ["http://z:1", "http://c:1//", "http://a:1", "http://m:1"]
    wanted = ["http://y:1/", "http://c:1", "http://b:1", "http://m:1"]
    assert tier_router.worker_changes(listed, wanted) == (["http://a:1", "http://z:1"], ["http://b:1", "http://y:1"])
    assert tier_router.worker_changes([], []) == ([], [])
    # a name ending in X is no trailing slash
    assert tier_router.worker_changes(["http://gpuX"], ["http://gpu"]) == (["http://gpuX"], ["http://gpu"])
    assert tier_router.worker_changes(["http://gpuX"], ["http://gpuX/"]) == ([], [])
