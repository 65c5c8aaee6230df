"""Rule edges the mutation record left unkilled: '.' and '..' each refused as a NIC and an adapter name, and a
router key name given exactly twice."""

from __future__ import annotations

import pytest

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier


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
