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
