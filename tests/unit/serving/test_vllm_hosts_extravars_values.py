"""`gridready_serve` for playbooks/serve.yml on the committed acme-h200 inventory (four certified H200 nodes): every
host's Ray role, head address, env and open ports, and the vLLM tier's unit: command, timeouts and health URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready import inventory, ledger
from gridready.serving import topology, vllm
from tests.summaries import certification, certified_ledger
from tests.unit.serving.conftest import vllm_tier

REPO = Path(__file__).resolve().parents[3]
HOSTS = ["acme-gpu01", "acme-gpu02", "acme-gpu03", "acme-gpu04"]
HCAS = [f"mlx5_{i}" for i in range(8)]


def _env(ip: str) -> dict[str, str]:
    return {"VLLM_HOST_IP": ip, "RAY_USAGE_STATS_ENABLED": "0", "NCCL_SOCKET_IFNAME": "bond0",
            "GLOO_SOCKET_IFNAME": "bond0", "TP_SOCKET_IFNAME": "bond0", "NCCL_IB_HCA": "=" + ",".join(HCAS),
            "HF_HOME": "/var/lib/gridready/hf", "HF_HUB_OFFLINE": "1"}


@pytest.fixture
def extravars(tmp_path: Path):
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    root = tmp_path / "artifacts"
    certification(inv, HOSTS, root=root)
    cert = topology.read_certification(inv, ledger.read(root, inv.customer))
    return vllm.hosts_extravars(topology.plan_tiers(inv, cert), cert, inv.spec.serving)


def test_engine_health_settings_ride_along(extravars):
    assert {k: v for k, v in extravars.items() if k != "gridready_serve"} == {
        "gridready_engine_health_enabled": True, "gridready_engine_health_interval_s": 15,
        "gridready_engine_health_timeout_s": 10, "gridready_engine_health_failures": 3,
        "gridready_engine_health_startup_grace_s": 1800}


def test_cluster_wide_settings(extravars):
    serve = extravars["gridready_serve"]
    assert {k: v for k, v in serve.items() if k not in ("hosts", "tiers")} == {
        "ray_version": "2.60.0", "vllm_version": "0.33.0", "ray_port": 6379, "wait_timeout_s": 900,
        "ready_timeout_s": 600, "members": ["192.0.2.11", "192.0.2.12", "192.0.2.13"],  # gpu04 serves nothing
        "firewall_clients": [], "network_isolated": False}


def test_the_vllm_head_and_worker_join_one_ray_cluster(extravars):
    hosts = extravars["gridready_serve"]["hosts"]
    assert set(hosts) == {"acme-gpu01", "acme-gpu02", "acme-gpu03"}
    common = {"cluster": "llama70b-vllm-0", "tier": "llama70b-vllm", "engine": "vllm",
              "head_address": "192.0.2.11:6379", "num_gpus": 8, "hcas": HCAS}
    assert hosts["acme-gpu01"] == {**common, "role": "head", "node_ip": "192.0.2.11", "env": _env("192.0.2.11"),
                                   "api_ports": [8000]}
    assert hosts["acme-gpu02"] == {**common, "role": "worker", "node_ip": "192.0.2.12", "env": _env("192.0.2.12"),
                                   "api_ports": []}  # only the head listens for clients


def test_the_triton_node_heads_its_own_cluster_without_a_vllm_unit(extravars):
    serve = extravars["gridready_serve"]
    gpu03 = serve["hosts"]["acme-gpu03"]
    assert (gpu03["role"], gpu03["cluster"], gpu03["engine"], gpu03["head_address"]) == (
        "head", "llama70b-trtllm-0", "triton-trtllm", "192.0.2.13:6379")
    assert 8100 in gpu03["api_ports"]
    assert [t["name"] for t in serve["tiers"]] == ["llama70b-vllm"]


def test_the_vllm_unit(extravars):
    (tier,) = extravars["gridready_serve"]["tiers"]
    assert tier == {
        "name": "llama70b-vllm", "cluster": "llama70b-vllm-0", "head": "acme-gpu01", "ray_address": "192.0.2.11:6379",
        "port": 8000, "served_name": "llama-3.3-70b", "expected_gpus": 16, "expected_nodes": 2,
        "args": ["serve", "meta-llama/Llama-3.3-70B-Instruct", "--served-model-name", "llama-3.3-70b",
                 "--host", "0.0.0.0", "--port", "8000", "--distributed-executor-backend", "ray",
                 "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--max-model-len", "32768",
                 "--gpu-memory-utilization", "0.9", "--max-num-seqs", "256", "--enable-prefix-caching",
                 "--enable-chunked-prefill", "--dtype", "auto", "--kv-cache-dtype", "auto",
                 "--revision", "6f6073b423013f6a7d4d9f39144961bfbfbc386b"],
        "stop_timeout_s": 60 + vllm.STOP_MARGIN_S,
        "env": _env("192.0.2.11"),
        "health": {"unit": "vllm-llama70b-vllm", "url": "http://192.0.2.11:8000/health"}}


def test_optional_engine_arguments_reach_the_command_line(make_inv):
    tier = vllm_tier(tensor_parallel=8, pipeline_parallel=1, trust_remote_code=True, quantization="fp8",
                     max_num_batched_tokens=8192, enable_prefix_caching=False, extra_engine_args={"seed": 7},
                     lora_adapters=[{"name": "sql", "path": "/m/sql"}], max_loras=3, max_lora_rank=32)
    inv = make_inv(1, [tier])
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01"]))
    (plan,) = topology.plan_tiers(inv, cert)
    assert vllm.engine_kwargs(plan) == {
        "tensor_parallel_size": 8, "pipeline_parallel_size": 1, "max_model_len": 8192, "gpu_memory_utilization": 0.9,
        "max_num_seqs": 256, "enable_prefix_caching": False, "enable_chunked_prefill": True, "dtype": "auto",
        "kv_cache_dtype": "auto", "revision": "6f6073b423013f6a7d4d9f39144961bfbfbc386b",
        "max_num_batched_tokens": 8192, "quantization": "fp8", "enable_lora": True, "max_loras": 3,
        "max_lora_rank": 32, "trust_remote_code": True, "seed": 7}
    args = vllm.serve_args(plan)
    assert args[args.index("--distributed-executor-backend") + 1] == "mp"  # one node: no Ray executor
    assert "--no-enable-prefix-caching" in args and "--enable-prefix-caching" not in args
    assert args[args.index("--max-num-batched-tokens"):] == [
        "--max-num-batched-tokens", "8192", "--quantization", "fp8", "--enable-lora", "--max-loras", "3",
        "--max-lora-rank", "32", "--trust-remote-code", "--seed", "7", "--lora-modules", "sql=/m/sql"]


def test_every_replica_of_a_tier_without_a_vllm_unit_gets_its_hosts(make_inv):
    """A two-replica SGLang tier beside a vLLM one: both SGLang replicas head their own Ray cluster; only the vLLM
    tier has a unit."""
    sglang = vllm_tier(name="chat", engine="sglang", served_name="chat", tensor_parallel=8, replicas=2, port=8200)
    inv = make_inv(3, [sglang, vllm_tier(tensor_parallel=8)])
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03"]))
    serve = vllm.hosts_extravars(topology.plan_tiers(inv, cert), cert, inv.spec.serving)["gridready_serve"]
    roles = {h: (v["tier"], v["cluster"], v["role"]) for h, v in serve["hosts"].items()}
    assert sorted(roles.values()) == [("chat", "chat-0", "head"), ("chat", "chat-1", "head"),
                                      ("llama70b", "llama70b-0", "head")]
    assert [t["name"] for t in serve["tiers"]] == ["llama70b"]
