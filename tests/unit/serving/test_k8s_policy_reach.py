"""The tiers' NetworkPolicies let Prometheus scrape and the KubeRay operator health-check the Serve proxy (issue 44,
finding 3), and the cross-object check notices a policy that would drop either."""

from __future__ import annotations

import copy
from typing import Any

from gridready.serving import consistency
from gridready.stacks.serving import network
from tests.unit.serving import test_consistency
from tests.unit.serving.test_consistency import PROMETHEUS, _doc

rendered = test_consistency.rendered  # the same fixture: both tiers of a four-node inventory, rendered

MONITORING = ["monitoring"]


def _check(r: dict[str, Any], docs: list[dict[str, Any]] | None = None) -> list[str]:
    return consistency.check(docs or r["docs"], r["releases"], external_controllers=PROMETHEUS,
                             monitoring_namespaces=MONITORING)


def _peers_to(policy: dict[str, Any], port: int) -> list[dict[str, Any]]:
    return [peer for rule in policy["spec"]["ingress"] if any(p["port"] == port for p in rule.get("ports") or [])
            for peer in rule["from"]]


def _ns_peer(ns: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {network.NAMESPACE_LABEL: ns}}}


def test_the_rendered_policies_admit_prometheus_and_the_operator(rendered) -> None:
    vllm = _doc(rendered["docs"], "NetworkPolicy", "llama70b-ingress")
    assert _ns_peer("monitoring") in _peers_to(vllm, 8080)  # Ray's metrics export, the PodMonitor's port
    assert _ns_peer("kuberay-system") in _peers_to(vllm, 8000)  # the Serve proxy's health check
    assert _ns_peer("monitoring") not in _peers_to(vllm, 8000)  # the key-less Serve port stays closed to it
    trt = _doc(rendered["docs"], "NetworkPolicy", "llama70b-trt-ingress")
    assert any(_ns_peer("monitoring") in rule["from"] for rule in trt["spec"]["ingress"])
    assert _check(rendered) == []


def _without(docs: list[dict[str, Any]], peer: dict[str, Any]) -> list[dict[str, Any]]:
    docs = copy.deepcopy(docs)
    for d in docs:
        if d["kind"] == "NetworkPolicy":
            for rule in d["spec"]["ingress"]:
                rule["from"] = [p for p in rule["from"] if p != peer]
            d["spec"]["ingress"] = [r for r in d["spec"]["ingress"] if r["from"]]
    return docs


def test_a_policy_that_drops_the_scrapes_is_caught(rendered) -> None:
    errors = _check(rendered, _without(rendered["docs"], _ns_peer("monitoring")))
    assert any("RayService/llama70b" in e and "port metrics (8080)" in e and "scrapes are dropped" in e
               for e in errors), errors
    assert any("LeaderWorkerSet/llama70b-trt" in e and "scrapes are dropped" in e for e in errors), errors


def test_a_policy_that_drops_the_operators_health_check_is_caught(rendered) -> None:
    errors = _check(rendered, _without(rendered["docs"], _ns_peer("kuberay-system")))
    assert any("RayService/llama70b" in e and "Serve proxy (8000)" in e and "never gets Ready" in e
               for e in errors), errors
