"""The router's HTTPRoutes validate against the vendored Gateway API CRD; a canary renders as the weighted route."""

from __future__ import annotations

import pytest

from gridready.serving import manifests, router, router_k8s
from gridready.spec.router import Route

PORTS = {"batch": 8000, "hot": 8001, "next": 8002}
ROUTE = Route(model="llama-3.1-8b", targets=[{"tier": "batch", "weight": 3}, {"tier": "hot", "weight": 1}])


def test_route_validates_offline() -> None:
    doc = router_k8s.httproute(ROUTE, "gridready-serving", "inference-gateway", PORTS)
    assert manifests.validate([doc]) == []
    rule = doc["spec"]["rules"][0]
    assert rule["matches"][0]["headers"] == [{"type": "Exact", "name": "X-Gateway-Model-Name",
                                              "value": "llama-3.1-8b"}]
    assert [(b["name"], b["weight"]) for b in rule["backendRefs"]] == [("batch-openai", 3), ("hot-openai", 1)]


def test_canary_renders_as_the_weighted_route() -> None:
    doc = router_k8s.httproute(router.with_canary(ROUTE, "next", 10), "gridready-serving", "gw", PORTS)
    assert manifests.validate([doc]) == []
    weights = {b["name"]: b["weight"] for b in doc["spec"]["rules"][0]["backendRefs"]}
    assert weights == {"batch-openai": 675, "hot-openai": 225, "next-openai": 100}
    assert weights["next-openai"] / sum(weights.values()) == pytest.approx(0.10)


def test_schema_catches_a_bad_route() -> None:
    doc = router_k8s.httproute(ROUTE, "gridready-serving", "gw", PORTS)
    doc["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1  # the CRD's minimum is 0
    errors = manifests.validate([doc])
    assert errors and "backendRefs" in errors[0]


def test_tier_without_service_is_refused() -> None:
    with pytest.raises(ValueError, match="tier hot has no OpenAI Service"):
        router_k8s.httproute(ROUTE, "ns", "gw", {"batch": 8000})
