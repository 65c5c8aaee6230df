"""Names clients ask for and the Gateway's name: each LoRA adapter a name of its own (not the tier's served_name, not
another adapter's), named at its own key; and the Gateway's DNS-1123 label rule, which holds for a spec changed
after validation (the model's own pattern refuses a bad name at load)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gridready.spec import target_rules
from tests.unit.spec.test_rule_messages import spec, tier


def adapters(*names: str) -> list[dict[str, str]]:
    return [{"name": n, "path": f"/adapters/{n}"} for n in names]


def test_each_adapter_needs_a_name_of_its_own():
    s = spec(serving__tiers=[tier("llama", port=8000, lora_adapters=adapters("sql", "chat", "sql", "llama", "sql")),
                             tier("other", port=8001, lora_adapters=adapters("sql", "other"))])
    assert list(target_rules.lora(s)) == [
        ("serving.tiers[0].lora_adapters[2].name", "duplicate adapter name 'sql'"),
        ("serving.tiers[0].lora_adapters[3].name", "'llama' is the tier's served_name; an adapter needs a name of its "
                                                   "own"),
        ("serving.tiers[0].lora_adapters[4].name", "duplicate adapter name 'sql'"),
        ("serving.tiers[1].lora_adapters[1].name", "'other' is the tier's served_name; an adapter needs a name of its "
                                                   "own"),
    ]


def test_adapter_names_are_per_tier():
    s = spec(serving__tiers=[tier("llama", port=8000, lora_adapters=adapters("sql")),
                             tier("other", port=8001, lora_adapters=adapters("sql", "chat"))])
    assert list(target_rules.lora(s)) == []


@pytest.mark.parametrize(("gateway", "ok"), [
    ("inference-gateway", True), ("g" * 63, True), ("g" * 64, False), ("Gateway", False), ("-gw", False),
    ("gw.example", False),
])
def test_the_gateway_is_a_dns_label(gateway, ok):
    s = spec()
    s.serving.router.gateway = gateway
    found = list(target_rules.kubernetes(s))
    assert found == ([] if ok else [("serving.router.gateway", "must be a Kubernetes object name (a DNS-1123 label)")])
    if not ok:
        with pytest.raises(ValidationError):
            spec(serving__router={"gateway": gateway})
