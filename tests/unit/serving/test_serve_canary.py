"""`invoke serve --canary <tier> --weight N`: the flags (exit 2, one line), the route a canary joins, the router
play it re-applies on hosts, and the weighted HTTPRoute it renders as on Kubernetes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from gridready import ansible, ledger
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.serving import consistency, manifests, router, topology
from gridready.spec.router import Route, RouteTarget
from gridready.stages.serve import canary as canary
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import rollout as serve_canary
from gridready.stages.serve import router as serve_router
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import with_router

SLO = {"ttft_ms_p99": 2000, "tpot_ms_p99": 100}
TIERS = [vllm_tier(name="batch", tensor_parallel=8, pipeline_parallel=1, slo=SLO),
         vllm_tier(name="hot", port=8001, tensor_parallel=8, pipeline_parallel=1, slo=SLO)]

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


def test_a_canary_without_a_latency_slo_is_refused(make_inv):
    tiers = [TIERS[0], vllm_tier(name="hot", port=8001, tensor_parallel=8, pipeline_parallel=1)]
    inv = with_router(make_inv(4, tiers), routes=CANARY_ROUTES)
    with pytest.raises(InvalidInput, match=r"cluster\.yml: serving\.tiers\[1\]\.slo: the canary hot is judged on its "):
        serve_canary.check_flags(inv, "hot", "10")


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
    cert = topology.read_certification(inv, ledger.read(root, "acme"))
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
    cert = topology.read_certification(inv, ledger.read(root, "acme"))
    configs = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert), root, **flags)
    return gpulumi.render("serving", configs["serving"], "acme").manifests


def _router_weights(docs: list[dict[str, Any]]) -> dict[str, int]:
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gridready-router"]
    conf = yaml.safe_load(cm["data"]["config.yaml"])
    return {m["model_info"]["id"]: m["litellm_params"]["weight"] for m in conf["model_list"]
            if "weight" in m["litellm_params"]}


def test_kubernetes_canary_renders_as_the_weighted_router_config_and_validates(make_inv, write_certify):
    """On Kubernetes the router (the authenticating front, #29) carries the canary's weight; the Gateway's one
    HTTPRoute hands /v1 to it."""
    docs = _k8s(make_inv, write_certify, canary="hot", canary_weight=10)
    (route,) = [d for d in docs if d["kind"] == "HTTPRoute"]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "gridready-router", "port": 4000}]
    assert route["spec"]["parentRefs"] == [{"name": "inference-gateway"}]
    weights = _router_weights(docs)
    assert weights == {"llama-3.3-70b@batch-0": 900 * router.REPLICA_SCALE,
                       "llama-3.3-70b@hot-0": 100 * router.REPLICA_SCALE}
    assert manifests.validate(docs) == []
    assert consistency.check(docs, external_controllers={"ray.io": "the platform stack"}) == []
    steady = _router_weights(_k8s(make_inv, write_certify))
    assert steady == {"llama-3.3-70b@batch-0": 1 * router.REPLICA_SCALE}


def test_the_checker_catches_a_route_to_a_missing_service_or_port(make_inv, write_certify):
    docs = _k8s(make_inv, write_certify, canary="hot", canary_weight=10)
    bad = copy.deepcopy(docs)
    (route,) = [d for d in bad if d["kind"] == "HTTPRoute"]
    route["spec"]["rules"][0]["backendRefs"] = [{"name": "gridready-router", "port": 1},
                                                {"name": "gone-openai", "port": 8000}]
    errors = consistency.check(bad)
    assert any("backendRefs[gridready-router]: port 1 is not a port of Service 'gridready-router'" in e
               for e in errors)
    assert any("backendRefs[gone-openai]: Service 'gone-openai' is not rendered" in e for e in errors)


def _metrics(count: int, seconds: float) -> str:
    """vLLM's three latency histograms with `count` observations, all in the bucket ending at `seconds`."""
    lines = []
    for name in ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds",
                 "vllm:e2e_request_latency_seconds"):
        for le in (0.01, seconds, 100.0):
            lines.append(f'{name}_bucket{{le="{le}",model_name="m"}} {count if le >= seconds else 0}')
        lines.append(f'{name}_bucket{{le="+Inf",model_name="m"}} {count}')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("ttft_s", "decision", "code", "last_weights"), [
    (0.03, "promote", 0, {"llama-3.3-70b@hot-0": 1000 * router.REPLICA_SCALE}),
    (5.0, "rollback", 3, {"llama-3.3-70b@batch-0": router.REPLICA_SCALE}),
])
def test_hosts_rollout_applies_each_step_through_the_router_play(make_inv, write_certify, monkeypatch, tmp_path,
                                                                 ttft_s, decision, code, last_weights):
    """The router play runs with tag `router` for the split and for the outcome; the canary's live histograms
    decide (the network reads are replaced: scrapes return vLLM histogram text, the driver counts requests)."""
    inv = with_router(make_inv(4, TIERS))
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    cert = topology.read_certification(inv, ledger.read(root, "acme"))
    plans = topology.plan_tiers(inv, cert)
    runs: list[dict[str, Any]] = []

    def run_playbook(inv, playbook, stage_dir, **kwargs):
        runs.append({"playbook": playbook, **kwargs})
        hosts = {kwargs["extravars"]["gridready_serve_router"]["host"]: ansible.HostStats(ok=5, changed=1)}
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts=hosts, events=[])

    scrapes = iter([_metrics(0, ttft_s), _metrics(20, ttft_s)])
    monkeypatch.setattr(serve_canary.ansible, "run_playbook", run_playbook)
    monkeypatch.setattr(serve_router, "wait_live", lambda url, timeout_s, **_: True)
    monkeypatch.setattr(canary, "_scrape", lambda url: _async(next(scrapes)))
    monkeypatch.setattr(canary, "_drive", lambda url, key, model, n, observe_s: _async((n, 0)))
    ctx = RunContext(customer="acme", run_id="20261201T050000Z-cana", root=root, canary="hot", canary_weight=10)
    data: dict[str, Any] = {}
    messages: list[str] = []
    status, exit_code = serve_canary.on_hosts(inv, ctx, cert, plans, data, messages)
    assert (status, int(exit_code), data["canary"]["decision"]) == (
        "success" if code == 0 else "failed", code, decision)
    assert [(r["playbook"], r["tags"]) for r in runs] == [("serve.yml", "router")] * 2

    def weights(run: dict[str, Any]) -> dict[str, int]:
        return {d["model_info"]["id"]: d["litellm_params"]["weight"]
                for d in run["extravars"]["gridready_serve_router"]["config"]["model_list"]}

    assert weights(runs[0]) == {"llama-3.3-70b@batch-0": 900 * router.REPLICA_SCALE,
                                "llama-3.3-70b@hot-0": 100 * router.REPLICA_SCALE}
    assert weights(runs[1]) == last_weights
    assert 4000 in runs[0]["extravars"]["gridready_serve"]["hosts"][runs[0]["extravars"]["gridready_serve_router"][
        "host"]]["api_ports"]
    record = json.loads((root / "acme" / ctx.run_id / "serve" / "decision" / "canary-hot" / "canary.json").read_text())
    assert [s["step"] for s in record["steps"]] == ["split", "observe", decision]
    assert record["gate"]["requests"] == 20
    if code:
        assert "ttft_ms_p99" in messages[-1] and record["gate"]["failed_slo"] == "ttft_ms_p99"


async def _async(value: Any) -> Any:
    return value
