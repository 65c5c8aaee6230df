"""Rule edges the mutation record left unkilled: '.' and '..' each refused as a NIC and an adapter name, a router
key name given exactly twice, every bad firewall client named, an embedding model file that leaves its folder."""

from __future__ import annotations

import pytest

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier
from tests.unit.spec.test_rule_messages_tiers import EMBED


@pytest.mark.parametrize(("over", "found"), [
    ({"node_groups__0__nics__2__name": "."}, [("node_groups[0].nics[2].name", "must not be '.' or '..'")]),
    ({"serving__tiers": [tier(lora_adapters=[{"name": "..", "path": "/l/a"}])]},
     [("serving.tiers[0].lora_adapters[0].name", "must not be '.' or '..'")]),
])
def test_dot_names_both_ways(over, found):
    """'.' and '..' each refused for NICs and adapters (the other of the pair is tested in test_rule_messages)."""
    assert list(rules.ranges(spec(**over))) == found


def test_a_router_key_name_given_twice_is_a_duplicate():
    keys = [{"name": "team-a", "vault_var": "vault_router_a"}, {"name": "team-a", "vault_var": "vault_router_b"}]
    found = list(rules.router(spec(serving__tiers=[tier(port=8000)], serving__router={"enabled": True, "keys": keys})))
    assert found == [("serving.router.keys", "duplicate key name 'team-a'")]


def test_every_bad_firewall_client_is_named():
    s = spec(serving__firewall_clients=["10.0.0.1/24", "192.0.2.0/24", "10.1.0.0/8"])
    assert [k for k, _ in rules.firewall(s)] == ["serving.firewall_clients[0]", "serving.firewall_clients[2]"]


def test_an_embedding_model_file_that_leaves_its_folder_is_refused():
    embed = {**EMBED, "embedding": {**EMBED["embedding"], "model_file": "onnx/../../model.onnx"}}
    found = [f for f in rules.field_patterns(spec(serving__tiers=[tier(), embed])) if "embedding" in f[0]]
    assert found == [("serving.tiers[1].embedding.model_file", "must not contain a '.' or '..' path component")]
