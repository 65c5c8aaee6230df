"""The Kubernetes configs built for vLLM tiers: the exact RayService inputs (engine arguments, Ray Serve LLM config,
pod env, worker counts) for the committed acme-h200-k8s inventory, and the edges single-node tiers, autoscaling
bounds, LoRA storage and node marks take."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready import inventory, ledger
from gridready.errors import InvalidInput
from gridready.serving import topology, vllm
from tests.summaries import certification, certified_ledger
from tests.unit.serving.conftest import vllm_tier

REPO = Path(__file__).resolve().parents[3]
HOSTS = ["acme-gpu01", "acme-gpu02", "acme-gpu03", "acme-gpu04"]
HCAS = "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"


@pytest.fixture
def acme_k8s(tmp_path: Path):
    inv = inventory.load(REPO / "inventories" / "acme-h200-k8s")
    root = tmp_path / "artifacts"
    certification(inv, HOSTS, root=root)
    cert = topology.read_certification(inv, ledger.read(root, inv.customer))
    return inv, cert, topology.plan_tiers(inv, cert)


def _k8s(make_inv, nodes, tier, certified=None):
    inv = make_inv(nodes, [tier], target="kubernetes")
    hosts = certified or [f"gpu{i:02d}" for i in range(1, nodes + 1)]
    cert = topology.read_certification(inv, certified_ledger(inv, hosts))
    return inv, cert, topology.plan_tiers(inv, cert)


def test_the_example_vllm_tier_is_one_two_node_replica_of_tp8_pp2(acme_k8s):
    inv, cert, plans = acme_k8s
    cfg = vllm.serving_stack_config(inv.customer, inv.spec.serving, cert, plans)
    assert {k: v for k, v in cfg.items() if k not in ("vllm_tiers", "triton_tiers")} == {
        "customer": "acme-h200-k8s", "namespace": "gridready-serving", "hf_token_secret": "hf-token",
        "clients": ["192.0.2.0/24"], "client_namespaces": ["gateway-system"],
        "monitoring_namespaces": ["monitoring"]}
    (tier,) = cfg["vllm_tiers"]
    llm = tier.pop("llm_config")
    assert tier == {
        "name": "llama70b-vllm", "served_name": "llama-3.3-70b", "image": "rayproject/ray-llm:2.60.0-py311-cu128",
        "ray_version": "2.60.0", "port": 8000, "accelerator_type": "H200",
        "worker_replicas": 2, "worker_min_replicas": 2,  # PP=2: two 8-GPU worker pods per replica
        "gpus_per_node": 8, "rdma_resource": "rdma/ib",
        "env": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0",
                "RAY_USAGE_STATS_ENABLED": "0", "NCCL_IB_HCA": HCAS},
        "shm_size": "64Gi", "model_cache_path": "/var/lib/gridready/hf", "ephemeral_storage": "50Gi",
        "termination_grace_s": 60 + vllm.STOP_MARGIN_S,  # the drain, then the margin for Ray and vLLM to exit
        "worker_cpu": "32", "worker_memory": "512Gi", "upgrade_strategy": "None", "initializing_timeout": "40m",
        "gpu_product_label": "NVIDIA-H200"}
    assert llm == {
        "model_loading_config": {"model_id": "llama-3.3-70b", "model_source": "meta-llama/Llama-3.3-70B-Instruct"},
        "accelerator_type": "H200",
        "engine_kwargs": {
            "tensor_parallel_size": 8, "pipeline_parallel_size": 2, "max_model_len": 32768,
            "gpu_memory_utilization": 0.9, "max_num_seqs": 256, "enable_prefix_caching": True,
            "enable_chunked_prefill": True, "dtype": "auto", "kv_cache_dtype": "auto",
            "revision": "6f6073b423013f6a7d4d9f39144961bfbfbc386b",
            "enable_lora": True, "max_loras": 2, "max_lora_rank": 16},
        "placement_group_config": {"bundles": [{"GPU": 1}] * 16, "strategy": "PACK"},
        "deployment_config": {
            "autoscaling_config": {"min_replicas": 1, "max_replicas": 1, "target_ongoing_requests": 32},
            "max_ongoing_requests": 256, "health_check_period_s": 10, "health_check_timeout_s": 30,
            "graceful_shutdown_wait_loop_s": 2, "graceful_shutdown_timeout_s": 60},
        "lora_config": {"dynamic_lora_loading_path": "s3://acme-adapters/llama-3.3-70b",
                        "max_num_adapters_per_replica": 2}}


def test_the_example_triton_tier_is_passed_on_with_its_fabric(acme_k8s):
    inv, cert, plans = acme_k8s
    (tier,) = vllm.serving_stack_config(inv.customer, inv.spec.serving, cert, plans)["triton_tiers"]
    spec = tier.pop("tier")
    assert tier == {
        "name": "llama70b-trtllm", "tensor_parallel": 8, "pipeline_parallel": 2, "nodes_per_replica": 2,
        "gpus_per_node": 8, "accelerator_type": "H200",
        "env": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0",
                "RAY_USAGE_STATS_ENABLED": "0", "NCCL_IB_HCA": HCAS},
        "rdma_resource": "rdma/ib", "shm_size": "64Gi", "gpu_product_label": "NVIDIA-H200"}
    assert (spec["name"], spec["port"], spec["served_name"]) == ("llama70b-trtllm", 8100, "llama-3.3-70b-trt")
    assert spec["model"]["local_path"] is None  # JSON-ready: the plain model dump


def test_a_one_node_tier_needs_no_rdma_device_and_no_fabric_env(make_inv):
    inv, cert, plans = _k8s(make_inv, 2, vllm_tier(tensor_parallel=8, replicas=2))
    (tier,) = vllm.serving_stack_config("acme", inv.spec.serving, cert, plans)["vllm_tiers"]
    assert tier["rdma_resource"] is None
    assert tier["env"] == {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0",
                           "RAY_USAGE_STATS_ENABLED": "0"}
    assert (tier["worker_replicas"], tier["worker_min_replicas"]) == (2, 2)
    assert tier["llm_config"]["placement_group_config"]["bundles"] == [{"GPU": 1}] * 8
    assert "lora_config" not in tier["llm_config"]


@pytest.mark.parametrize(("auto", "bounds"), [
    ({}, (2, 2)),                                        # fixed at `replicas`
    ({"min_replicas": 1}, (1, 2)),
    ({"min_replicas": 1, "max_replicas": 4}, (1, 4)),
    ({"min_replicas": 3}, (3, 3)),                       # max never under min
])
def test_autoscaling_bounds_scale_the_worker_pods(make_inv, auto, bounds):
    inv, cert, plans = _k8s(make_inv, 4, vllm_tier(tensor_parallel=8, pipeline_parallel=2, replicas=2,
                                                   autoscaling=auto), certified=["gpu01", "gpu02", "gpu03", "gpu04"])
    (tier,) = vllm.serving_stack_config("acme", inv.spec.serving, cert, plans)["vllm_tiers"]
    scaling = tier["llm_config"]["deployment_config"]["autoscaling_config"]
    assert (scaling["min_replicas"], scaling["max_replicas"]) == bounds
    assert (tier["worker_min_replicas"], tier["worker_replicas"]) == (2 * bounds[0], 2 * bounds[1])


def test_multi_node_pods_without_an_rdma_resource_disable_ib(acme_k8s):
    inv, cert, plans = acme_k8s
    serving = inv.spec.serving.model_copy(update={
        "kubernetes": inv.spec.serving.kubernetes.model_copy(update={"rdma_resource": None})})
    env = vllm.pod_env(plans[0], cert, serving)
    assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env


def test_single_node_pods_never_name_hcas(make_inv):
    inv, cert, plans = _k8s(make_inv, 1, vllm_tier(tensor_parallel=8))
    env = vllm.pod_env(plans[0], cert, inv.spec.serving)
    assert "NCCL_IB_HCA" not in env and "NCCL_IB_DISABLE" not in env


@pytest.mark.parametrize(("adapters", "message"), [
    ([{"name": "sql", "path": "s3://b/one/sql"}, {"name": "chat", "path": "s3://b/two/chat"}],
     "every adapter's path must be <one directory>/<adapter name> (Ray Serve LLM dynamic_lora_loading_path); "
     "got sql=s3://b/one/sql, chat=s3://b/two/chat"),
    ([{"name": "sql", "path": "s3://b/one/sql-v2"}], "got sql=s3://b/one/sql-v2"),
    ([{"name": "sql", "path": "/srv/adapters/sql"}],
     "LoraConfig accepts a dynamic_lora_loading_path starting with s3:// or gs:// or abfss:// or azure:// only"),
])
def test_adapters_must_sit_side_by_side_in_object_storage(make_inv, adapters, message):
    _, _, plans = _k8s(make_inv, 1, vllm_tier(tensor_parallel=8, lora_adapters=adapters))
    with pytest.raises(InvalidInput) as err:
        vllm.lora_config(plans[0])
    assert str(err.value).startswith("serving.tiers[llama70b].lora_adapters: on Kubernetes ")
    assert message in str(err.value)


@pytest.mark.parametrize("path", ["s3://b/ad/", "gs://b/ad/", "abfss://c@a.dfs.core.windows.net/ad/", "azure://c/ad/"])
def test_adapters_in_each_supported_store_load_from_their_common_folder(make_inv, path):
    adapters = [{"name": "sql", "path": path + "sql/"}, {"name": "chat", "path": path + "chat"},
                {"name": "X", "path": path + "X"}, {"name": "chatX", "path": path + "chatX/"}]  # only "/" trimmed
    _, _, plans = _k8s(make_inv, 1, vllm_tier(tensor_parallel=8, lora_adapters=adapters, max_loras=3))
    assert vllm.lora_config(plans[0]) == {"dynamic_lora_loading_path": path.rstrip("/"),
                                          "max_num_adapters_per_replica": 3}


def test_platform_marks_every_gpu_node_by_its_kubernetes_name(acme_k8s):
    inv, cert, _ = acme_k8s
    cert.certified.pop("acme-gpu03")
    hosts = {"acme-gpu01": {"gridready_k8s_node_name": "node-a"}, "acme-gpu02": {"gridready_k8s_node_name": ""}}
    groups = {h: "gpu_nodes" for h in HOSTS}
    cfg = vllm.platform_stack_config(inv.customer, inv.spec.serving, cert, hosts, groups, drained={"acme-gpu04"})
    assert cfg == {
        "customer": "acme-h200-k8s", "gpu_operator_version": cfg["gpu_operator_version"],
        "kuberay_version": "1.7.0", "serving_namespace": "gridready-serving",
        "nodes": [
            {"name": "node-a", "certified": True, "node_group": "gpu_nodes", "drained": False},
            {"name": "acme-gpu02", "certified": True, "node_group": "gpu_nodes", "drained": False},
            {"name": "acme-gpu03", "certified": False, "node_group": "gpu_nodes", "drained": False},
            {"name": "acme-gpu04", "certified": True, "node_group": "gpu_nodes", "drained": True}]}
    assert cfg["gpu_operator_version"] == inv.spec.serving.kubernetes.gpu_operator_version
    assert vllm.platform_stack_config(inv.customer, inv.spec.serving, cert, {}, groups)["nodes"][3]["drained"] is False
