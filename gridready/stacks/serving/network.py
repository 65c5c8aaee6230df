"""Ingress NetworkPolicy of one serving tier: its own pods reach each other on every port (Ray GCS, object
manager, workers, NCCL bootstrap, mpirun's sshd); the allowed clients reach only the tier's serving ports; the
KubeRay operator reaches a RayService head's dashboard and dashboard agent; nothing else gets in.

Kubernetes semantics relied on (NetworkPolicy v1 API reference,
https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/): a pod selected by a
policy with policyType Ingress accepts only what some selecting policy's rule admits, the rules of all policies
add up, and traffic from the pod's own node (the kubelet's probes) is always allowed. Namespaces are matched by
the label `kubernetes.io/metadata.name`, which the API server sets on every namespace (Kubernetes "Well-Known
Labels, Annotations and Taints"). The KubeRay operator asks the head for the Serve applications' status over
HTTP (kuberay PR #1282 shows a RayService that never becomes ready when ingress to its head is blocked).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

NAMESPACE_LABEL = "kubernetes.io/metadata.name"
# the Ray head's dashboard (Serve REST API, job submission) and the dashboard agent: Ray "Configuring Ray", ports
RAY_OPERATOR_PORTS = (8265, 52365)
# the head's Serve proxy, whose /-/healthz the KubeRay operator asks before it labels the head ray.io/serve=true
# (KubeRay v1.7.0 rayservice_controller: the head's proxy health check; a RayService whose head is not labelled
# has no Serve endpoint and never gets Ready)
RAY_SERVE_PROXY_PORT = 8000


def _ports(ports: Iterable[int | str]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def ingress_rules(tier_labels: Mapping[str, str], client_ports: Iterable[int | str], clients: Iterable[str],
                  client_namespaces: Iterable[str], operator_namespace: str | None = None,
                  front_labels: Mapping[str, str] | None = None, front_ports: Iterable[int | str] = (),
                  monitoring_namespaces: Iterable[str] = (), metrics_ports: Iterable[int | str] = ()
                  ) -> list[dict[str, Any]]:
    """The ingress rules of a tier (pure: tests read them without Pulumi). `front_labels`: the pods of the
    authenticating router, the only peers admitted to `front_ports` (the clients get `client_ports` only).
    `monitoring_namespaces`: Prometheus' namespaces, admitted to `metrics_ports` (what the tier's PodMonitor or
    ServiceMonitor scrapes). With `operator_namespace` (a RayService), the operator reaches the dashboard ports
    and the Serve proxy's health check."""
    rules: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": dict(tier_labels)}}]}]
    front_ports = list(front_ports)
    if front_labels and front_ports:
        rules.append({"from": [{"podSelector": {"matchLabels": dict(front_labels)}}], "ports": _ports(front_ports)})
    peers = [{"ipBlock": {"cidr": c}} for c in clients]
    peers += [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: ns}}} for ns in client_namespaces]
    client_ports = list(client_ports)
    if peers and client_ports:
        rules.append({"from": peers, "ports": _ports(client_ports)})
    scrapers = [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: ns}}} for ns in monitoring_namespaces]
    metrics_ports = list(metrics_ports)
    if scrapers and metrics_ports:
        rules.append({"from": scrapers, "ports": _ports(metrics_ports)})
    if operator_namespace:
        rules.append({"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: operator_namespace}}}],
                      "ports": _ports((*RAY_OPERATOR_PORTS, RAY_SERVE_PROXY_PORT))})
    return rules


def tier_policy(name: str, namespace: str, tier_labels: Mapping[str, str], rules: list[dict[str, Any]],
                parent: pulumi.Resource) -> k8s.networking.v1.NetworkPolicy:
    return k8s.networking.v1.NetworkPolicy(
        f"{name}-ingress",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{name}-ingress", namespace=namespace, labels=dict(tier_labels)),
        spec={"podSelector": {"matchLabels": dict(tier_labels)}, "policyTypes": ["Ingress"], "ingress": rules},
        opts=pulumi.ResourceOptions(parent=parent),
    )
