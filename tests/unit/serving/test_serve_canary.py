"""`invoke serve --canary <tier> --weight N`: the flags (exit 2, one line), the route a canary joins, the router
play it re-applies on hosts, and the weighted HTTPRoute it renders as on Kubernetes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready import contracts
from gridready import pulumi as gpulumi
from gridready.errors import InvalidInput
from gridready.serving import consistency, manifests, router, topology
from gridready.spec.router import Route, RouteTarget
from gridready.stages import serve_canary, serve_config, serve_router
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import TIERS, with_router

CANARY_ROUTES = [{"model": "llama-3.3-70b", "targets": [{"tier": "batch", "weight": 1}, {"tier": "hot", "weight": 0}]}]


@pytest.mark.parametrize(("tier", "weight", "message"), [
    ("hot", "0", r"^--weight: \(flag\): 0 is not a canary share; give 1\.\.99 \(%\)$"),
    ("hot", "100", r"^--weight: \(flag\): 100 is not a canary share"),
    ("hot", "ten", r"^--weight: \(flag\): 'ten' is not a whole number of percent$"),
    (None, "10", r"^--weight: \(flag\): only with --canary <tier>$"),
    ("nope", "10", r"^--canary: \(flag\): 'nope' is not a tier of .*cluster\.yml serving\.tiers \(batch, hot\)$"),
])
def test_bad_flags_are_one_line(make_inv, tier, weight, message):
    inv = with_router(make_inv(4, TIERS), routes=CANARY_ROUTES)
    with pytest.raises(InvalidInput, match=message) as err:
        serve_canary.check_flags(inv, tier, weight)
    assert err.value.code == 2 and "\n" not in str(err.value)


def test_flags_need_the_router_and_a_route_beside_a_current_tier(make_inv):
    with pytest.raises(InvalidInput, match=r"cluster\.yml: serving\.router\.enabled: a canary is routed"):
        serve_canary.check_flags(make_inv(4, TIERS), "hot", None)
    # default routes: one per served name, both tiers on it with weight 1: a canary with a current tier
    inv = with_router(make_inv(4, TIERS))
    assert serve_canary.check_flags(inv, "hot", None) == 10
    alone = with_router(make_inv(4, TIERS), routes=[{"model": "a", "targets": [{"tier": "batch"}]},
                                                    {"model": "b", "targets": [{"tier": "hot"}]}])
    with pytest.raises(InvalidInput, match=r"serving\.router\.routes: no route lists tier hot beside a current"):
        serve_canary.check_flags(alone, "hot", "5")
    assert serve_canary.check_flags(with_router(make_inv(4, TIERS), routes=CANARY_ROUTES), "hot", "25") == 25


def test_a_triton_canary_on_hosts_is_refused(make_inv):
    tiers = [*TIERS[:1], vllm_tier(name="hot", engine="triton-trtllm", port=9000, tensor_parallel=8,
                                   pipeline_parallel=1)]
    inv = with_router(make_inv(4, tiers), routes=CANARY_ROUTES)
    with pytest.raises(InvalidInput, match=r"hot is a triton-trtllm tier; the live SLO gate of a canary reads vLLM"):
        serve_canary.check_flags(inv, "hot", "10")


def test_canary_route_is_the_route_without_the_canary():
    routes = [Route(model="m", targets=[RouteTarget(tier="batch", weight=3), RouteTarget(tier="next", weight=0)]),
              Route(model="other", targets=[RouteTarget(tier="next")])]
    assert router.canary_route(routes, "next") == Route(model="m", targets=[RouteTarget(tier="batch", weight=3)])
    twice = [*routes, Route(model="m2", targets=[RouteTarget(tier="hot"), RouteTarget(tier="next")])]
    with pytest.raises(ValueError, match="several routes"):
        router.canary_route(twice, "next")


def test_hosts_deploy_keeps_the_canary_out_of_its_route_until_split(make_inv, write_certify):
    inv = with_router(make_inv(4, TIERS))  # default route: batch and hot, weight 1 each
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    cert = topology.read_certification(inv, contracts.latest(root, "acme", contracts.CertifySummary))
    plans = topology.plan_tiers(inv, cert)
    ids = [d["model_info"]["id"] for d in
           serve_router.extravars(inv, root, cert, plans, "hot")["gridready_serve_router"]["config"]["model_list"]]
    assert ids == ["llama-3.3-70b@batch-0"]
    split = router.with_canary(router.canary_route(serve_router.routes(inv, root, plans), "hot"), "hot", 10)
    weights = {d["model_info"]["id"]: d["litellm_params"]["weight"] for d in serve_router.extravars(
        inv, root, cert, plans, chosen=[split])["gridready_serve_router"]["config"]["model_list"]}
    assert weights == {"llama-3.3-70b@batch-0": 900 * router.REPLICA_SCALE,
                       "llama-3.3-70b@hot-0": 100 * router.REPLICA_SCALE}


def _k8s(make_inv, write_certify, **flags: Any) -> list[dict[str, Any]]:
    inv = with_router(make_inv(4, TIERS, target="kubernetes"), routes=CANARY_ROUTES)
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    cert = topology.read_certification(inv, contracts.latest(root, "acme", contracts.CertifySummary))
    configs = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert), root, **flags)
    return gpulumi.render("serving", configs["serving"], "acme").manifests


def test_kubernetes_canary_renders_as_the_weighted_route_and_validates(make_inv, write_certify):
    docs = _k8s(make_inv, write_certify, canary="hot", canary_weight=10)
    (route,) = [d for d in docs if d["kind"] == "HTTPRoute"]
    refs = {b["name"]: b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]}
    assert refs == {"batch-openai": 900, "hot-openai": 100}
    assert route["spec"]["parentRefs"] == [{"name": "inference-gateway"}]
    assert manifests.validate(docs) == []
    assert consistency.check(docs, external_controllers={"ray.io": "the platform stack"}) == []
    (steady,) = [d for d in _k8s(make_inv, write_certify) if d["kind"] == "HTTPRoute"]
    assert {b["name"]: b["weight"] for b in steady["spec"]["rules"][0]["backendRefs"]} == {
        "batch-openai": 1, "hot-openai": 0}


def test_the_checker_catches_a_route_to_a_missing_service_or_port(make_inv, write_certify):
    docs = _k8s(make_inv, write_certify, canary="hot", canary_weight=10)
    bad = copy.deepcopy(docs)
    (route,) = [d for d in bad if d["kind"] == "HTTPRoute"]
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = 1
    route["spec"]["rules"][0]["backendRefs"][1]["name"] = "gone-openai"
    errors = consistency.check(bad)
    assert any("backendRefs[batch-openai]: port 1 is not a port of Service 'batch-openai'" in e for e in errors)
    assert any("backendRefs[gone-openai]: Service 'gone-openai' is not rendered" in e for e in errors)
