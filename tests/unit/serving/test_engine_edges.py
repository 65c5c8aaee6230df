"""The edges of the vLLM and SGLang builders that the wider tests pass through: a multi-node replica on nodes where
no HCA certified (NCCL must not try InfiniBand), Ray Serve's minimum replicas without an autoscaling minimum, a false
extra engine argument and the node-rank bound (issue #35's named mutants; benchmarks/named_mutants.py)."""

from __future__ import annotations

import dataclasses

import pytest

from gridready.serving import sglang, topology, vllm
from tests.summaries import HCAS, certified_ledger
from tests.unit.serving.conftest import vllm_tier

NO_HCA_ENV = {"NCCL_SOCKET_IFNAME": "bond0", "GLOO_SOCKET_IFNAME": "bond0", "NCCL_IB_DISABLE": "1",
              "HF_HOME": "/var/lib/gridready/hf", "HF_HUB_OFFLINE": "1"}


def _plan(make_inv, nodes: int, **tier):
    inv = make_inv(nodes, [vllm_tier(**{"pipeline_parallel": nodes, **tier})])  # a replica spans the nodes
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    (plan,) = topology.plan_tiers(inv, cert)
    return inv, cert, plan


def _ethernet_only(plan, node):
    """The same plan and node on a group whose spec lists no IB/RoCE NIC (and no HCA gate ran)."""
    return (dataclasses.replace(plan, group=plan.group.model_copy(update={"nics": []})),
            dataclasses.replace(node, hcas=None))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_multi_node_replica_without_rdma_disables_ib(make_inv, engine):
    inv, cert, plan = _plan(make_inv, 2, engine=engine)
    plan, node = _ethernet_only(plan, cert.certified["gpu02"])
    assert plan.nodes_per_replica == 2 and topology.rdma_hcas(plan, node) == ()
    env = (vllm if engine == "vllm" else sglang).node_env(plan, node, inv.spec.serving)
    if engine == "vllm":
        assert env == {**NO_HCA_ENV, "VLLM_HOST_IP": "10.77.0.12", "RAY_USAGE_STATS_ENABLED": "0",
                       "TP_SOCKET_IFNAME": "bond0"}
    else:
        assert env == NO_HCA_ENV


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_ib_stays_on_where_hcas_certified_and_a_single_node_needs_no_switch(make_inv, engine):
    mod = vllm if engine == "vllm" else sglang
    inv, cert, plan = _plan(make_inv, 2, engine=engine)
    env = mod.node_env(plan, cert.certified["gpu01"], inv.spec.serving)
    assert env["NCCL_IB_HCA"] == "=" + ",".join(HCAS) and "NCCL_IB_DISABLE" not in env
    inv, cert, plan = _plan(make_inv, 1, engine=engine)
    plan, node = _ethernet_only(plan, cert.certified["gpu01"])
    env = mod.node_env(plan, node, inv.spec.serving)
    assert "NCCL_IB_DISABLE" not in env and "NCCL_IB_HCA" not in env  # NVLink inside the node, no inter-node NCCL


def test_ray_serve_min_replicas_default_to_the_tiers_replicas(make_inv):
    _, _, plan = _plan(make_inv, 2, replicas=2, pipeline_parallel=1)
    assert plan.nodes_per_replica == 1 and plan.tier.autoscaling.min_replicas is None
    auto = vllm.llm_config(plan)["deployment_config"]["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"]) == (2, 2)
    _, _, plan = _plan(make_inv, 2, replicas=2, pipeline_parallel=1, autoscaling={"min_replicas": 1, "max_replicas": 3})
    auto = vllm.llm_config(plan)["deployment_config"]["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"]) == (1, 3)


def test_sglang_extra_arguments_false_is_absent_true_is_a_bare_flag(make_inv):
    extra = {"enable_torch_compile": False, "disable_cuda_graph": True, "cuda_graph_max_bs": 8}
    _, _, plan = _plan(make_inv, 1, engine="sglang", extra_engine_args=extra)
    _, _, bare = _plan(make_inv, 1, engine="sglang")
    args, base = sglang.launch_args(plan), sglang.launch_args(bare)
    assert args[:len(base)] == base  # the extra arguments come last (make_inv's YAML sorts their keys)
    assert args[len(base):] == ["--cuda-graph-max-bs", "8", "--disable-cuda-graph"]


@pytest.mark.parametrize("nodes", [2, 4])
def test_sglang_node_rank_is_bounded_by_the_replica(make_inv, nodes):
    _, _, plan = _plan(make_inv, nodes, engine="sglang")
    last = sglang.launch_args(plan, node_rank=nodes - 1, init_addr="10.77.0.11:50000")
    assert last[last.index("--node-rank") + 1] == str(nodes - 1)
    for rank in (nodes, -1):
        with pytest.raises(ValueError, match=rf"node_rank {rank} outside 0\.\.{nodes - 1}"):
            sglang.launch_args(plan, node_rank=rank, init_addr="10.77.0.11:50000")
