"""`serve --render` on a hosts inventory renders what the hosts run, with only this target's rules (issue 44,
finding 6): a node-local LoRA path is valid on hosts, and no Kubernetes manifest is written."""

from __future__ import annotations

import yaml

from gridready.artifacts import RunContext
from gridready.stages import serve
from tests.unit.serving.conftest import vllm_tier

LORA = [{"name": "sql", "path": "/srv/adapters/sql"}]


def test_render_on_hosts_writes_serve_yml_vars_and_applies_only_hosts_rules(make_inv, write_certify) -> None:
    inv = make_inv(1, [vllm_tier(lora_adapters=LORA)])
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261130T040000Z-rndr", root=root, render=True))
    assert result.exit_code == 0, result.messages
    out = root / "acme" / "20261130T040000Z-rndr" / "serve" / "render"
    assert not (out / "serving").exists() and not (out / "platform").exists()  # no Kubernetes manifests
    rendered = yaml.safe_load((out / "hosts" / "serve-vars.yml").read_text())
    (tier,) = rendered["gridready_serve"]["tiers"]
    assert tier["name"] == "llama70b" and "/srv/adapters/sql" in " ".join(map(str, tier["args"]))
    assert rendered["gridready_serve"]["hosts"]["gpu01"]["role"] == "head"
    assert result.data["render"]["target"] == "hosts"
