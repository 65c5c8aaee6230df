"""serve on Kubernetes ends only when every tier's controller reports it ready (issue 44, finding 1): the status
as KubeRay, LWS and apps/v1 publish it, the wait through a fake API on loopback, exit 3 naming the tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridready import vault
from gridready.artifacts import RunContext
from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.serving import k8s_status
from gridready.serving.k8s_status import Watch
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import k8s_wait as serve_k8s_wait
from tests.unit.serving import fake_k8s_api
from tests.unit.serving.fake_k8s_api import condition, rayservice

RS_PATH = "/apis/ray.io/v1/namespaces/gridready-serving/rayservices/llama70b"
ROUTER = {"/apis/apps/v1/namespaces/gridready-serving/deployments/gridready-router": {
    "metadata": {"name": "gridready-router", "generation": 1}, "spec": {"replicas": 1},
    "status": {"observedGeneration": 1, "replicas": 1, "availableReplicas": 1, "updatedReplicas": 1}}}


def test_rayservice_ready_only_on_the_ready_condition():
    assert k8s_status.rayservice(rayservice("t", "True", "NonZeroServeEndpoints")).ready
    coming = k8s_status.rayservice(rayservice("t", "False", "Initializing"))
    assert not coming.ready and not coming.failed and "Initializing" in coming.detail
    gone = k8s_status.rayservice(rayservice("t", "False", "InitializingTimeout", "timed out after 30m"))
    assert gone.failed and "InitializingTimeout" in gone.detail and "30m" in gone.detail
    # an application that failed to deploy is named in the detail
    obj = rayservice("t", "False", "ZeroServeEndpoints")
    obj["status"]["activeServiceStatus"] = {"applicationStatuses": {"t": {"status": "DEPLOY_FAILED",
                                                                          "message": "CUDA out of memory"}}}
    assert "DEPLOY_FAILED: CUDA out of memory" in k8s_status.rayservice(obj).detail
    # the deprecated serviceStatus counts only where no condition exists (an older operator)
    assert k8s_status.rayservice({"status": {"serviceStatus": "Running"}}).ready
    assert not k8s_status.rayservice({"status": {}}).ready
    assert not k8s_status.state("RayService", None).ready


def test_leaderworkerset_and_deployment_readiness():
    lws = {"spec": {"replicas": 2}, "status": {"readyReplicas": 1, "conditions": [
        condition("Available", "True", "AllGroupsReady")]}}
    assert not k8s_status.leaderworkerset(lws).ready
    lws["status"]["readyReplicas"] = 2
    assert k8s_status.leaderworkerset(lws).ready
    lws["status"]["conditions"] = [condition("Available", "False", "GroupsNotReady")]
    assert not k8s_status.leaderworkerset(lws).ready
    dep = {"metadata": {"generation": 3}, "spec": {"replicas": 2},
           "status": {"observedGeneration": 3, "availableReplicas": 2, "updatedReplicas": 2}}
    assert k8s_status.deployment(dep).ready
    dep["status"]["observedGeneration"] = 2  # the controller has not seen the latest spec yet
    assert not k8s_status.deployment(dep).ready
    dep["status"] = {"observedGeneration": 3, "availableReplicas": 0, "conditions": [
        condition("Progressing", "False", "ProgressDeadlineExceeded", "ReplicaSet has timed out progressing")]}
    assert k8s_status.deployment(dep).failed


def test_watches_take_each_workloads_own_budget():
    docs = [
        {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {
            "name": "a", "namespace": "ns", "labels": {"gridready.io/tier": "a"},
            "annotations": {"ray.io/initializing-timeout": "45m"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "b", "namespace": "ns", "labels": {"gridready.io/tier": "b"},
            "annotations": {"pulumi.com/timeoutSeconds": "2100"}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "labels": {"gridready.io/tier": "a"}}},
    ]
    found = k8s_status.watches(docs, 600)
    assert [(w.tier, w.kind, w.timeout_s) for w in found] == [
        ("a", "RayService", 45 * 60 + k8s_status.RAYSERVICE_MARGIN_S), ("b", "Deployment", 2100)]


def test_a_tier_that_never_gets_ready_fails_after_its_budget():
    now = [0.0]
    watch = Watch("llama70b", "ray.io/v1", "RayService", "ns", "llama70b", 100)
    with pytest.raises(StageFailed) as err:
        serve_k8s_wait.wait_ready(lambda w: rayservice("llama70b", "False", "Initializing"), [watch],
                                  poll_s=30, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert err.value.code == ExitCode.STAGE_FAILED
    assert "tier llama70b" in str(err.value) and "not ready after 100 s" in str(err.value)
    assert "Ready=False (Initializing)" in str(err.value)


def _kubernetes_serve(make_inv, write_certify, monkeypatch, objects: dict[str, Any]) -> Any:
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", lambda *a, **k: {})
    # the wait alone; the checks through the router after it: test_k8s_serves.py
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(1, target="kubernetes")
    vault.write(inv.customer, inv.path, {vault.HF_TOKEN_VAR: "hf_fromthevault"})
    root = write_certify(inv, ["gpu01"])
    with fake_k8s_api.serve(objects) as url:
        (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig(url))
        return serve.run(inv, RunContext(customer="acme", run_id="20261130T040000Z-bbbb", root=root))


def test_a_never_ready_rayservice_makes_serve_exit_3_naming_the_tier(make_inv, write_certify, monkeypatch):
    result = _kubernetes_serve(make_inv, write_certify, monkeypatch, {RS_PATH: rayservice(
        "llama70b", "False", "InitializingTimeout", "RayService failed to initialize within 30m"), **ROUTER})
    assert result.exit_code == ExitCode.STAGE_FAILED, result.messages
    text = "\n".join(result.messages)
    assert "tier llama70b" in text and "InitializingTimeout" in text and "failed to initialize" in text


def test_serve_returns_once_the_rayservice_reports_ready(make_inv, write_certify, monkeypatch):
    result = _kubernetes_serve(make_inv, write_certify, monkeypatch,
                               {RS_PATH: rayservice("llama70b", "True", "NonZeroServeEndpoints"), **ROUTER})
    assert result.exit_code == 0, result.messages
    assert any("RayService gridready-serving/llama70b" in k for k in result.data["ready"])


def test_a_kubeconfig_with_a_credential_plugin_is_refused_naming_the_key(tmp_path: Path):
    text = fake_k8s_api.kubeconfig("https://10.0.0.1:6443").replace(
        '"token": "fake-token"', '"exec": {"command": "aws"}')
    with pytest.raises(Exception) as err:
        serve_k8s_wait.ApiReader(text, "cluster.yml: serving.kubeconfig")
    assert getattr(err.value, "code", None) == ExitCode.INVALID
    assert "serving.kubeconfig" in str(err.value) and "exec" in str(err.value)


def test_a_kubeconfig_the_reader_cannot_use_stops_serve_before_pulumi_up(make_inv, write_certify, monkeypatch):
    ups: list[str] = []
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", lambda stack, *a, **k: ups.append(stack) or {})
    inv = make_inv(1, target="kubernetes")
    (inv.path / "kubeconfig.yml").write_text("apiVersion: v1\nkind: Config\n")  # no current-context
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261130T040000Z-bbbb", root=root))
    assert result.exit_code == ExitCode.INVALID and ups == []
    assert "serving.kubeconfig: current-context is not set" in result.messages[-1]
