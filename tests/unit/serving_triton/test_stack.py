"""TritonTier under Pulumi mocks (through the serving program): Job, PVC, Deployment or LeaderWorkerSet, Service;
every manifest validates (kubernetes-validate strict + the vendored LWS CRD, made strict)."""

from __future__ import annotations

import copy
import json
import shlex

import pytest

from gridready import pulumi as gpulumi
from gridready.serving import manifests, mpi_ssh
from gridready.serving.triton.pbtxt import parse
from gridready.stacks.serving.triton import tier_config

from .conftest import plan

DIGEST = "sha256:" + "5e" * 32
NS = "gridready-serving"


def _render(*plans):
    cfg = {"customer": "acme", "namespace": NS,
           "triton_tiers": [tier_config(p, NS, gpu_product_label="NVIDIA-H200", rdma_resource="rdma/ib")
                            for p in plans]}
    return gpulumi.render("serving", cfg, "acme")


def _real(size, tp, pp, versions=None, **settings):
    return plan(size, tp, pp, versions={"image_digest": DIGEST, **(versions or {})}, **settings)


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
    jobs = sorted(n for k, n in kinds if k == "Job" and "-engine-" in n)
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
    assert pod["nodeSelector"] == {"gridready.io/certified": "true", "nvidia.com/gpu.product": "NVIDIA-H200"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    cm = _doc(rendered, "ConfigMap", "trt-8b-triton")
    for key, text in cm["data"].items():
        if key.endswith("config.pbtxt"):
            parse(text, key)  # what the pod mounts still parses
    assert "GRIDREADY_ENGINE built" in cm["data"]["build-engine.sh"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/engines"]["readOnly"] is True  # the server never writes the cache


def test_engine_job_uses_the_serving_image_and_writes_the_cache(rendered) -> None:
    job = next(d for d in rendered.manifests
               if d["kind"] == "Job" and d["metadata"]["name"].startswith("trt-8b-engine-"))
    dep = _doc(rendered, "Deployment", "trt-8b")
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert c["command"] == ["bash", "/gridready/build-engine.sh"]
    assert {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]}["/engines"] is False
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_multi_node_is_a_leaderworkerset_with_a_leader_service(rendered) -> None:
    lws = _doc(rendered, "LeaderWorkerSet", "trt-70b")
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    # LeaderReady would wait for a leader that is Ready only once mpirun reached the workers: a deadlock
    assert tmpl["size"] == 2 and lws["spec"]["startupPolicy"] == "LeaderCreated"
    leader = tmpl["leaderTemplate"]["spec"]["containers"][0]
    worker = tmpl["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert leader["resources"]["limits"]["rdma/ib"] == "1"
    assert worker["command"] == ["bash", "/gridready/worker.sh"]
    svc = _doc(rendered, "Service", "trt-70b")
    # the LWS controller labels the leader pod worker-index "0"; no pod carries `role: leader`
    assert svc["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "trt-70b",
                                       "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    assert {p["name"] for p in svc["spec"]["ports"]} == {"http", "grpc", "openai"}  # OpenAI frontend: no 8002
    cm = _doc(rendered, "ConfigMap", "trt-70b-triton")
    assert '--host "$GRIDREADY_MPI_HOSTS" -n 16' in cm["data"]["launch.sh"]


def test_engine_mode_workers_prepare_the_repository_their_ranks_load(rendered) -> None:
    cm = _doc(rendered, "ConfigMap", "trt-70b-eng-triton")
    worker = cm["data"]["worker.sh"]
    assert "cp -rL /models/repo.in /models/repo" in worker and "tritonserver" not in worker
    # sshd with the tier's host key and the leader's client key only; an image without sshd stops the pod, saying so
    assert worker.rstrip().endswith("exec " + shlex.join(mpi_ssh.sshd_command()))
    assert "-h /etc/gridready-mpi/ssh_host_ed25519_key" in worker and "PasswordAuthentication=no" in worker
    assert "[ -x /usr/sbin/sshd ] ||" in worker
    assert "--load-model=tensorrt_llm" in cm["data"]["launch.sh"]  # ranks > 0 load the repository above


def test_the_tier_env_reaches_every_pod_and_every_rank() -> None:
    env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    cfg = {"customer": "acme", "namespace": NS,
           "triton_tiers": [tier_config(_real("70b", 8, 2, mode="engine"), NS, env=env)]}
    r = gpulumi.render("serving", cfg, "acme")
    tmpl = _doc(r, "LeaderWorkerSet", "trt-70b")["spec"]["leaderWorkerTemplate"]
    for pod in ("leaderTemplate", "workerTemplate"):
        got = {e["name"]: e.get("value") for e in tmpl[pod]["spec"]["containers"][0]["env"]}
        assert {k: got.get(k) for k in env} == env, pod
    launch = _doc(r, "ConfigMap", "trt-70b-triton")["data"]["launch.sh"]
    assert "mpirun --allow-run-as-root -x NCCL_IB_HCA -x NCCL_SOCKET_IFNAME --host" in launch


def test_a_new_engine_key_is_a_new_job() -> None:
    a = tier_config(_real("8b", 1, 1, mode="engine"), NS)
    b = tier_config(_real("8b", 1, 1, mode="engine", versions={"tensorrt_llm": "1.2.2"}), NS)
    assert a["engine_key"] != b["engine_key"]


def test_multi_node_pods_share_the_tiers_ssh_keys_and_check_host_keys(rendered) -> None:
    """Issue 29, finding 3: mpirun had no key (the Secret was never made or named) and ssh ran with
    StrictHostKeyChecking=no; now the stack makes gridready-mpi-ssh from the vault's keys and every pod of the group
    mounts it, the leader's ssh pinning the workers' host key."""
    secret = _doc(rendered, "Secret", mpi_ssh.SECRET)
    assert set(secret["stringData"]) == {"id_ed25519", "id_ed25519.pub", "authorized_keys", "ssh_host_ed25519_key",
                                         "ssh_host_ed25519_key.pub", "known_hosts", "ssh_config"}
    assert all(v.startswith("<redacted") for v in secret["stringData"].values())  # no key material in a render
    lws = _doc(rendered, "LeaderWorkerSet", "trt-70b-eng")
    for template in (lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"],
                     lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]):
        pod = template["spec"]
        vol = next(v for v in pod["volumes"] if v["name"] == "mpi-ssh")
        assert vol["secret"] == {"secretName": mpi_ssh.SECRET, "defaultMode": 0o600}
        (container,) = pod["containers"]
        assert {"name": "mpi-ssh", "mountPath": mpi_ssh.MOUNT, "readOnly": True} in container["volumeMounts"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["OMPI_MCA_plm_rsh_args"] == "-F /etc/gridready-mpi/ssh_config"
    assert "StrictHostKeyChecking=no" not in json.dumps(rendered.manifests)


def test_the_leader_waits_for_every_workers_sshd(rendered) -> None:
    launch = _doc(rendered, "ConfigMap", "trt-70b-eng-triton")["data"]["launch.sh"]
    wait = launch.index('until (exec 3<>"/dev/tcp/$w/2222")')
    assert wait < launch.index("exec /opt/hpcx/ompi/bin/mpirun")  # by its absolute path across nodes (issue 44)
    assert "command -v ssh" in launch
