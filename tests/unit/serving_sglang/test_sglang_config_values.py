"""The exact SGLang launch every node and pod gets: the playbook's units of a two-node replica (rank, rendezvous,
env, version pin, health URL on rank 0 only), the stack config of an LWS group whose rank and leader come from
LWS' env, and the launcher's refusals."""

from __future__ import annotations

import pytest

from gridready.serving import sglang, topology, vllm
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

REV = "6f6073b423013f6a7d4d9f39144961bfbfbc386b"
HCA_ENV = "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"


def _args(rank: str, addr: str) -> list[str]:
    return ["--model-path", "meta-llama/Llama-3.3-70B-Instruct", "--served-model-name", "llama-3.3-70b",
            "--host", "0.0.0.0", "--port", "8000", "--tp-size", "8", "--pp-size", "2", "--context-length", "8192",
            "--mem-fraction-static", "0.9", "--max-running-requests", "256", "--dtype", "auto",
            "--kv-cache-dtype", "auto", "--schedule-policy", "fcfs", "--page-size", "1", "--enable-metrics",
            "--revision", REV, "--nnodes", "2", "--node-rank", rank, "--dist-init-addr", addr]


def _plans(make_inv, nodes: int, target: str = "hosts", **over):
    tier = vllm_tier(name="llama-sgl", engine="sglang", tensor_parallel=8, **over)
    inv = make_inv(nodes, [tier], target=target)
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    return inv, cert, topology.plan_tiers(inv, cert)


def test_two_node_units_on_hosts(make_inv):
    inv, cert, plans = _plans(make_inv, 2, pipeline_parallel=2)
    env = {"NCCL_SOCKET_IFNAME": "bond0", "GLOO_SOCKET_IFNAME": "bond0", "NCCL_IB_HCA": HCA_ENV,
           "HF_HOME": "/var/lib/gridready/hf", "HF_HUB_OFFLINE": "1"}
    common = {"name": "llama-sgl", "nnodes": 2, "head_ip": "10.77.0.11", "port": 8000, "dist_init_port": 50000,
              "served_name": "llama-3.3-70b", "stop_timeout_s": 60 + vllm.STOP_MARGIN_S, "env": env,
              "version": "0.5.19", "pip_spec": "sglang==0.5.19"}
    assert sglang.units(plans, cert, inv.spec.serving) == [
        {**common, "host": "gpu01", "node_rank": 0, "args": _args("0", "10.77.0.11:50000"),
         "health": {"unit": "sglang-llama-sgl", "url": "http://10.77.0.11:8000/health"}},
        {**common, "host": "gpu02", "node_rank": 1, "args": _args("1", "10.77.0.11:50000")}]


def test_units_skip_other_engines_and_one_node_units_have_no_rendezvous(make_inv):
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=1),
                       vllm_tier(name="llama-sgl", engine="sglang", tensor_parallel=8, port=8001)])
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    (unit,) = sglang.units(topology.plan_tiers(inv, cert), cert, inv.spec.serving)
    assert (unit["name"], unit["host"], unit["nnodes"], unit["node_rank"]) == ("llama-sgl", "gpu02", 1, 0)
    assert unit["health"] == {"unit": "sglang-llama-sgl", "url": "http://10.77.0.12:8001/health"}
    assert "--nnodes" not in unit["args"] and "NCCL_IB_DISABLE" not in unit["env"]


def test_the_spec_socket_interface_wins_over_the_groups(make_inv):
    inv, cert, (plan,) = _plans(make_inv, 1)
    serving = inv.spec.serving.model_copy(update={"socket_ifname": "ens1f0"})
    env = sglang.node_env(plan, cert.certified["gpu01"], serving)
    assert env == {"NCCL_SOCKET_IFNAME": "ens1f0", "GLOO_SOCKET_IFNAME": "ens1f0", "NCCL_IB_HCA": HCA_ENV,
                   "HF_HOME": "/var/lib/gridready/hf", "HF_HUB_OFFLINE": "1"}


