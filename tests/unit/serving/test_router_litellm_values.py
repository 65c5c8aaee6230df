"""LiteLLM's config from the router spec to the value: each replica's share of a tier's weight (weight x 12 /
replicas, at least 1), every documented setting, fallback groups, and the canary and capacity-split arithmetic
(integer weights out of 1000) at their edges."""

from __future__ import annotations

import pytest

from gridready.serving import router
from gridready.serving.router import Upstream
from gridready.spec.router import Route, RouterSpec


def ups(tier: str, n: int, key: str | None = None) -> list[Upstream]:
    return [Upstream(tier, f"http://10.0.0.{i + 1}:8000/v1", f"{tier}-model", key) for i in range(n)]


def test_tier_key_env_names():
    assert router.tier_key_env("llama70b") == "GRIDREADY_TIER_LLAMA70B_API_KEY"
    assert router.tier_key_env("hot-tier.v2") == "GRIDREADY_TIER_HOT_TIER_V2_API_KEY"


def test_default_routes_group_tiers_by_served_name_in_first_seen_order():
    got = router.default_routes([("a1", "m"), ("b1", "n"), ("c1", "m")])
    assert [(r.model, [(t.tier, t.weight) for t in r.targets]) for r in got] == [
        ("m", [("a1", 1), ("c1", 1)]), ("n", [("b1", 1)])]


def test_the_whole_config():
    spec = RouterSpec(num_retries=3, allowed_fails=2, cooldown_s=45, timeout_s=900, health_check_interval_s=20)
    route = Route(model="llama", targets=[{"tier": "hot", "weight": 3}, {"tier": "idle", "weight": 0}],
                  fallback=["spare"])
    config = router.litellm_config(spec, [route], {"hot": ups("hot", 2, "GRIDREADY_TIER_HOT_API_KEY"),
                                                   "idle": ups("idle", 1), "spare": ups("spare", 1)})
    assert config == {
        "model_list": [
            {"model_name": "llama", "litellm_params": {"model": "hosted_vllm/hot-model",
                                                       "api_base": "http://10.0.0.1:8000/v1",
                                                       "api_key": "os.environ/GRIDREADY_TIER_HOT_API_KEY",
                                                       "weight": 18},
             "model_info": {"id": "llama@hot-0"}},
            {"model_name": "llama", "litellm_params": {"model": "hosted_vllm/hot-model",
                                                       "api_base": "http://10.0.0.2:8000/v1",
                                                       "api_key": "os.environ/GRIDREADY_TIER_HOT_API_KEY",
                                                       "weight": 18},
             "model_info": {"id": "llama@hot-1"}},
            # a fallback deployment has no weight; a tier without a key gets LiteLLM's placeholder
            {"model_name": "llama--fallback--spare", "litellm_params": {
                "model": "hosted_vllm/spare-model", "api_base": "http://10.0.0.1:8000/v1", "api_key": "no-key"},
             "model_info": {"id": "llama--fallback--spare@spare-0"}},
        ],
        "router_settings": {"routing_strategy": "simple-shuffle", "num_retries": 3, "allowed_fails": 2,
                            "cooldown_time": 45, "timeout": 900,
                            "fallbacks": [{"llama": ["llama--fallback--spare"]}],
                            "enable_health_check_routing": True},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY",
                             "custom_auth": "gridready_router_auth.user_api_key_auth",
                             "background_health_checks": True, "health_check_interval": 20},
        "litellm_settings": {"callbacks": ["prometheus"], "require_auth_for_metrics_endpoint": True},
    }


@pytest.mark.parametrize("weight, replicas, each", [
    (1, 1, 12), (1, 2, 6), (1, 5, 2),  # 2.4 rounds to 2
    (1, 8, 2),  # 1.5 rounds to the even 2
    (1, 24, 1),  # 0.5 rounds to 0: at least 1
    (1, 25, 1), (3, 7, 5), (1000, 3, 4000),
])
def test_each_replica_gets_its_share_of_the_tier_weight(weight, replicas, each):
    route = Route(model="m", targets=[{"tier": "tt", "weight": weight}])
    config = router.litellm_config(RouterSpec(), [route], {"tt": ups("tt", replicas)})
    assert [d["litellm_params"]["weight"] for d in config["model_list"]] == [each] * replicas
    assert [d["model_info"]["id"] for d in config["model_list"]] == [f"m@tt-{i}" for i in range(replicas)]


def test_a_route_without_fallbacks_adds_no_fallback_entry():
    route = Route(model="m", targets=[{"tier": "tt"}])
    assert router.litellm_config(RouterSpec(), [route], {"tt": ups("tt", 1)})["router_settings"]["fallbacks"] == []


def test_a_tier_without_endpoints_is_named():
    route = Route(model="m", targets=[{"tier": "tt"}], fallback=["ff"])
    with pytest.raises(ValueError, match=r"^route m: tier tt has no OpenAI-compatible endpoint$"):
        router.litellm_config(RouterSpec(), [route], {"tt": []})
    with pytest.raises(ValueError, match=r"^route m: fallback tier ff has no OpenAI-compatible endpoint$"):
        router.litellm_config(RouterSpec(), [route], {"tt": ups("tt", 1), "ff": []})


