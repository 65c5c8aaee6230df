"""The Pulumi programs under mocks: RayService, Services, Helm releases, node marks; every manifest validates."""

from __future__ import annotations

import pulumi
import pytest
import yaml

from gridready import pulumi as gpulumi
from gridready.serving import manifests, topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier


@pytest.fixture
def k8s(make_inv):
    inv = make_inv(4, [vllm_tier(pipeline_parallel=3)], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu04"], ["gpu03"]))
    plans = topology.plan_tiers(inv, cert)
    configs = serve_config.stack_configs(inv, cert, plans)
    return {stack: gpulumi.render(stack, cfg, "acme") for stack, cfg in configs.items()}


def _one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, [d["metadata"].get("name") for d in docs if d["kind"] == kind]
    return found[0]


def test_platform_helm_releases(k8s):
    releases = {r["name"]: r for r in k8s["platform"].helm_releases}
    gpu = releases["gpu-operator"]
    assert gpu["chart"] == "gpu-operator" and gpu["namespace"] == "gpu-operator"
    assert gpu["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert gpu["values"]["driver"] == {"enabled": False}
    assert gpu["values"]["toolkit"] == {"enabled": False}
    kuberay = releases["kuberay-operator"]
    assert (kuberay["chart"], kuberay["version"], kuberay["namespace"]) == ("kuberay-operator", "1.7.0",
                                                                          "kuberay-system")
    # LeaderWorkerSet objects (multi-node Triton) need their controller: the platform installs it
    lws = releases["lws"]
    assert (lws["chart"], lws["version"], lws["namespace"]) == ("oci://registry.k8s.io/lws/charts/lws", "0.10.0",
                                                                "lws-system")


def test_platform_namespaces_and_node_marks(k8s):
    docs = k8s["platform"].manifests
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"} == {
        "gpu-operator", "kuberay-system", "lws-system", "gridready-serving"}
    nodes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Node"}
    assert set(nodes) == {"gpu01", "gpu02", "gpu03", "gpu04"}
    assert nodes["gpu01"]["metadata"]["labels"]["gridready.io/certified"] == "true"
    assert nodes["gpu01"]["spec"] == {"taints": []}  # under the mocks the live node has none
    assert nodes["gpu03"]["metadata"]["labels"]["gridready.io/certified"] == "false"
    assert nodes["gpu03"]["spec"]["taints"] == [
        {"key": "gridready.io/quarantined", "value": "true", "effect": "NoSchedule"}]
    assert ("pulumi:providers:kubernetes", "k8s") in k8s["platform"].resources  # explicit provider


def test_rayservice(k8s):
    rs = _one(k8s["serving"].manifests, "RayService", "llama70b")
    spec = rs["spec"]
    assert spec["upgradeStrategy"] == {"type": "None"}
    assert rs["metadata"]["annotations"]["ray.io/initializing-timeout"] == "40m"  # a 70B model (k8s_startup)
    head = spec["rayClusterConfig"]["headGroupSpec"]
    assert head["rayStartParams"]["num-gpus"] == "0"
    head_res = head["template"]["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in head_res["limits"]
    # no GPU: no selector onto the (tainted) certified GPU nodes; where only GPU nodes exist it tolerates their taint
    assert "nodeSelector" not in head["template"]["spec"]
    assert head["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (worker,) = spec["rayClusterConfig"]["workerGroupSpecs"]
    assert worker["replicas"] == worker["minReplicas"] == worker["maxReplicas"] == 3  # PP=3 on what is left
    pod = worker["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8 and c["resources"]["limits"]["rdma/ib"] == 1
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert pod["volumes"][0]["emptyDir"]["medium"] == "Memory"
    assert pod["enableServiceLinks"] is False
    assert pod["nodeSelector"]["gridready.io/certified"] == "true"
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "HF_TOKEN"}
    assert env["VLLM_HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["NCCL_IB_HCA"]["value"].startswith("=mlx5_0")
    app = yaml.safe_load(spec["serveConfigV2"])["applications"][0]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    llm = app["args"]["llm_configs"][0]
    assert llm["engine_kwargs"]["tensor_parallel_size"] == 8
    assert llm["engine_kwargs"]["pipeline_parallel_size"] == 3
    assert llm["accelerator_type"] == "H200"


def test_services_and_secret(k8s):
    docs = k8s["serving"].manifests
    svc = _one(docs, "Service", "llama70b-openai")
    assert not svc["metadata"]["name"].startswith("vllm")
    assert svc["spec"]["selector"] == {"gridready.io/tier": "llama70b", "ray.io/serve": "true"}
    assert svc["spec"]["ports"][0]["targetPort"] == 8000
    secret = _one(docs, "Secret", "hf-token")
    assert secret["stringData"]["HF_TOKEN"] == gpulumi.REDACTED  # never the real token in rendered YAML


def test_every_rendered_manifest_validates(k8s):
    docs = k8s["platform"].manifests + k8s["serving"].manifests
    # with the vLLM API key Secret, the tier's NetworkPolicy and the authenticating router (ConfigMap, Deployment,
    # Service, NetworkPolicy)
    assert len(docs) == 17
    assert manifests.validate(docs) == []


def test_numbers_come_back_as_ints(k8s):
    rs = _one(k8s["serving"].manifests, "RayService")
    assert isinstance(rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"], int)


@pulumi.runtime.test
def test_components_expose_outputs_under_plain_mocks():
    """The component classes themselves, the way pulumi's testing guide does it (outputs via apply)."""
    from gridready.stacks.serving.program import RayServiceTier, VllmRayService

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}, []

    pulumi.runtime.set_mocks(Mocks(), project="gridready-serving", stack="acme", preview=False)
    tier = RayServiceTier(name="t1", served_name="m", image="rayproject/ray-llm:2.60.0-py311-cu128",
                          ray_version="2.60.0", port=8000, accelerator_type="H200",
                          llm_config={"model_loading_config": {"model_id": "m"}}, worker_replicas=1,
                          gpus_per_node=8)
    comp = VllmRayService("t1", tier, "ns", "hf-token", "vllm-api-key")

    def check(args):
        endpoint, spec = args
        assert endpoint == "http://t1-openai.ns:8000"
        assert spec["rayClusterConfig"]["workerGroupSpecs"][0]["groupName"] == "gpu"

    return pulumi.Output.all(comp.endpoint, comp.ray_service.spec).apply(check)


def _serving(make_inv, tier):
    inv = make_inv(4, [tier], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03"]))
    plans = topology.plan_tiers(inv, cert)
    return gpulumi.render("serving", serve_config.stack_configs(inv, cert, plans)["serving"], "acme")


def test_a_single_node_tier_requests_no_rdma_device(make_inv):
    rs = _one(_serving(make_inv, vllm_tier(tensor_parallel=8, pipeline_parallel=1)).manifests, "RayService")
    (worker,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "rdma/ib" not in limits and limits["nvidia.com/gpu"] == 8
    env = {e["name"] for e in worker["template"]["spec"]["containers"][0]["env"]}
    assert "NCCL_IB_HCA" not in env


def test_lora_adapters_are_registered_with_ray_serve_llm(make_inv):
    adapters = [{"name": "support", "path": "s3://acme-adapters/llama/support"},
                {"name": "sql", "path": "s3://acme-adapters/llama/sql"}]
    rs = _one(_serving(make_inv, vllm_tier(lora_adapters=adapters, max_loras=2)).manifests, "RayService")
    llm = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_configs"][0]
    assert llm["engine_kwargs"]["enable_lora"] is True
    assert llm["lora_config"] == {"dynamic_lora_loading_path": "s3://acme-adapters/llama",
                                  "max_num_adapters_per_replica": 2}


def test_lora_adapters_ray_serve_cannot_find_are_refused(make_inv):
    from gridready.errors import InvalidInput

    adapters = [{"name": "support", "path": "/a/support-v2"}]
    with pytest.raises(InvalidInput, match=r"serving.tiers\[llama70b\].lora_adapters: .*support=/a/support-v2"):
        _serving(make_inv, vllm_tier(lora_adapters=adapters))


def test_the_kuberay_autoscaler_follows_the_serve_replica_bounds(make_inv):
    tier = vllm_tier(tensor_parallel=8, pipeline_parallel=1, autoscaling={"min_replicas": 1, "max_replicas": 3})
    rs = _one(_serving(make_inv, tier).manifests, "RayService")
    cluster = rs["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["idleTimeoutSeconds"] == 60
    (worker,) = cluster["workerGroupSpecs"]
    assert (worker["minReplicas"], worker["replicas"], worker["maxReplicas"]) == (1, 1, 3)
    llm = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_configs"][0]
    assert llm["deployment_config"]["autoscaling_config"]["min_replicas"] == 1


def test_gpu_pods_share_the_node_local_model_cache(make_inv):
    """Weights download once per node: every GPU pod mounts the node's cache as HF_HOME and reserves ephemeral
    storage for its writable layer, so a restarted pod does not download the weights again."""
    rs = _one(_serving(make_inv, vllm_tier()).manifests, "RayService")
    (worker,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    pod = worker["template"]["spec"]
    c = pod["containers"][0]
    assert {"name": "hf-cache", "hostPath": {"path": "/var/lib/gridready/hf", "type": "DirectoryOrCreate"}} in \
        pod["volumes"]
    assert {"name": "hf-cache", "mountPath": "/var/lib/gridready/hf"} in c["volumeMounts"]
    assert {"name": "HF_HOME", "value": "/var/lib/gridready/hf"} in c["env"]
    assert c["resources"]["requests"]["ephemeral-storage"] == "50Gi"
    assert "ephemeral-storage" not in c["resources"]["limits"]  # a limit would evict a pod compiling a large graph


def test_serve_restarts_hung_replicas_and_drains_before_the_pod_goes(make_inv):
    rs = _one(_serving(make_inv, vllm_tier(drain_timeout_s=120)).manifests, "RayService")
    (app,) = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"]
    deployment = app["args"]["llm_configs"][0]["deployment_config"]
    assert deployment["health_check_period_s"] == 10 and deployment["health_check_timeout_s"] == 30
    assert deployment["graceful_shutdown_timeout_s"] == 120
    (worker,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert worker["template"]["spec"]["terminationGracePeriodSeconds"] == 150  # the drain, then 30 s to exit
