"""With the router on, the tier ports behind it are open to the router only (issue #43, finding 6).

vLLM 0.33's API key guards the paths under /v1 only (AuthenticationMiddleware in
vllm/entrypoints/openai/server_utils.py skips every other path) while it also serves the SageMaker routes
(/invocations, /ping: vllm/entrypoints/sagemaker/api_router.py): whoever reaches a tier port generates without a
key. The firewall opened every tier port to all of serving.firewall_clients; now, with the router on, a routed tier's
port admits the router's address, the members and the controller, and the firewall clients get the router's port.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import yaml

from gridready import inventory
from gridready.artifacts import RunContext
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from tests.unit.serving.test_firewall_rules import ROLE, _render
from tests.unit.serving.test_serve_router import TIERS, with_router
from tests.unit.serving.test_serve_stage import _fake_playbook

CLIENTS = ["192.0.2.0/24"]


def _served(make_inv: Any, write_certify: Any, monkeypatch: Any, router: bool) -> dict[str, Any]:
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(4, TIERS)
    path = inv.path / "cluster.yml"
    doc = yaml.safe_load(path.read_text())
    doc["serving"]["firewall_clients"] = CLIENTS
    path.write_text(yaml.safe_dump(doc))
    inv = with_router(inv) if router else inventory.load(inv.path)
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261201T040000Z-expo", root=root))
    assert result.exit_code == 0, result.messages
    return captured["extravars"]


def test_with_the_router_a_tier_port_admits_the_router_alone(make_inv, write_certify, monkeypatch) -> None:
    extravars = _served(make_inv, write_certify, monkeypatch, router=True)
    serve_vars, routed = extravars["gridready_serve"], extravars["gridready_serve_router"]
    assert serve_vars["router_clients"] == [f"{routed['bind']}/32"]
    assert serve_vars["firewall_clients"] == CLIENTS  # still the clients of the router's port
    tier_heads = {t["head"]: t["port"] for t in serve_vars["tiers"]}
    assert len(tier_heads) == 2
    for head, port in tier_heads.items():
        host = serve_vars["hosts"][head]
        assert host["routed_ports"] == [port] and port not in host["api_ports"]
    assert serve_vars["hosts"][routed["host"]]["api_ports"] == [4000]  # the router's own port: the clients'


def test_without_the_router_the_tier_ports_stay_the_clients(make_inv, write_certify, monkeypatch) -> None:
    serve_vars = _served(make_inv, write_certify, monkeypatch, router=False)["gridready_serve"]
    assert "router_clients" not in serve_vars
    for t in serve_vars["tiers"]:
        host = serve_vars["hosts"][t["head"]]
        assert t["port"] in host["api_ports"] and not host.get("routed_ports")


def _admits(rules: list[str], source: str, port: int) -> bool:
    """A new TCP connection from `source` to `port` through the rendered chain (first verdict wins; policy
    accept), the sets read from the table."""
    sets: dict[str, list[str]] = {}
    name = None
    for line in rules:
        if m := re.fullmatch(r"set (\w+) \{", line):
            name = m[1]
        elif name and (m := re.fullmatch(r"elements = \{ (.*) \}", line)):
            sets[name] = [e.strip() for e in m[1].split(",")]
    addr = ipaddress.ip_address(source)
    chain = rules[rules.index("chain input {") + 1:]
    for rule in chain:
        m = re.fullmatch(r"(?:tcp dport \{ ([^}]*) \} ?)?(?:ip saddr @(\w+) ?)?(accept|drop)", rule)
        if not m:
            continue  # lo, established, udp
        ports, saddr, verdict = m.groups()
        if ports is not None and not any(_in_range(port, p.strip()) for p in ports.split(",")):
            continue
        if saddr is not None and not any(addr in ipaddress.ip_network(e, strict=False) for e in sets[saddr]):
            continue
        return verdict == "accept"
    return True


def _in_range(port: int, spec: str) -> bool:
    low, _, high = spec.partition("-")
    return int(low) <= port <= int(high or low)


def test_the_table_refuses_a_firewall_client_on_a_routed_port_and_admits_the_router() -> None:
    rules = _render(gridready_ray_node_api_ports=[4000], gridready_ray_node_routed_ports=[8000],
                    gridready_ray_node_router_clients=["10.0.0.5/32"],
                    gridready_ray_node_firewall_clients=CLIENTS)
    client, router, controller, member = "192.0.2.9", "10.0.0.5", "198.51.100.7", "10.0.0.2"
    assert not _admits(rules, client, 8000)  # /invocations would answer it without a key
    assert _admits(rules, client, 4000) and _admits(rules, client, 8080)  # the router and Ray's metrics
    assert _admits(rules, router, 8000) and _admits(rules, controller, 8000) and _admits(rules, member, 8000)
    assert not _admits(rules, "203.0.113.1", 4000)


def test_without_routed_ports_the_clients_reach_the_tier_port() -> None:
    rules = _render(gridready_ray_node_firewall_clients=CLIENTS)
    assert _admits(rules, "192.0.2.9", 8000) and not _admits(rules, "203.0.113.1", 8000)
    assert not any("@routers" in r for r in rules)


def test_every_firewall_of_serve_gets_the_routed_ports() -> None:
    """The Ray nodes', the SGLang nodes', the Triton nodes' and a router host's firewall plays all pass the
    split."""
    text = (ROLE.parents[1] / "playbooks" / "serve.yml").read_text()
    assert text.count("gridready_ray_node_routed_ports:") == 4
    assert text.count("gridready_ray_node_router_clients: \"{{ gridready_serve.router_clients | default([]) }}\"") == 4

