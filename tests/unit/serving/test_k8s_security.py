"""Kubernetes serving is closed by default: the vLLM API key reaches the pods from a Secret by reference (the
rendered manifests carry no value), and every tier's pods sit behind an Ingress NetworkPolicy that admits the
allowed clients to the serving ports only and keeps Ray's ports inside the tier. The policies pass the schema
validation (kubernetes-validate) and the cross-object checker, which catches the ways they can be left open."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready import pulumi as gpulumi
from gridready.serving import consistency, manifests, topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_consistency import PROMETHEUS, triton_tier

CLIENTS = ["192.0.2.0/24"]


@pytest.fixture
def rendered(make_inv) -> dict[str, Any]:
    inv = make_inv(4, [vllm_tier(tensor_parallel=8, pipeline_parallel=2), triton_tier()], target="kubernetes")
    inv.spec.serving.firewall_clients = CLIENTS
    inv.spec.serving.kubernetes.client_namespaces = ["gateway-system"]
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"]))
    plans = topology.plan_tiers(inv, cert)
    configs = serve_config.stack_configs(inv, cert, plans)
    out = {stack: gpulumi.render(stack, cfg, "acme") for stack, cfg in configs.items()}
    return {"docs": out["platform"].manifests + out["serving"].manifests, "releases": out["platform"].helm_releases}


def _check(docs: list[dict[str, Any]], r: dict[str, Any]) -> list[str]:
    return consistency.check(docs, r["releases"], external_controllers=PROMETHEUS)


def _policy(docs: list[dict[str, Any]], tier: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == f"{tier}-ingress")


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rc = doc["spec"]["rayClusterConfig"]
    groups = [rc["headGroupSpec"], *rc["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_the_api_key_reaches_every_vllm_pod_by_reference_only(rendered) -> None:
    docs = rendered["docs"]
    secret = next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "vllm-api-key")
    assert secret["stringData"] == {"VLLM_API_KEY": gpulumi.REDACTED}
    ray = next(d for d in docs if d["kind"] == "RayService")
    for c in _containers(ray):
        (env,) = [e for e in c["env"] if e["name"] == "VLLM_API_KEY"]
        assert env == {"name": "VLLM_API_KEY",
                       "valueFrom": {"secretKeyRef": {"name": "vllm-api-key", "key": "VLLM_API_KEY"}}}


def test_the_api_key_is_pulumi_secret_config() -> None:
    assert "vllmApiKey" in gpulumi.SECRET_KEYS["serving"]  # up() sets every one of them with secret=True


def test_each_tier_admits_its_own_pods_everywhere_and_clients_on_its_serving_ports(rendered) -> None:
    docs = rendered["docs"]
    vllm, trt = _policy(docs, "llama70b"), _policy(docs, "llama70b-trt")
    client_peers = [{"ipBlock": {"cidr": CLIENTS[0]}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway-system"}}}]
    for pol, tier in ((vllm, "llama70b"), (trt, "llama70b-trt")):
        assert pol["spec"]["podSelector"] == {"matchLabels": {"gridready.io/tier": tier}}
        assert pol["spec"]["policyTypes"] == ["Ingress"]
        assert pol["spec"]["ingress"][0] == {"from": [{"podSelector": {"matchLabels": {"gridready.io/tier": tier}}}]}
    # Ray Serve LLM checks no key (#29 finding 12): the Serve proxy admits the authenticating router's pods only,
    # the clients reach the metrics port alone
    front, clients, scrapers, operator = vllm["spec"]["ingress"][1:]
    assert front == {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "gridready-router",
                                                               "app.kubernetes.io/managed-by": "gridready"}}}],
                     "ports": [{"protocol": "TCP", "port": 8000}]}
    assert clients["from"] == client_peers and [p["port"] for p in clients["ports"]] == [8080]
    # Prometheus' namespace on the metrics port (issue 44)
    assert scrapers["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert [p["port"] for p in scrapers["ports"]] == [8080]
    # the KubeRay operator only: the dashboard, its agent and the Serve proxy's health check (issue 44)
    assert [p["port"] for p in operator["ports"]] == [8265, 52365, 8000]
    assert operator["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}}}]
    assert trt["spec"]["ingress"][1]["from"] == client_peers
    trt_ports = {p["port"] for p in trt["spec"]["ingress"][1]["ports"]}
    assert trt_ports and not trt_ports & {6379, 8265, 10001, 52365}
    assert len(trt["spec"]["ingress"]) == 3  # own pods, clients, Prometheus' namespace on the metrics port
    router = _policy(docs, "gridready-router")
    assert router["spec"]["ingress"][1]["from"] == client_peers


def test_the_policies_pass_the_schemas_and_the_checker(rendered) -> None:
    docs = rendered["docs"]
    assert manifests.validate(docs) == []
    assert _check(docs, rendered) == []


def test_a_malformed_policy_fails_the_schema(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    _policy(docs, "llama70b")["spec"]["ingress"][2]["ports"][0]["port"] = [8000]
    errors = manifests.validate(docs)
    assert errors and any("NetworkPolicy" in e for e in errors), errors


def test_a_tier_without_a_policy_is_caught(rendered) -> None:
    docs = [d for d in rendered["docs"] if d is not _policy(rendered["docs"], "llama70b-trt")]
    errors = _check(docs, rendered)
    assert errors and all("no Ingress NetworkPolicy of namespace gridready-serving selects the pods of tier "
                          "'llama70b-trt'" in e for e in errors)


@pytest.mark.parametrize(("rule", "message"), [
    ({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}, "to every port, Ray's included"),
    ({"ports": [{"port": 8000}]}, "admits every source"),
    ({"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": 6379}]}, "opens Ray's GCS (6379)"),
    ({"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": 8265}]}, "opens the Ray dashboard (8265)"),
    ({"from": [{"podSelector": {}}], "ports": [{"port": 52365}]}, "opens the Ray dashboard agent (52365)"),
    ({"from": [{"podSelector": {}}], "ports": [{"port": 10000, "endPort": 10010}]}, "the Ray client server"),
    ({"from": [{"podSelector": {}}], "ports": [{"port": 11000, "endPort": 11999}]}, "Ray's worker ports"),
])
def test_a_rule_that_opens_ray_beyond_the_tier_is_caught(rendered, rule: dict[str, Any], message: str) -> None:
    docs = copy.deepcopy(rendered["docs"])
    _policy(docs, "llama70b")["spec"]["ingress"].append(rule)
    errors = _check(docs, rendered)
    # a rule open to the Serve port (8000) is also reported as admitting clients to Ray Serve's keyless ingress
    ray = [e for e in errors if "checks no API key" not in e]
    assert len(ray) == 1 and ray[0].startswith("NetworkPolicy/llama70b-ingress: spec.ingress[5]: ") \
        and message in ray[0], errors
