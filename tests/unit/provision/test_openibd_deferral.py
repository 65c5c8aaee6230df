"""Issue 45, finding 4: the rdma role restarts openibd (which unloads mlx5_core and every ConnectX netdev) only where
neither the Ansible connection nor the uplink rides on a ConnectX port; elsewhere the reload waits for the reboot
(Mellanox/network-operator#2258). roles/gridready_rdma/tasks/connection.yml runs here, with Ansible, over a stand-in
/sys/class/net tree and stand-in interface facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "gridready_rdma"


def _net(root: Path, links: dict[str, str], lowers: dict[str, list[str]]) -> None:
    """A /sys/class/net tree: each port's device/driver link to its driver, each upper device's lower_* links."""
    net = root / "sys" / "class" / "net"
    for dev, driver in links.items():
        (net / dev / "device").mkdir(parents=True, exist_ok=True)
        drivers = root / "sys" / "bus" / "pci" / "drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        (net / dev / "device" / "driver").symlink_to(drivers)
    for upper, below in lowers.items():
        (net / upper).mkdir(parents=True, exist_ok=True)
        for dev in below:
            (net / upper / f"lower_{dev}").symlink_to(net / dev)


def _ports(tmp: Path, facts: dict[str, Any]) -> tuple[list[str], bool]:
    out = tmp / "out.json"
    play = [{"name": "connection", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"gridready_rdma_sysfs_root": str(tmp / "root"), **facts},
             "tasks": [{"name": "the check", "ansible.builtin.include_tasks": str(ROLE / "tasks/connection.yml")},
                       {"name": "keep", "ansible.builtin.copy": {
                           "dest": str(out), "mode": "0600",
                           "content": "{{ {'ports': __gridready_rdma_connection_ports.stdout_lines,"
                                      " 'deferred': __gridready_rdma_openibd_deferred} | to_json }}"}}]}]
    path = tmp / "play.yml"
    path.write_text(yaml.safe_dump(play))
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(path)],
                         capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                              "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    assert run.returncode == 0, run.stdout[-3000:]
    got = json.loads(out.read_text())
    return got["ports"], got["deferred"]


# The reference inventory's shape: the management address on a VLAN over an LACP bond of two ConnectX-7 ports,
# an onboard NIC left unused
PORTS = {"ens1f0np0": "mlx5_core", "ens1f1np1": "mlx5_core", "eno1": "ixgbe"}
BOND = {"bond0": ["ens1f0np0", "ens1f1np1"], "bond0.100": ["bond0"]}


@pytest.mark.parametrize(("facts", "ports"), [
    # connected to the VLAN's address; the default route too
    ({"ansible_host": "10.1.0.5", "ansible_interfaces": ["lo", "eno1", "bond0", "bond0.100"],
      "ansible_bond0_100": {"ipv4": {"address": "10.1.0.5"}}, "ansible_default_ipv4": {"interface": "bond0.100"}},
     ["ens1f0np0", "ens1f1np1"]),
    # the connection on the onboard NIC, the uplink (default route) on the bond: the reload would still cut it
    ({"ansible_host": "192.168.1.5", "ansible_interfaces": ["eno1", "bond0"],
      "ansible_eno1": {"ipv4": {"address": "192.168.1.5"}}, "ansible_default_ipv4": {"interface": "bond0"}},
     ["ens1f0np0", "ens1f1np1"]),
    # connection and uplink on the onboard NIC: openibd may restart now
    ({"ansible_host": "192.168.1.5", "ansible_interfaces": ["eno1", "bond0"],
      "ansible_eno1": {"ipv4": {"address": "192.168.1.5"}}, "ansible_default_ipv4": {"interface": "eno1"}},
     []),
])
def test_the_connection_on_a_connectx_port_defers_the_reload(tmp_path: Path, facts: dict[str, Any],
                                                             ports: list[str]) -> None:
    _net(tmp_path / "root", PORTS, BOND)
    found, deferred = _ports(tmp_path, facts)
    assert found == ports and deferred is bool(ports)


def test_no_live_restart_where_the_reload_is_deferred() -> None:
    handlers = yaml.safe_load((ROLE / "handlers/main.yml").read_text())
    (restart,) = [h for h in handlers if h["name"] == "Restart openibd"]
    assert any("__gridready_rdma_openibd_deferred" in w for w in restart["when"])
    peermem = yaml.safe_load((ROLE / "tasks/peermem.yml").read_text())
    (reload_,) = [t for t in peermem if t.get("ansible.builtin.systemd_service", {}).get("name") == "openibd"]
    assert any("__gridready_rdma_openibd_deferred" in w for w in reload_["when"])
