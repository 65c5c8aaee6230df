"""A node group that the node counts do not list has no nodes: placement and GPU demand read it as 0
(inventory.load lists every group; a caller that leaves one out gets the same lines as for an empty group). A tier
naming a group the spec lacks is skipped, and the tiers after it are still judged."""

from __future__ import annotations

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier
from tests.unit.spec.test_rule_messages_tiers import EMBED, triton


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


# A tier naming a group the spec lacks is inventory.load's own line ("no node group named ..."); the rules skip that
# tier and go on judging the tiers after it.
def test_rules_go_on_after_a_tier_whose_group_is_missing():
    ghost = tier("ghost", port=8100, node_group="nope")
    s = spec(serving__tiers=[ghost, tier("llama", port=8000, replicas=3)])
    assert list(rules.placement(s, {"gpu_nodes": 2})) == [
        ("serving.tiers[1]", "needs 3 whole node(s) of gpu_nodes; 2 left of 2 after the tiers before it took 0 "
                             "(tiers never share a node)")]
    assert [f for f in rules.cross_tier(s, {"gpu_nodes": 2}) if f[0] == "serving.tiers"] == []
    embed = {**EMBED, "embedding": {**EMBED["embedding"], "instance_groups": [{"gpus": [9]}]}}
    assert list(rules.hardware(spec(serving__tiers=[ghost, embed]))) == [
        ("serving.tiers[1].embedding.instance_groups[0].gpus", "GPU index 9 is beyond the 8 GPUs of gpu_nodes (0-7)")]
    wide = {**triton(), "pipeline_parallel": 2}
    assert [k for k, _ in rules.triton_nodes(spec(serving__tiers=[ghost, wide]))] == [
        "serving.tiers[1]"]
