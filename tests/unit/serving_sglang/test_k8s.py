"""An SGLang tier rendered through stacks/serving under Pulumi mocks: a Deployment for one node, a LeaderWorkerSet
for two (the env-driven rank and rendezvous of kubernetes-sigs/lws docs/examples/sglang/lws.yaml), a leader-only
Service; every manifest validates against the Kubernetes schemas and the LWS CRD."""

from __future__ import annotations

import pytest

from gridready import pulumi as gpulumi
from gridready.serving import manifests, topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier


def _render(make_inv, pp: int, replicas: int = 1):
    tier = vllm_tier(name="llama-sgl", engine="sglang", pipeline_parallel=pp, replicas=replicas, port=30000)
    inv = make_inv(4, [tier], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"]))
    configs = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))
    assert configs["serving"]["triton_tiers"] == []  # an sglang tier is not handed to the Triton component
    return gpulumi.render("serving", configs["serving"], "acme").manifests


def _kind(docs, kind):
    """The tier's objects of `kind` (the authenticating router, gridready-router, aside)."""
    return [d for d in docs if d["kind"] == kind and not d["metadata"]["name"].startswith("gridready-router")]


def _opt(args, flag):
    return args[args.index(flag) + 1]


def test_one_node_is_a_deployment(make_inv):
    docs = _render(make_inv, 1, replicas=2)
    assert manifests.validate(docs) == []
    (dep,) = _kind(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2 and not _kind(docs, "LeaderWorkerSet")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["command"][:3] == ["python3", "-m", "sglang.launch_server"]
    assert "--nnodes" not in c["command"] and _opt(c["command"], "--port") == "30000"
    assert c["image"] == "lmsysorg/sglang:v0.5.19-cu129"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8 and c["startupProbe"]["httpGet"]["path"] == "/health"
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}} in c["env"]


def test_two_nodes_are_a_leaderworkerset_with_env_driven_ranks(make_inv):
    docs = _render(make_inv, 2)
    assert manifests.validate(docs) == []
    (lws,) = _kind(docs, "LeaderWorkerSet")
    tpl = lws["spec"]["leaderWorkerTemplate"]
    assert tpl["size"] == 2 and tpl["restartPolicy"] == "RecreateGroupOnPodRestart"
    for role in ("leaderTemplate", "workerTemplate"):
        (c,) = tpl[role]["spec"]["containers"]
        cmd = c["command"]
        assert _opt(cmd, "--dist-init-addr") == "$(LWS_LEADER_ADDRESS):50000"
        assert _opt(cmd, "--node-rank") == "$(LWS_WORKER_INDEX)" and _opt(cmd, "--nnodes") == "2"
        assert (_opt(cmd, "--tp-size"), _opt(cmd, "--pp-size")) == ("8", "2")
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert not any(e["name"].startswith("RAY_") for e in c["env"])
    leader = tpl["leaderTemplate"]["spec"]["containers"][0]
    assert "readinessProbe" in leader and "readinessProbe" not in tpl["workerTemplate"]["spec"]["containers"][0]
    (svc,) = _kind(docs, "Service")
    assert svc["metadata"]["name"] == "llama-sgl-openai"
    assert svc["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "llama-sgl", "role": "leader"}


def test_lws_schema_catches_a_broken_set(make_inv):
    docs = _render(make_inv, 2)
    (lws,) = _kind(docs, "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    assert any("sizee" in e for e in manifests.validate(docs))


@pytest.mark.parametrize("pp", [1, 2])
def test_serve_render_writes_validated_manifests(make_inv, tmp_path, pp):
    tier = vllm_tier(name="llama-sgl", engine="sglang", pipeline_parallel=pp)
    inv = make_inv(4, [tier], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    out = serve_config.render_manifests(inv, cert, topology.plan_tiers(inv, cert), tmp_path / "k8s")
    assert out["files"] and out["validated_against"].startswith("kubernetes")


def test_sglang_pods_share_the_node_local_model_cache(make_inv):
    for doc in _render(make_inv, 2):
        if doc["kind"] != "LeaderWorkerSet":
            continue
        for template in (doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"],
                         doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]):
            pod = template["spec"]
            c = pod["containers"][0]
            assert {"name": "hf-cache", "hostPath": {"path": "/var/lib/gridready/hf", "type": "DirectoryOrCreate"}} \
                in pod["volumes"]
            assert {"name": "HF_HOME", "value": "/var/lib/gridready/hf"} in c["env"]
            assert c["resources"]["requests"]["ephemeral-storage"] == "50Gi"
        break
    else:
        raise AssertionError("no LeaderWorkerSet rendered")


@pytest.mark.parametrize("pp", [1, 2])
def test_the_leader_reads_the_api_key_from_a_mounted_config_secret(make_inv, pp):
    """SGLang serves /v1 to anyone without a key: the leader (rank 0, the one HTTP server) gets `--config` on a
    read-only Secret volume holding `api-key` (server_arguments.md: `--config`), never the key in argv or env."""
    docs = _render(make_inv, pp)
    assert manifests.validate(docs) == []
    (secret,) = [d for d in _kind(docs, "Secret") if d["metadata"]["name"] == "sglang-config"]
    assert set(secret["stringData"]) == {"config.yaml"}
    pods = ([d["spec"]["template"] for d in _kind(docs, "Deployment")] if pp == 1 else
            [d["spec"]["leaderWorkerTemplate"]["leaderTemplate"] for d in _kind(docs, "LeaderWorkerSet")])
    (pod,) = pods
    (c,) = pod["spec"]["containers"]
    assert _opt(c["command"], "--config") == "/etc/gridready/sglang/config.yaml"
    assert {"name": "sglang-config", "mountPath": "/etc/gridready/sglang", "readOnly": True} in c["volumeMounts"]
    assert {"name": "sglang-config", "secret": {"secretName": "sglang-config", "defaultMode": 0o400}} \
        in pod["spec"]["volumes"]
    assert "--api-key" not in c["command"] and not any("KEY" in e["name"] for e in c["env"])
    if pp == 2:
        (worker,) = [d["spec"]["leaderWorkerTemplate"]["workerTemplate"] for d in _kind(docs, "LeaderWorkerSet")]
        assert "--config" not in worker["spec"]["containers"][0]["command"]  # ranks >= 1 serve no HTTP


def test_the_config_file_is_yaml_with_the_key_quoted():
    import yaml

    from gridready.stacks.serving import sglang as stack

    key = 'ab"c\\d: #e' + "x" * 32
    assert yaml.safe_load(stack.config_yaml(key)) == {"api-key": key}
