"""TritonTier under Pulumi mocks (through the serving program): Job, PVC, Deployment or LeaderWorkerSet, Service;
every manifest validates (kubernetes-validate strict + the vendored LWS CRD, made strict)."""

from __future__ import annotations

import copy

import pytest

from gridready import pulumi as gpulumi
from gridready.serving import manifests
from gridready.serving.triton_pbtxt import parse
from stacks.serving.triton import tier_config

from .conftest import plan

DIGEST = "sha256:" + "5e" * 32
NS = "gridready-serving"


def _render(*plans):
    cfg = {"customer": "acme", "namespace": NS,
           "triton_tiers": [tier_config(p, NS, gpu_product_label="NVIDIA-H200", rdma_resource="rdma/ib")
                            for p in plans]}
    return gpulumi.render("serving", cfg, "acme")


def _real(size, tp, pp, versions=None, **settings):
    return plan(size, tp, pp, simulated=False, versions={"image_digest": DIGEST, **(versions or {})}, **settings)


def _kinds(r):
    return sorted((d["kind"], d["metadata"]["name"]) for d in r.manifests)


@pytest.fixture(scope="module")
def rendered():
    return _render(_real("8b", 1, 1, mode="engine"), _real("70b", 8, 2),
                   _real("70b", 8, 2, mode="engine", tier_over={"name": "trt-70b-eng"}))


def test_component_and_objects(rendered) -> None:
    assert ("gridready:serving:TritonTier", "trt-8b") in rendered.resources
    kinds = _kinds(rendered)
    assert ("Deployment", "trt-8b") in kinds and ("LeaderWorkerSet", "trt-70b") in kinds
    assert ("PersistentVolumeClaim", "trt-8b-engines") in kinds
    assert ("LeaderWorkerSet", "trt-70b-eng") in kinds
    jobs = sorted(n for k, n in kinds if k == "Job")
    assert [j.rsplit("-", 1)[0] for j in jobs] == ["trt-70b-eng-engine", "trt-8b-engine"]  # llmapi: no Job
    assert len(kinds) == len(set(kinds))  # no two objects of a kind share a name


def test_every_manifest_validates(rendered) -> None:
    assert manifests.validate(rendered.manifests, "1.32") == []


def test_a_broken_leaderworkerset_is_caught(rendered) -> None:
    lws = copy.deepcopy(next(d for d in rendered.manifests if d["kind"] == "LeaderWorkerSet"))
    del lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    lws["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    errors = manifests.validate([lws], "1.32")
    assert any("workerTemplate" in e for e in errors) and any("sizee" in e for e in errors)


def _doc(r, kind, name):
    return next(d for d in r.manifests if d["kind"] == kind and d["metadata"]["name"] == name)


def test_deployment_probes_gpus_and_repository(rendered) -> None:
    dep = _doc(rendered, "Deployment", "trt-8b")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == f"nvcr.io/nvidia/tritonserver@{DIGEST}"
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 1800  # long model load
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["enableServiceLinks"] is False
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    cm = _doc(rendered, "ConfigMap", "trt-8b-triton")
    for key, text in cm["data"].items():
        if key.endswith("config.pbtxt"):
            parse(text, key)  # what the pod mounts still parses
    assert "GRIDREADY_ENGINE built" in cm["data"]["build-engine.sh"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/engines"]["readOnly"] is True  # the server never writes the cache


def test_engine_job_uses_the_serving_image_and_writes_the_cache(rendered) -> None:
    job = next(d for d in rendered.manifests if d["kind"] == "Job" and d["metadata"]["name"].startswith("trt-8b"))
    dep = _doc(rendered, "Deployment", "trt-8b")
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert c["command"] == ["bash", "/gridready/build-engine.sh"]
    assert {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]}["/engines"] is False
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_multi_node_is_a_leaderworkerset_with_a_leader_service(rendered) -> None:
    lws = _doc(rendered, "LeaderWorkerSet", "trt-70b")
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 2 and lws["spec"]["startupPolicy"] == "LeaderReady"
    leader = tmpl["leaderTemplate"]["spec"]["containers"][0]
    worker = tmpl["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert leader["resources"]["limits"]["rdma/ib"] == "1"
    assert "sshd" in " ".join(worker["command"])
    svc = _doc(rendered, "Service", "trt-70b")
    assert svc["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "trt-70b", "role": "leader"}
    assert {p["name"] for p in svc["spec"]["ports"]} == {"http", "grpc", "metrics", "openai"}
    cm = _doc(rendered, "ConfigMap", "trt-70b-triton")
    assert '--host "$GRIDREADY_MPI_HOSTS" -n 16' in cm["data"]["launch.sh"]


def test_a_new_engine_key_is_a_new_job() -> None:
    a = tier_config(_real("8b", 1, 1, mode="engine"), NS)
    b = tier_config(_real("8b", 1, 1, mode="engine", versions={"tensorrt_llm": "1.2.2"}), NS)
    assert a["engine_key"] != b["engine_key"]
