"""The Kubernetes-side names of a spec at their edges: the release range (1.26 to 1.37), object names."""

from __future__ import annotations

import pytest

from gridready.spec import target_rules
from tests.unit.spec.test_rule_messages import spec

VERSION = ("serving.kubernetes.kubernetes_version", "must be a Kubernetes release from 1.26 to 1.37 (LeaderWorkerSet "
           "needs 1.26; manifests are validated with schemas up to 1.37)")
OBJECT = "must be a Kubernetes object name (a DNS-1123 subdomain)"


def k8s(**kw):
    return spec(serving__target="kubernetes", serving__kubeconfig="k.yml", serving__kubernetes=kw)


@pytest.mark.parametrize(("version", "found"), [
    ("1.25", [VERSION]), ("1.26", []), ("1.37", []), ("1.38", [VERSION]), ("1.032", []),
])
def test_release_range(version, found):
    assert list(target_rules.kubernetes(k8s(kubernetes_version=version))) == found


@pytest.mark.parametrize(("key", "value", "ok"), [
    ("hf_token_secret", "hf-token", True), ("hf_token_secret", "HF_token", False),
    ("storage_class", "fast.ssd", True), ("storage_class", "fast..ssd", False),
])
def test_object_names(key, value, ok):
    found = list(target_rules.kubernetes(k8s(**{key: value})))
    assert found == ([] if ok else [(f"serving.kubernetes.{key}", OBJECT)])


LABEL = ("serving.kubernetes.gpu_product_label", "must be a Kubernetes label value (at most 63 letters, digits, '-', "
         "'_' or '.', beginning and ending with a letter or digit)")
RESOURCE = ("serving.kubernetes.rdma_resource", "must be a Kubernetes resource name: an optional DNS subdomain prefix "
            "and '/', then at most 63 letters, digits, '-', '_' or '.' (rdma/ib)")


@pytest.mark.parametrize(("kw", "found"), [
    ({"gpu_product_label": "NVIDIA-H200"}, []),
    ({"gpu_product_label": "a" * 63}, []),
    ({"gpu_product_label": "a" * 64}, [LABEL]),
    ({"gpu_product_label": "NVIDIA H200"}, [LABEL]),
    ({"gpu_product_label": "-H200"}, [LABEL]),
    ({"rdma_resource": "rdma/ib"}, []),
    ({"rdma_resource": "ib"}, []),
    ({"rdma_resource": "nvidia.com/hostdev"}, []),
    ({"rdma_resource": "rdma/"}, [RESOURCE]),
    ({"rdma_resource": "Rdma_X/ib"}, [RESOURCE]),
    ({"rdma_resource": "rdma/i b"}, [RESOURCE]),
    ({"rdma_resource": None}, []),
])
def test_labels_and_resources(kw, found):
    assert list(target_rules.kubernetes(k8s(**kw))) == found


def test_node_group_names_are_labels_on_kubernetes_only():
    long_name = "g" * 64
    s = k8s()
    s.node_groups[0].name = long_name  # a valid Ansible group name, too long for a label value
    assert list(target_rules.kubernetes(s)) == [
        ("node_groups[0].name", "on Kubernetes the node group is the label gridready.io/node-group: at most 63 "
         "characters, beginning and ending with a letter or digit")]
    hosts = spec()
    hosts.node_groups[0].name = long_name
    assert list(target_rules.kubernetes(hosts)) == []
