"""A node group that the node counts do not list has no nodes: placement and GPU demand read it as 0
(inventory.load lists every group; a caller that leaves one out gets the same lines as for an empty group)."""

from __future__ import annotations

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier


def test_placement_of_an_unlisted_group():
    s = spec(serving__tiers=[tier()])
    want = [("serving.tiers[0]", "needs 1 whole node(s) of gpu_nodes; 0 left of 0 after the tiers before it took 0 "
                                 "(tiers never share a node)")]
    assert list(rules.placement(s, {})) == want
    assert list(rules.placement(s, {"gpu_nodes": 0})) == want
    assert list(rules.placement(s, {"other": 3})) == want


def test_gpu_demand_on_an_unlisted_group():
    s = spec(serving__tiers=[tier("a1", port=8000), tier("b1", port=8001)])
    want = [("serving.tiers", "the tiers on gpu_nodes need 16 GPUs together, more than it has (0)")]
    assert [f for f in rules.cross_tier(s, {}) if f[0] == "serving.tiers"] == want
    assert [f for f in rules.cross_tier(s, {"gpu_nodes": 0}) if f[0] == "serving.tiers"] == want
