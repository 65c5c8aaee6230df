"""The HCAs a tier's NCCL may use over a group of mixed NICs (InfiniBand, RoCE, management Ethernet): only the RDMA
classes, only those certification passed on each node, in the spec's order, and across nodes only those that
passed everywhere in the group. A node of another group never narrows the set."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from gridready.serving.topology import Certification, CertifiedNode, common_hcas, rdma_hcas
from gridready.spec.cluster import NodeGroup

MIXED = [("mlx5_0", "infiniband"), ("eth0", "ethernet"), ("mlx5_1", "roce"), ("mlx5_2", "infiniband")]


def plan(nics=MIXED, name: str = "gpu_nodes") -> SimpleNamespace:
    group = NodeGroup.model_validate({
        "name": name, "sku": "H200-SXM-141GB", "gpus_per_node": 8, "mgmt_interface": "bond0",
        "nics": [{"name": n, "kind": k, "rate_gbps": 400} for n, k in nics]})
    return SimpleNamespace(group=group)


def node(hcas, group: str = "gpu_nodes", name: str = "gpu01") -> CertifiedNode:
    return CertifiedNode(name=name, group=group, ip="10.0.0.1", hcas=None if hcas is None else tuple(hcas))


@pytest.mark.parametrize(("passed", "want"), [
    (None, ("mlx5_0", "mlx5_1", "mlx5_2")),                   # no HCA gate ran: every RDMA NIC of the spec
    (("mlx5_2", "mlx5_0", "eth0"), ("mlx5_0", "mlx5_2")),      # passed ones, in the spec's order; never Ethernet
    (("mlx5_1",), ("mlx5_1",)),                                # RoCE counts as RDMA
    ((), ()),
])
def test_rdma_hcas_over_mixed_nics(passed, want):
    assert rdma_hcas(plan(), node(passed)) == want


def test_a_group_without_rdma_nics_takes_what_certification_passed():
    eth_only = plan([("eth0", "ethernet")])
    assert rdma_hcas(eth_only, node(("mlx5_9",))) == ("mlx5_9",)
    assert rdma_hcas(eth_only, node(None)) == ()


def cert(*nodes: CertifiedNode) -> Certification:
    return Certification(source="ledger", finished_at=datetime(2026, 12, 1, tzinfo=UTC),
                         certified={n.name: n for n in nodes})


def test_common_hcas_passed_on_every_node_of_the_group_in_spec_order():
    c = cert(node(("mlx5_2", "mlx5_1", "mlx5_0")), node(("mlx5_0", "mlx5_2"), name="gpu02"),
             node(("mlx5_9",), group="other", name="cpu01"))  # another group's node does not narrow the set
    assert common_hcas(plan(), c) == ("mlx5_0", "mlx5_2")


def test_common_hcas_with_a_node_that_ran_no_hca_gate_and_none_certified():
    assert common_hcas(plan(), cert(node(None), node(("mlx5_1",), name="gpu02"))) == ("mlx5_1",)
    assert common_hcas(plan(), cert(node(("mlx5_1",), group="other"))) == ()


def test_common_hcas_without_rdma_nics_in_the_spec_are_sorted():
    eth_only = plan([("eth0", "ethernet")])
    c = cert(node(("mlx5_3", "mlx5_1", "mlx5_2")), node(("mlx5_2", "mlx5_3"), name="gpu02"))
    assert common_hcas(eth_only, c) == ("mlx5_2", "mlx5_3")
