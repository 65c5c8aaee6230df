"""The Ray nftables table (roles/gridready_ray_node/templates/gridready-ray.nft.j2) rendered as the role renders it.

Members reach each other on every port (NCCL/Gloo bootstrap, TCPStore and vLLM's internal sockets are ephemeral);
from anywhere else Ray's ports, its worker range and the ephemeral range are closed, the API only to clients.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_ray_node"


def _render(**host: Any) -> list[str]:
    """The table as the role's template task renders it: Ansible's own templating over the role's defaults and
    vars/main.yml (the internal __ variables included), the values playbooks/serve.yml sets per host, and what the
    role's own tasks read on the host (the ssh client address, the slurped ip_local_port_range)."""
    variables: dict[str, Any] = {}
    for part in ("defaults", "vars"):
        for key, value in yaml.safe_load((ROLE / part / "main.yml").read_text()).items():
            variables[key] = trust_as_template(value) if isinstance(value, str) else value
    variables.update({
        "ansible_managed": "managed", "inventory_hostname": "gpu01",
        # facts gathered under become: sudo's env_reset left no SSH_CLIENT (sudoers(5)); the role reads the connection
        # as the login user (tasks/firewall.yml)
        "ansible_facts": {"env": {"SUDO_USER": "gridready"}},
        "__gridready_ray_node_ssh_connection": {"rc": 0, "stdout": "198.51.100.7 51234 10.0.0.1 22"},
        "__gridready_ray_node_port_range": {"content": base64.b64encode(b"32768\t60999\n").decode()},
        "gridready_ray_node_role": "head",
        "gridready_ray_node_firewall_members": ["10.0.0.1", "10.0.0.2"],
        "gridready_ray_node_firewall_clients": ["192.0.2.0/24"],
        "gridready_ray_node_api_ports": [8000],
        **host,
    })
    templar = Templar(loader=DataLoader(), variables=variables)
    text = templar.template(trust_as_template((ROLE / "templates" / "gridready-ray.nft.j2").read_text()))
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_members_reach_every_port_before_any_drop() -> None:
    rules = _render()
    assert "elements = { 10.0.0.1, 10.0.0.2 }" in rules
    chain = rules[rules.index("chain input {") + 1:]
    first_drop = next(i for i, r in enumerate(chain) if r.endswith("drop"))
    assert "ip saddr @members accept" in chain[:first_drop]  # no port list: all traffic between members
    assert "ct state established,related accept" in chain[:first_drop]


def test_ephemeral_and_ray_ports_are_closed_to_everyone_else() -> None:
    """A head: every port of defaults/main.yml (node manager 6380 ... dashboard agent 52365, GCS 6379, dashboard
    8265, client server 10001), the worker range and the host's ephemeral range."""
    rules = _render()
    assert ("tcp dport { 6380, 6381, 6382, 6383, 52365, 6379, 8265, 10001, 11000-11999, 32768-60999 } drop"
            in rules)
    assert "udp dport { 32768-60999 } drop" in rules
    api = [r for r in rules if r.startswith("tcp dport { 8000, 8080 }")]  # the API and Ray's metrics export
    assert api == ["tcp dport { 8000, 8080 } ip saddr @clients accept", "tcp dport { 8000, 8080 } drop"]


def test_a_worker_closes_its_own_ports_only_and_the_controller_is_a_client() -> None:
    rules = _render(gridready_ray_node_role="worker", gridready_ray_node_api_ports=[],
                    __gridready_ray_node_port_range={"content": base64.b64encode(b"20000\t40000\n").decode()})
    assert "tcp dport { 6380, 6381, 6382, 6383, 52365, 11000-11999, 20000-40000 } drop" in rules
    assert "udp dport { 20000-40000 } drop" in rules
    assert "elements = { 192.0.2.0/24, 198.51.100.7 }" in rules  # the clients and the ssh controller
    assert "tcp dport { 8080 } ip saddr @clients accept" in rules


def test_without_clients_or_controller_the_api_is_closed() -> None:
    rules = _render(gridready_ray_node_firewall_clients=[],
                    __gridready_ray_node_ssh_connection={"rc": 1, "stdout": ""})  # connection: local
    assert "set clients {" not in rules and "tcp dport { 8000, 8080 } drop" in rules
    assert not any("@clients" in r for r in rules)


def test_the_controller_address_is_read_as_the_login_user() -> None:
    """Under become the gathered env has no SSH_CLIENT (sudo's env_reset), so the address comes from a task that
    runs without become; with the old fact-based address the controller was shut out of the API ports. Become is
    turned off by its connection variable: an inventory's ansible_become overrides a task's `become: false` keyword
    (tests/sandbox/test_firewall_controller.py shows it on hosts reached with become)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "firewall.yml").read_text())
    read = [t for t in tasks if t.get("register") == "__gridready_ray_node_ssh_connection"]
    assert len(read) == 1 and read[0]["vars"] == {"ansible_become": False} and "become" not in read[0]
    assert read[0]["ansible.builtin.command"]["argv"] == ["/usr/bin/printenv", "SSH_CONNECTION"]
    assert read[0]["check_mode"] is False
    rules = _render(ansible_facts={"env": {}})  # nothing of the connection in the facts
    assert "elements = { 192.0.2.0/24, 198.51.100.7 }" in rules


def test_the_role_reads_the_ephemeral_range_of_the_host() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "firewall.yml").read_text())
    slurp = [t for t in tasks if "ansible.builtin.slurp" in t]
    assert slurp and slurp[0]["ansible.builtin.slurp"]["src"] == "/proc/sys/net/ipv4/ip_local_port_range"
    ufw = next(t for t in tasks if t["name"] == "Allow all traffic from the members in ufw")
    assert ufw["ansible.builtin.command"]["argv"][:3] == ["/usr/sbin/ufw", "allow", "from"]
    assert "port" not in ufw["ansible.builtin.command"]["argv"]


def test_no_working_firewall_fails_the_host_unless_isolated() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "firewall.yml").read_text())
    fail = next(t for t in tasks if "ansible.builtin.fail" in t)
    assert fail["when"] == ["__gridready_ray_node_fw_tool == 'none'",
                            "not (gridready_ray_node_network_isolated | bool)"]


def test_engine_internal_ports_are_closed_to_everyone_but_the_members() -> None:
    rules = _render(gridready_ray_node_role="worker", gridready_ray_node_internal_ports=[5757])
    assert "tcp dport { 6380, 6381, 6382, 6383, 52365, 5757, 11000-11999, 32768-60999 } drop" in rules


def test_sglang_nodes_get_the_tier_firewall_before_their_engine() -> None:
    """SGLang runs without Ray but binds the same kinds of ports: its play applies the Ray tiers' firewall, with
    the replica's --dist-init-addr port kept inside the members and the API port (rank 0) for clients only."""
    plays = yaml.safe_load((ROLE.parents[1] / "playbooks" / "serve.yml").read_text())
    play = next(p for p in plays if p.get("hosts") == "gridready_serve_sglang")
    (task,) = [t for t in play["pre_tasks"] if "ansible.builtin.include_role" in t]
    assert task["ansible.builtin.include_role"] == {"name": "gridready_ray_node", "tasks_from": "firewall.yml"}
    v = task["vars"]
    assert v["gridready_ray_node_role"] == "worker"  # no Ray head ports to open
    assert "gridready_serve.members" in v["gridready_ray_node_firewall_members"]
    assert "api_ports" in v["gridready_ray_node_api_ports"]
    assert "dist_init_port" in v["gridready_ray_node_internal_ports"]
    assert "network_isolated" in v["gridready_ray_node_network_isolated"]