ROUTE = Route(model="m", targets=[{"tier": "aa", "weight": 3}, {"tier": "bb", "weight": 1}], fallback=["cc", "dd"])


def _weights(route: Route) -> list[tuple[str, int]]:
    return [(t.tier, t.weight) for t in route.targets]


def test_a_canary_takes_its_share_and_the_rest_keep_their_proportions():
    got = router.with_canary(ROUTE, "cc", 10)
    assert _weights(got) == [("aa", 675), ("bb", 225), ("cc", 100)]
    assert got.fallback == ["dd"] and got.model == "m"
    assert _weights(router.with_canary(ROUTE, "cc", 1)) == [("aa", 742), ("bb", 248), ("cc", 10)]  # 742.5 -> 742
    assert _weights(router.with_canary(ROUTE, "cc", 99)) == [("aa", 8), ("bb", 2), ("cc", 990)]  # 7.5 -> 8
    assert _weights(router.with_canary(ROUTE, "cc", 100)) == [("cc", 1000)]
    assert _weights(router.with_canary(ROUTE, "cc", 0)) == [("aa", 750), ("bb", 250)]
    # the canary already a weighted target: its old weight is not part of the rest
    assert _weights(router.with_canary(ROUTE, "aa", 50)) == [("bb", 500), ("aa", 500)]
    # the canary deployed beside the route with weight 0 (the spec's way): replaced by its share
    beside = Route(model="m", targets=[{"tier": "aa", "weight": 3}, {"tier": "cc", "weight": 0}])
    assert _weights(router.with_canary(beside, "cc", 25)) == [("aa", 750), ("cc", 250)]


@pytest.mark.parametrize("pct", [-1, 101])
def test_a_canary_share_outside_0_to_100_is_refused(pct):
    with pytest.raises(ValueError, match=rf"^canary weight {pct}: must be 0\.\.100$"):
        router.with_canary(ROUTE, "cc", pct)


def test_a_canary_with_no_current_tier_beside_it():
    alone = Route(model="m", targets=[{"tier": "cc", "weight": 2}, {"tier": "aa", "weight": 0}])
    with pytest.raises(ValueError, match=r"^route m: no current tier beside the canary cc$"):
        router.with_canary(alone, "cc", 99)
    assert _weights(router.with_canary(alone, "cc", 100)) == [("cc", 1000)]


def test_split_weights_out_of_1000():
    assert router.split_weights({"a": 3.0, "b": 1.0, "c": 0.0, "d": -2.0}) == {"a": 750, "b": 250, "c": 0, "d": 0}
    assert router.split_weights({"a": 1.0, "b": 2.0}) == {"a": 333, "b": 667}
    assert router.split_weights({"a": 0.001}) == {"a": 1000}
    for nothing in ({"a": 0.0, "b": -1.0}, {}):
        with pytest.raises(ValueError, match=r"^no tier has a positive measurement to split by$"):
            router.split_weights(nothing)


def test_split_from_decision_weights_by_capacity_within_the_slo():
    route = Route(model="m", targets=[{"tier": "aa"}, {"tier": "bb"}, {"tier": "cc"}])
    decision = {"tiers": [{"tier": "aa", "capacity_rps_at_slo": 30, "gate_passed": True},
                          {"tier": "bb", "capacity_rps_at_slo": "10", "gate_passed": True},
                          {"tier": "cc", "capacity_rps_at_slo": 500, "gate_passed": False},
                          {"tier": "zz", "capacity_rps_at_slo": 5, "gate_passed": True}]}
    assert _weights(router.split_from_decision(route, decision)) == [("aa", 750), ("bb", 250)]
    decision["tiers"][2].pop("gate_passed")  # no verdict: not within the SLO
    assert _weights(router.split_from_decision(route, decision)) == [("aa", 750), ("bb", 250)]
    with pytest.raises(ValueError, match=r"^route m: the decision record has no numbers for bb, cc$"):
        router.split_from_decision(route, {"tiers": decision["tiers"][:1]})
    with pytest.raises(ValueError, match="has no numbers for aa, bb, cc"):
        router.split_from_decision(route, {})


def test_canary_route_finds_the_one_route_and_drops_the_canary():
    one = Route(model="m1", targets=[{"tier": "aa"}, {"tier": "cc", "weight": 0}])
    two = Route(model="m2", targets=[{"tier": "bb"}])
    assert _weights(router.canary_route([two, one], "cc")) == [("aa", 1)]
    lone = Route(model="m3", targets=[{"tier": "cc"}, {"tier": "dd", "weight": 0}])
    with pytest.raises(ValueError, match=r"^no route lists tier cc beside a current tier with a weight"):
        router.canary_route([two, lone], "cc")
    again = Route(model="m4", targets=[{"tier": "bb"}, {"tier": "cc", "weight": 0}])
    with pytest.raises(ValueError, match=r"^tier cc is a target of several routes \(m1, m4\); a canary joins one$"):
        router.canary_route([one, two, again], "cc")


def test_replace_route_swaps_by_model_in_place():
    a, b = Route(model="a", targets=[{"tier": "aa"}]), Route(model="b", targets=[{"tier": "bb"}])
    new = Route(model="a", targets=[{"tier": "cc"}])
    assert router.replace_route([b, a], new) == [b, new]
    assert router.replace_route([b], new) == [b]
