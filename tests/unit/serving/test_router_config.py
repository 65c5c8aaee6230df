"""gridready.serving.router: the LiteLLM config the gridready_router role writes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gridready.serving import router
from gridready.spec.router import Route, RouterSpec, RouteTarget

UPS = {
    "batch": [router.Upstream("batch", "http://10.77.0.11:8000/v1", "llama", router.tier_key_env("batch"))],
    "hot": [router.Upstream("hot", "http://10.77.0.12:8000/v1", "llama", None)],
    "spare": [router.Upstream("spare", "http://10.77.0.13:8000/v1", "llama", None)],
}
SPEC = RouterSpec(enabled=True, keys=[{"name": "ci", "vault_var": "gridready_router_key_ci", "rpm_limit": 60}])


def route(**kw: object) -> Route:
    base = {"model": "llama", "targets": [{"tier": "batch", "weight": 3}, {"tier": "hot", "weight": 1}]}
    return Route.model_validate(base | kw)


def test_weighted_deployments_share_the_model_name() -> None:
    cfg = router.litellm_config(SPEC, [route()], UPS)
    deps = cfg["model_list"]
    assert [d["model_name"] for d in deps] == ["llama", "llama"]
    assert [d["litellm_params"]["weight"] for d in deps] == [36, 12]  # 3:1
    assert deps[0]["litellm_params"]["model"] == "hosted_vllm/llama"
    assert deps[0]["litellm_params"]["api_base"] == "http://10.77.0.11:8000/v1"
    assert cfg["router_settings"]["routing_strategy"] == "simple-shuffle"


def test_replicas_share_their_tier_weight() -> None:
    ups = dict(UPS, hot=[router.Upstream("hot", f"http://10.77.0.{i}:8000/v1", "llama") for i in (20, 21, 22)])
    deps = router.litellm_config(SPEC, [route()], ups)["model_list"]
    weights = {d["model_info"]["id"]: d["litellm_params"]["weight"] for d in deps}
    assert weights == {"llama@batch-0": 36, "llama@hot-0": 4, "llama@hot-1": 4, "llama@hot-2": 4}


def test_secrets_are_only_environment_references() -> None:
    cfg = router.litellm_config(SPEC, [route()], UPS)
    assert cfg["model_list"][0]["litellm_params"]["api_key"] == "os.environ/GRIDREADY_TIER_BATCH_API_KEY"
    assert cfg["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert cfg["litellm_settings"]["require_auth_for_metrics_endpoint"] is True
    assert "prometheus" in cfg["litellm_settings"]["callbacks"]


def test_fallback_tier_is_its_own_group() -> None:
    cfg = router.litellm_config(SPEC, [route(fallback=["spare"])], UPS)
    group = router.fallback_group("llama", "spare")
    assert cfg["router_settings"]["fallbacks"] == [{"llama": [group]}]
    assert cfg["model_list"][-1]["model_name"] == group
    assert "weight" not in cfg["model_list"][-1]["litellm_params"]


def test_unknown_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="tier gone has no OpenAI-compatible endpoint"):
        router.litellm_config(SPEC, [route(targets=[{"tier": "gone"}])], UPS)


def test_default_routes_group_tiers_by_served_name() -> None:
    routes = router.default_routes([("batch", "llama"), ("hot", "llama"), ("small", "qwen")])
    assert [(r.model, [t.tier for t in r.targets]) for r in routes] == [("llama", ["batch", "hot"]),
                                                                       ("qwen", ["small"])]


def test_canary_takes_its_share() -> None:
    canaried = router.with_canary(route(), "next", 10)
    weights = {t.tier: t.weight for t in canaried.targets}
    assert weights == {"batch": 675, "hot": 225, "next": 100}
    promoted = router.with_canary(route(), "next", 100)
    assert [(t.tier, t.weight) for t in promoted.targets] == [("next", 1000)]
    with pytest.raises(ValueError):
        router.with_canary(route(), "next", 101)


def test_split_weights_follow_measurements() -> None:
    assert router.split_weights({"batch": 300.0, "hot": 100.0, "broken": 0.0}) == {"batch": 750, "hot": 250,
                                                                                     "broken": 0}
    with pytest.raises(ValueError):
        router.split_weights({"a": 0.0})


@pytest.mark.parametrize("bad", [
    {"targets": [{"tier": "batch", "weight": 0}]},
    {"targets": [{"tier": "batch"}, {"tier": "batch"}]},
    {"fallback": ["batch"]},
])
def test_bad_routes_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        route(**bad)


def test_enabled_router_needs_a_key() -> None:
    with pytest.raises(ValidationError, match="at least one entry in keys"):
        RouterSpec(enabled=True)
    assert RouterSpec().enabled is False
    assert RouteTarget(tier="batch").weight == 1


def test_split_from_the_decision_record() -> None:
    record = {"tiers": [{"tier": "batch", "gate_passed": True, "capacity_rps_at_slo": 30.0},
                        {"tier": "hot", "gate_passed": True, "capacity_rps_at_slo": 10.0}]}
    split = router.split_from_decision(route(split_from_decision=True), record)
    assert {t.tier: t.weight for t in split.targets} == {"batch": 750, "hot": 250}
    record["tiers"][1]["gate_passed"] = False  # a tier that missed its SLO gets no traffic
    assert [t.tier for t in router.split_from_decision(route(), record).targets] == ["batch"]
    with pytest.raises(ValueError, match="no numbers for hot"):
        router.split_from_decision(route(), {"tiers": record["tiers"][:1]})
