"""The cross-object checker (gridready/serving/consistency.py) on both stacks rendered for a Kubernetes inventory
with a multi-node vLLM tier (RayService) and a multi-node Triton tier (LeaderWorkerSet), and on broken copies."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready import pulumi as gpulumi
from gridready.monitoring import kubernetes_monitors
from gridready.serving import consistency, topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

DIGEST = "sha256:" + "5e" * 32
PROMETHEUS = {"monitoring.coreos.com": "the customer's kube-prometheus-stack"}


def triton_tier(**over: Any) -> dict[str, Any]:
    tier = {"name": "llama70b-trt", "engine": "triton-trtllm", "served_name": "llama-3.3-70b-trt", "port": 8100,
            "model": {"hf_id": "meta-llama/Llama-3.3-70B-Instruct",
                      "revision": "6f6073b423013f6a7d4d9f39144961bfbfbc386b"},
            "tensor_parallel": 8, "pipeline_parallel": 2,
            "triton": {"mode": "engine", "versions": {"image_digest": DIGEST}}}
    tier.update(over)
    return tier


@pytest.fixture
def rendered(make_inv) -> dict[str, Any]:
    inv = make_inv(4, [vllm_tier(tensor_parallel=8, pipeline_parallel=2), triton_tier()], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"]))
    plans = topology.plan_tiers(inv, cert)
    configs = serve_config.stack_configs(inv, cert, plans)
    out = {stack: gpulumi.render(stack, cfg, "acme") for stack, cfg in configs.items()}
    docs = out["platform"].manifests + out["serving"].manifests
    docs += kubernetes_monitors("acme", [p.tier for p in plans])
    return {"docs": docs, "releases": out["platform"].helm_releases}


def _check(r: dict[str, Any], **kw: Any) -> list[str]:
    return consistency.check(r["docs"], r["releases"], external_controllers=PROMETHEUS, **kw)


def _doc(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_both_stacks_pass_every_rule(rendered) -> None:
    kinds = {d["kind"] for d in rendered["docs"]}
    assert {"RayService", "LeaderWorkerSet", "Service", "ServiceMonitor", "PodMonitor", "ConfigMap"} <= kinds
    assert _check(rendered) == []


def test_a_service_selecting_no_pod_is_caught(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    svc = _doc(docs, "Service", "llama70b-trt")
    svc["spec"]["selector"] = {"leaderworkerset.sigs.k8s.io/name": "llama70b-trt", "role": "leader"}  # the old one
    assert _check({**rendered, "docs": docs}) == [
        "Service/llama70b-trt: spec.selector: {'leaderworkerset.sigs.k8s.io/name': 'llama70b-trt', 'role': 'leader'} "
        "selects no pod template in namespace gridready-serving"]


def test_a_monitor_port_the_service_lacks_is_caught(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    _doc(docs, "ServiceMonitor", "llama70b-trt-engine")["spec"]["endpoints"][0]["port"] = "metrics"  # the old 8002
    (err,) = _check({**rendered, "docs": docs})
    assert err.startswith("ServiceMonitor/llama70b-trt-engine: spec.endpoints[0].port: 'metrics' is no port")


def test_a_kind_without_its_controller_is_caught(rendered) -> None:
    releases = [r for r in rendered["releases"] if r["name"] != "lws"]
    (err,) = _check({**rendered, "releases": releases})
    assert err.startswith("LeaderWorkerSet/llama70b-trt: apiVersion: leaderworkerset.x-k8s.io needs the lws")
    assert any("kube-prometheus-stack" in e for e in consistency.check(rendered["docs"], rendered["releases"]))


def test_an_env_secret_that_is_not_rendered_is_caught(rendered) -> None:
    docs = [d for d in rendered["docs"] if not (d["kind"] == "Secret" and d["metadata"]["name"] == "hf-token")]
    errors = _check({**rendered, "docs": docs})
    assert errors and all("Secret 'hf-token' is not rendered in namespace gridready-serving" in e for e in errors)
    assert _check({**rendered, "docs": docs}, external_objects=[("Secret", "gridready-serving", "hf-token")]) == []
