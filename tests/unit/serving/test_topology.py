"""TP/PP derivation from certified H200 nodes, fail-closed certification, quarantine and exit codes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gridready.errors import InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from tests.summaries import HCAS, certified_ledger
from tests.unit.serving.conftest import vllm_tier


def _cert(inv, *args, **kwargs):
    return topology.read_certification(inv, certified_ledger(inv, *args, **kwargs))


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_derive_puts_a_model_that_fits_one_node_on_one_node(make_inv, nodes):
    """Issue 49: derive once made PP the certified nodes (an 8B or 70B model on two hosts: TP 8 x PP 2, pipeline
    stages over the network). A model whose weights fit one node runs on one node, however many there are."""
    inv = make_inv(nodes, [vllm_tier()])
    (plan,) = topology.plan_tiers(inv, _cert(inv, inv.gpu_hosts()))
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.nodes_per_replica, plan.gpus) == (8, 1, 1, 8)
    assert plan.accelerator_type == "H200"
    (replica,) = plan.replicas
    assert replica.nodes == ("gpu01",)


@pytest.mark.parametrize(("hf_id", "quantization", "pp"), [
    ("acme/Big-671B-Base", None, 2),  # 1,250 GiB of bf16 weights: two H200 nodes
    ("acme/Big-671B-Base", "fp8", 1),  # one byte a parameter: one node
    ("mistralai/Mixtral-8x7B-v0.1", None, 1),  # an expert count is no size: one node
])
def test_derive_spans_nodes_only_for_weights_one_node_cannot_hold(make_inv, hf_id, quantization, pp):
    tier = vllm_tier(model={"hf_id": hf_id, "revision": "6f6073b423013f6a7d4d9f39144961bfbfbc386b"},
                     quantization=quantization)
    inv = make_inv(4, [tier])
    (plan,) = topology.plan_tiers(inv, _cert(inv, inv.gpu_hosts()))
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.nodes_per_replica) == (8, pp, pp)


def test_a_replica_spans_the_nodes_pipeline_parallel_names(make_inv):
    inv = make_inv(4)  # pipeline_parallel: 4
    hosts = inv.gpu_hosts()
    (plan,) = topology.plan_tiers(inv, _cert(inv, hosts))
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.world_size) == (8, 4, 32)
    (replica,) = plan.replicas
    assert replica.head == "gpu01"
    assert list(replica.workers) == hosts[1:]


def test_replicas_split_the_nodes_into_ray_clusters(make_inv):
    inv = make_inv(4, [vllm_tier(replicas=2, pipeline_parallel=2)])
    (plan,) = topology.plan_tiers(inv, _cert(inv, inv.gpu_hosts()))
    assert plan.pipeline_parallel == 2
    assert [r.nodes for r in plan.replicas] == [("gpu01", "gpu02"), ("gpu03", "gpu04")]
    assert [plan.cluster_name(r) for r in plan.replicas] == ["llama70b-0", "llama70b-1"]


def test_tp_above_gpus_per_node_is_exit_2_with_one_clear_line(make_inv):
    with pytest.raises(InvalidInput) as err:
        make_inv(2, [vllm_tier(tensor_parallel=16)])
    assert err.value.code == ExitCode.INVALID == 2
    assert "inventories/acme/cluster.yml: serving.tiers[0].tensor_parallel: must be <= gpus_per_node (8)" in (
        err.value.lines)


def test_a_tp_x_pp_that_cannot_fit_the_inventory_is_refused_when_it_loads(make_inv):
    """One resolver (gridready.spec.parallel): the static fit check runs at load, before any stage plans."""
    with pytest.raises(InvalidInput) as err:
        make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2, replicas=2)])
    assert err.value.lines == ["inventories/acme/cluster.yml: serving.tiers[0]: tensor_parallel x pipeline_parallel "
                               "= 8 x 2 needs 2 node(s) per replica x 2 replica(s); gpu_nodes has 2 node(s) of 8 GPUs"]


def test_pipeline_stages_may_share_a_node(make_inv):
    """TP 4 x PP 2 is one node of 8 GPUs: vLLM runs both pipeline stages there."""
    inv = make_inv(1, [vllm_tier(tensor_parallel=4, pipeline_parallel=2)])
    (plan,) = topology.plan_tiers(inv, _cert(inv, inv.gpu_hosts()))
    assert (plan.tensor_parallel, plan.pipeline_parallel, plan.nodes_per_replica, plan.gpus) == (4, 2, 1, 8)


def test_quarantined_node_is_refused_and_the_tier_placed_on_what_remains(make_inv):
    inv = make_inv(4, [vllm_tier(pipeline_parallel=3)])
    cert = _cert(inv, ["gpu01", "gpu02", "gpu04"], ["gpu03"])
    assert cert.quarantined == ["gpu03"]
    (plan,) = topology.plan_tiers(inv, cert)
    assert plan.nodes == ("gpu01", "gpu02", "gpu04")
    derived = make_inv(2, [vllm_tier()])
    (one,) = topology.plan_tiers(derived, _cert(derived, ["gpu02"], ["gpu01"]))
    assert one.nodes == ("gpu02",)


def test_too_few_certified_nodes_left_is_exit_5(make_inv):
    inv = make_inv(4, [vllm_tier(tensor_parallel=8, pipeline_parallel=4)])
    cert = _cert(inv, ["gpu01", "gpu02", "gpu04"], ["gpu03"])
    with pytest.raises(NotCertified) as err:
        topology.plan_tiers(inv, cert)
    assert err.value.code == ExitCode.NOT_CERTIFIED == 5
    assert "needs 4 certified node(s) of gpu_nodes, 3 left (quarantined: gpu03)" in str(err.value)


@pytest.mark.parametrize("case", ["none", "stale", "check-mode"])
def test_certification_fails_closed(make_inv, case):
    inv = make_inv(1)
    found = None if case == "none" else certified_ledger(inv, ["gpu01"], check=case == "check-mode")
    later = datetime.now(UTC) + timedelta(hours=30 if case == "stale" else 0)  # validity_hours is 24
    with pytest.raises(NotCertified):
        topology.read_certification(inv, found, now=later)


def test_a_node_absent_from_the_summary_is_not_certified(make_inv):
    inv = make_inv(2)
    cert = _cert(inv, ["gpu01"])
    assert list(cert.certified) == ["gpu01"]
    assert "gpu02" in cert.messages[0]


def test_only_hcas_that_passed_reach_nccl(make_inv):
    inv = make_inv(2)
    passed = [h for h in HCAS if h != "mlx5_3"]
    cert = _cert(inv, ["gpu01", "gpu02"], hcas={"gpu02": passed})
    (plan,) = topology.plan_tiers(inv, cert)
    assert topology.rdma_hcas(plan, cert.certified["gpu01"]) == tuple(HCAS)
    assert topology.rdma_hcas(plan, cert.certified["gpu02"]) == tuple(passed)
    assert topology.common_hcas(plan, cert) == tuple(passed)


def test_a_node_whose_hcas_all_failed_stays_out_of_multi_node_tiers(make_inv):
    inv = make_inv(3, [vllm_tier(pipeline_parallel=2)])
    cert = _cert(inv, ["gpu01", "gpu02", "gpu03"], hcas={"gpu02": []})
    (plan,) = topology.plan_tiers(inv, cert)
    assert plan.nodes == ("gpu01", "gpu03")
    assert any("no passing HCA" in m for m in cert.messages)
