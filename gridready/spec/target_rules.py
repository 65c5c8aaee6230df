"""What the target would refuse later, refused at validate: Kubernetes names and label values the stacks make
from cluster.yml, the Kubernetes versions the pinned operators support, and LoRA adapter names an engine cannot
tell apart."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gridready.spec.cluster import ClusterSpec

# apimachinery validation (k8s.io/apimachinery/pkg/util/validation): a DNS-1123 label (namespaces, Service names),
# a DNS-1123 subdomain (most object names, Secrets, StorageClasses, Nodes), a label value
DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
DNS1123_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*",
                               re.ASCII)
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", re.ASCII)
# Kubernetes minor versions: LeaderWorkerSet needs 1.26 or newer (kubernetes-sigs/lws docs, "Installation"), the
# newest is the last one kubernetes-validate bundles schemas for (what serve --render validates manifests with)
K8S_MINOR_RANGE = (26, 37)


def kubernetes(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """(key, problem) for names and label values that the Kubernetes API server would refuse."""
    k8s = spec.serving.kubernetes
    found = re.fullmatch(r"1\.([0-9]{1,3})", k8s.kubernetes_version, re.ASCII)
    low, high = K8S_MINOR_RANGE
    if found is None or not low <= int(found.group(1)) <= high:
        yield ("serving.kubernetes.kubernetes_version",
               f"must be a Kubernetes release from 1.{low} to 1.{high} (LeaderWorkerSet needs 1.{low}; manifests are "
               f"validated with schemas up to 1.{high})")
    if not DNS1123_SUBDOMAIN.fullmatch(k8s.hf_token_secret):
        yield "serving.kubernetes.hf_token_secret", "must be a Kubernetes object name (a DNS-1123 subdomain)"
    if k8s.storage_class is not None and not DNS1123_SUBDOMAIN.fullmatch(k8s.storage_class):
        yield "serving.kubernetes.storage_class", "must be a Kubernetes object name (a DNS-1123 subdomain)"
    if k8s.gpu_product_label is not None and not LABEL_VALUE.fullmatch(k8s.gpu_product_label):
        yield ("serving.kubernetes.gpu_product_label", "must be a Kubernetes label value (at most 63 letters, "
               "digits, '-', '_' or '.', beginning and ending with a letter or digit)")
    if k8s.rdma_resource is not None and not _qualified_name(k8s.rdma_resource):
        yield ("serving.kubernetes.rdma_resource", "must be a Kubernetes resource name: an optional DNS subdomain "
               "prefix and '/', then at most 63 letters, digits, '-', '_' or '.' (rdma/ib)")
    if not DNS1123_LABEL.fullmatch(spec.serving.router.gateway):
        yield "serving.router.gateway", "must be a Kubernetes object name (a DNS-1123 label)"
    if spec.serving.target != "kubernetes":
        return
    for i, group in enumerate(spec.node_groups):
        if not LABEL_VALUE.fullmatch(group.name):
            yield (f"node_groups[{i}].name", "on Kubernetes the node group is the label gridready.io/node-group: "
                   "at most 63 characters, beginning and ending with a letter or digit")


def _qualified_name(value: str) -> bool:
    """apimachinery IsQualifiedName: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name a non-empty label
    value."""
    prefix, _, name = value.rpartition("/")
    if not name or not LABEL_VALUE.fullmatch(name):
        return False
    return not prefix or bool(DNS1123_SUBDOMAIN.fullmatch(prefix))


def node_name_problem(host: str) -> str | None:
    """What a Kubernetes API server would say of `host` as a Node name, or None."""
    if DNS1123_SUBDOMAIN.fullmatch(host):
        return None
    return "on Kubernetes a host is a Node name: a DNS-1123 subdomain (lower case letters, digits, '-' and '.')"


def lora(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Each adapter is a `model` clients ask for: two with one name, or one named like the tier's served model,
    and the engine serves one of them under the other's name."""
    for i, tier in enumerate(spec.serving.tiers):
        seen: set[str] = set()
        for j, adapter in enumerate(tier.lora_adapters):
            where = f"serving.tiers[{i}].lora_adapters[{j}].name"
            if adapter.name == tier.served_name:
                yield where, f"{adapter.name!r} is the tier's served_name; an adapter needs a name of its own"
            elif adapter.name in seen:
                yield where, f"duplicate adapter name {adapter.name!r}"
            seen.add(adapter.name)