def test_two_node_lws_group_on_kubernetes(make_inv):
    inv, cert, (plan,) = _plans(make_inv, 2, "kubernetes", pipeline_parallel=2)
    env = {**vllm.pod_env(plan, cert, inv.spec.serving), "RAY_ADDRESS": "x"}
    assert sglang.k8s_tier(plan, env, inv.spec.serving) == {
        "name": "llama-sgl", "served_name": "llama-3.3-70b", "image": "lmsysorg/sglang:v0.5.19-cu129", "port": 8000,
        "nodes": 2, "replicas": 1, "gpus_per_node": 8, "dist_init_port": 50000,
        "args": ["python3", "-m", "sglang.launch_server",
                 *_args("$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS):50000")],
        # no Ray in an SGLang pod: Ray's variables are dropped
        "env": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0",
                "NCCL_IB_HCA": HCA_ENV},
        "rdma_resource": "rdma/ib", "shm_size": "64Gi", "model_cache_path": "/var/lib/gridready/hf",
        "ephemeral_storage": "50Gi", "termination_grace_s": 60 + vllm.STOP_MARGIN_S, "cpu": "32",
        "memory": "512Gi", "gpu_product_label": None}


def test_one_pod_replicas_launch_without_lws_variables(make_inv):
    inv, cert, (plan,) = _plans(make_inv, 2, "kubernetes", replicas=2, sglang={"dist_init_port": 50100})
    cfg = sglang.k8s_tier(plan, vllm.pod_env(plan, cert, inv.spec.serving), inv.spec.serving)
    assert (cfg["nodes"], cfg["replicas"], cfg["dist_init_port"]) == (1, 2, 50100)
    assert cfg["args"][:3] == ["python3", "-m", "sglang.launch_server"]
    assert sglang.pod_args(plan) == cfg["args"][3:] == sglang.launch_args(plan)
    assert not any("LWS" in a for a in cfg["args"]) and "--nnodes" not in cfg["args"]


@pytest.mark.parametrize(("rank", "addr", "error"), [
    (2, "10.0.0.1:50000", "node_rank 2 outside 0..1"),
    (-1, "10.0.0.1:50000", "node_rank -1 outside 0..1"),
    (1, None, "a multi-node replica needs --dist-init-addr (rank 0's host:port)"),
    (0, "", "a multi-node replica needs --dist-init-addr (rank 0's host:port)"),
])
def test_launch_refuses_ranks_and_rendezvous_it_cannot_honour(make_inv, rank, addr, error):
    _, _, (plan,) = _plans(make_inv, 2, pipeline_parallel=2)
    with pytest.raises(ValueError) as err:
        sglang.launch_args(plan, rank, addr)
    assert str(err.value) == error


def test_one_node_rank_zero_needs_no_rendezvous_and_rank_one_does_not_exist(make_inv):
    _, _, (plan,) = _plans(make_inv, 1)
    assert "--dist-init-addr" not in sglang.launch_args(plan, 0)
    with pytest.raises(ValueError, match=r"^node_rank 1 outside 0..0$"):
        sglang.launch_args(plan, 1, "10.0.0.1:50000")


def test_tail_flags(make_inv):
    _, _, (plan,) = _plans(make_inv, 1, trust_remote_code=True, sglang={"chunked_prefill_size": 2048},
                           max_num_batched_tokens=4096, quantization="fp8",
                           extra_engine_args={"cuda_graph_max_bs": 64, "disable_cuda_graph": False,
                                              "enable_torch_compile": True},  # a false switch is left out
                           lora_adapters=[{"name": "sql", "path": "/m/sql"}, {"name": "chat", "path": "/m/chat"}],
                           max_loras=3, max_lora_rank=32)
    args = sglang.launch_args(plan, host="10.0.0.5")
    assert args[args.index("--host") + 1] == "10.0.0.5"
    assert args[args.index("--revision"):] == [
        "--revision", REV, "--quantization", "fp8", "--chunked-prefill-size", "2048",  # SGLang's own size first
        "--enable-lora", "--max-loras-per-batch", "3", "--max-lora-rank", "32", "--lora-paths", "sql=/m/sql",
        "chat=/m/chat", "--trust-remote-code", "--cuda-graph-max-bs", "64", "--enable-torch-compile"]
