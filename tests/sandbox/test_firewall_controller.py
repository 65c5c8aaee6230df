"""The controller reaches a tier's API port through the serving firewall on hosts reached as a customer reaches
theirs (issue #43, finding 1).

The sandbox's inventories log in as `gridready` with `become: true` (inventories/_sample's keys), and sudo keeps
Debian's defaults: env_reset drops SSH_CLIENT and SSH_CONNECTION (sudoers(5)), so facts gathered under become
carry no controller address. One Debian 12 and one Debian 13 host run the serving firewall's tasks as the serve
playbook does, with no client address of their own: the controller (its ssh source address, the bridge address
10.77.0.1) must be in the table's client set, and a request from this machine to the API port must be answered.
A Ray port stays closed to it (members only).
"""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from sandbox import paths
from tests.sandbox.waiting import wait

pytestmark = pytest.mark.sandbox
API, RAY = 8000, 6380  # a tier port; a Ray port (gridready_ray_node_node_manager_port: members only)
PLAYBOOK = f"""\
- name: The serving firewall, as serve runs it
  hosts: all
  gather_facts: true
  tasks:
    - name: The configuration folder the role's main tasks make first
      ansible.builtin.file: {{path: /etc/gridready, state: directory, owner: root, group: root, mode: "0755"}}
    - name: The Ray node's firewall
      ansible.builtin.include_role:
        name: gridready_ray_node
        tasks_from: firewall.yml
      vars:
        gridready_ray_node_role: worker
        gridready_ray_node_firewall: auto
        gridready_ray_node_firewall_members: "{{{{ groups['all'] | map('extract', hostvars, 'ansible_host') | list }}}}"
        gridready_ray_node_firewall_clients: []
        gridready_ray_node_api_ports: [{API}]
        gridready_ray_node_internal_ports: []
"""


def _answers(address: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/", timeout=3) as resp:
            return resp.status == 200
    except OSError:
        return False


def _connects(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def guarded(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(2, healthy=True, profiles={"node2": {"os": "debian-13"}})
    play = Path(tmp_path_factory.mktemp("fw")) / "firewall.yml"
    play.write_text(PLAYBOOK)
    run = fleet.ansible_playbook(play, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    for host in fleet.names:  # something to answer on the API port and on a port that is not one
        for port in (API, RAY):
            fleet.ssh(host, f"systemd-run --unit=t-listen-{port} --working-directory=/tmp "
                            f"/usr/bin/python3 -m http.server {port}")
    return fleet


def test_the_hosts_are_reached_as_the_login_user_with_sudo_at_debians_defaults(guarded) -> None:
    for host in guarded.names:
        assert guarded.ssh(host, "id -un", sudo=False).stdout.strip() == "gridready"
        assert guarded.ssh(host, "id -un").stdout.strip() == "root"
        # sudo's env_reset: the ssh session's variables stay outside
        assert guarded.ssh(host, "printenv SSH_CONNECTION", sudo=False).stdout.split()[0] == paths.BRIDGE_ADDR
        assert guarded.ssh(host, "printenv SSH_CONNECTION || echo unset").stdout.strip() == "unset"
    releases = {h: guarded.ssh(h, ". /etc/os-release; echo $VERSION_ID").stdout.strip() for h in guarded.names}
    assert releases == {"node1": "12", "node2": "13"}


def test_the_controller_is_a_client_of_the_api_ports_under_become(guarded) -> None:
    for host, address in guarded.addresses.items():
        record = json.loads(guarded.ssh(host, "cat /etc/gridready/firewall-ray.json").stdout)
        assert record["tool"] == "nftables", record
        assert record["clients"] == [paths.BRIDGE_ADDR], record
        assert paths.BRIDGE_ADDR in guarded.ssh(host, "nft list table inet gridready_ray").stdout
        wait(lambda a=address: _answers(a, API), 30, f"{host}:{API} to answer the controller")
        assert not _connects(address, RAY), f"{host}:{RAY}, a Ray port, is open to the controller"
