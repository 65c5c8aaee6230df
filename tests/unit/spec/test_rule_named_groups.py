"""The tier rules when tiers name their node group: a tier with `node_group:` set is checked against that group
(GPU indices, GPU demand, placement, Triton spans) exactly as one that leaves it to the first group, and with two
groups each tier counts against its own. A rule that looked the named group up wrongly would skip the tier."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import BASE, spec, tier
from tests.unit.spec.test_rule_messages_tiers import EMBED, triton

NVL = {"name": "nvl_nodes", "sku": "H100-NVL-94GB", "gpus_per_node": 2, "mgmt_interface": "eth0", "nics": []}
NVL4 = {**NVL, "name": "nvl4_nodes", "gpus_per_node": 4}


def named(group: str = "gpu_nodes", name: str = "llama", **over: Any) -> dict[str, Any]:
    return tier(name, node_group=group, **over)


def two_groups(tiers: list[dict[str, Any]], second: dict[str, Any] = NVL, **over: Any):
    return spec(node_groups=copy.deepcopy([BASE["node_groups"][0], second]), serving__tiers=tiers, **over)


# --- one group, named ------------------------------------------------------------------------------------------
def test_embedding_gpu_indices_checked_on_the_named_group():
    embed = {**EMBED, "node_group": "gpu_nodes",
             "embedding": {**EMBED["embedding"], "instance_groups": [{"gpus": [8]}]}}
    assert list(rules.hardware(spec(serving__tiers=[named(), embed]))) == [
        ("serving.tiers[1].embedding.instance_groups[0].gpus", "GPU index 8 is beyond the 8 GPUs of gpu_nodes (0-7)")]


@pytest.mark.parametrize(("nodes", "found"), [
    (3, []),
    (2, [("serving.tiers", "the tiers on gpu_nodes need 24 GPUs together, more than it has (16)")]),
])
def test_gpu_demand_of_tiers_that_name_their_group(nodes, found):
    s = spec(serving__tiers=[named(), named(name="bb", port=8001, pipeline_parallel=2)])
    assert list(rules.cross_tier(s, {"gpu_nodes": nodes})) == found


def test_gpu_demand_mixes_named_and_unnamed_tiers_of_the_first_group():
    s = spec(serving__tiers=[tier(), named(name="bb", port=8001, pipeline_parallel=2)])
    assert list(rules.cross_tier(s, {"gpu_nodes": 2})) == [
        ("serving.tiers", "the tiers on gpu_nodes need 24 GPUs together, more than it has (16)")]


@pytest.mark.parametrize(("nodes", "found"), [
    (3, []),
    (2, [("serving.tiers[1]", "needs 2 whole node(s) of gpu_nodes; 1 left of 2 after the tiers before it took 1 "
          "(tiers never share a node)")]),
])
def test_placement_of_tiers_that_name_their_group(nodes, found):
    s = spec(serving__tiers=[named(), named(name="bb", port=8001, replicas=2)])
    assert list(rules.placement(s, {"gpu_nodes": nodes})) == found


def test_a_named_triton_tier_across_nodes_on_hosts_is_refused():
    s = spec(serving__tiers=[{**triton(), "node_group": "gpu_nodes", "pipeline_parallel": 2}])
    found = list(rules.triton_nodes(s))
    assert [k for k, _ in found] == ["serving.tiers[0]"]
    assert "across 2 nodes runs only on target kubernetes" in found[0][1]


# --- two groups: each tier on its own group ----------------------------------------------------------------------
def test_nvls_names_every_group_without_nvswitch():
    s = two_groups([tier()], second=NVL, node_groups__0__gpus_per_node=4, certification__nccl={"algo": "nvls"},
                   certification__fabric={"algo": "nvls"})
    assert list(rules.hardware(s)) == [
        ("certification.nccl.algo", "nvls needs NVSwitch, which gpu_nodes, nvl_nodes lacks (NVLink SHARP runs on "
         "the switches); use ring or tree"),
        ("certification.fabric.algo", "nvls needs NVSwitch, which gpu_nodes, nvl_nodes lacks; use ring or tree")]


def test_embedding_gpu_indices_per_group():
    """Index 2 is on the 8-GPU group but beyond the 2-GPU one: each tier against its own group."""
    ok = {**EMBED, "node_group": "gpu_nodes", "embedding": {**EMBED["embedding"], "instance_groups": [{"gpus": [2]}]}}
    bad = {**ok, "name": "embed2", "served_name": "e2", "port": 9001, "node_group": "nvl_nodes"}
    assert list(rules.hardware(two_groups([tier(), ok, bad]))) == [
        ("serving.tiers[2].embedding.instance_groups[0].gpus", "GPU index 2 is beyond the 2 GPUs of nvl_nodes (0-1)")]


def test_gpu_demand_per_group():
    """Two tiers on nvl_nodes (2 GPUs a node) need 4 GPUs; one node has 2. The 8-GPU group is not asked."""
    tiers = [tier(), named("nvl_nodes", "aa", port=8001, tensor_parallel=2),
             named("nvl_nodes", "bb", port=8002, tensor_parallel=2)]
    assert list(rules.cross_tier(two_groups(tiers), {"gpu_nodes": 1, "nvl_nodes": 1})) == [
        ("serving.tiers", "the tiers on nvl_nodes need 4 GPUs together, more than it has (2)")]
    assert list(rules.cross_tier(two_groups(tiers), {"gpu_nodes": 1, "nvl_nodes": 2})) == []


def test_placement_per_group():
    tiers = [tier(), named("nvl_nodes", "aa", port=8001, tensor_parallel=2, replicas=2)]
    assert list(rules.placement(two_groups(tiers), {"gpu_nodes": 5, "nvl_nodes": 2})) == []
    assert list(rules.placement(two_groups(tiers), {"gpu_nodes": 5, "nvl_nodes": 1})) == [
        ("serving.tiers[1]", "needs 2 whole node(s) of nvl_nodes; 1 left of 1 after the tiers before it took 0 "
         "(tiers never share a node)")]


def test_placement_reports_every_tier_that_cannot_be_placed():
    tiers = [tier(), named("nvl_nodes", "aa", port=8001, tensor_parallel=2), tier("cc", port=8002)]
    assert [k for k, _ in rules.placement(two_groups(tiers), {"gpu_nodes": 1, "nvl_nodes": 0})] == [
        "serving.tiers[1]", "serving.tiers[2]"]


def test_triton_span_is_read_on_each_tiers_own_group_and_after_other_tiers():
    """A Triton tier of TP 2 x PP 2 spans one 8-GPU node but two 2-GPU nodes; a vLLM tier before it changes nothing;
    one that names no group is checked on the first group."""
    trt = {**triton(port=8100), "tensor_parallel": 2, "pipeline_parallel": 2}
    on_nvl = two_groups([tier(), {**trt, "node_group": "nvl_nodes"}])
    assert [k for k, _ in rules.triton_nodes(on_nvl)] == ["serving.tiers[1]"]
    on_first = two_groups([tier(), {**trt, "node_group": "gpu_nodes"}])
    assert list(rules.triton_nodes(on_first)) == []
    unnamed = spec(serving__tiers=[tier(), {**trt, "tensor_parallel": 8}])
    assert [k for k, _ in rules.triton_nodes(unnamed)] == ["serving.tiers[1]"]


def test_triton_span_messages_on_hosts_and_on_kubernetes():
    one_node = {**triton("small", port=8100), "tensor_parallel": 8}
    spans = {**triton("big", port=8200), "tensor_parallel": 8, "pipeline_parallel": 2}
    hosts = spec(serving__tiers=[one_node, spans])
    assert list(rules.triton_nodes(hosts)) == [(
        "serving.tiers[1]", "a Triton TRT-LLM replica across 2 nodes runs only on target kubernetes (a "
        "LeaderWorkerSet): on hosts the role serves one node per replica; lower tensor_parallel x pipeline_parallel "
        "to one node's GPUs")]
    k8s = spec(serving__tiers=[one_node, spans], serving__target="kubernetes", serving__kubeconfig="k.yml")
    assert list(rules.triton_nodes(k8s)) == [(
        "serving.tiers[1]", "a Triton TRT-LLM replica across 2 nodes needs serving.kubernetes.triton_mpi_image: mpirun "
        "starts the workers' ranks over ssh and the stock tritonserver image has no sshd (build one with "
        "docs/kubernetes.md's recipe)")]
