"""The committed sandbox inventory and the address allocator (no root needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gridready.errors import GridreadyError
from sandbox import alloc, config, geninv, image, paths

REPO = Path(__file__).resolve().parents[2]
SANDBOX = REPO / "inventories" / "sandbox"


def test_sandbox_inventory_loads_and_matches_profiles() -> None:
    from gridready import inventory

    inv = inventory.load(SANDBOX)
    assert inv.groups["gpu_nodes"] == ["node1", "node2"] and inv.groups["gpu_nodes_trixie"] == ["node3"]
    cfg = config.load(SANDBOX)
    assert [h.name for h in cfg.hosts] == ["node1", "node2", "node3"]
    # two releases, each host in the node group of its OS (a node group has one `os`)
    assert {h.name: h.release for h in cfg.hosts} == {"node1": "debian-12", "node2": "debian-12", "node3": "debian-13"}
    os_of = {host: g.os for g in inv.spec.node_groups for host in inv.groups[g.name]}
    assert os_of == {h.name: h.release for h in cfg.hosts}
    for h in cfg.hosts:  # committed inventories keep to .2-.31; generated fleets start at .32
        assert h.address and 2 <= int(h.address.rsplit(".", 1)[1]) < alloc.DYNAMIC_FIRST
        prof = json.loads(config.render_profile(h.name, h.address, h.profile, "sandbox.yml"))
        assert prof["gpus"] == 8 and len(prof["hcas"]) == 8 and prof["address"] == h.address
        assert {n.netdev for n in inv.spec.node_groups[0].nics} == {c["netdev"] for c in prof["hcas"]}
    faults = {h.name: h.profile.get("faults", []) for h in cfg.hosts}
    assert faults["node3"] == [{"kind": "pcie_downtrained", "gpu": 3}]
    assert not faults["node1"] and not faults["node2"]


def test_sandbox_hosts_yml_is_a_plain_ansible_inventory() -> None:
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(SANDBOX / "hosts.yml"),
                          "--list"], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["gpu_nodes"]["hosts"] == ["node1", "node2"] and data["gpu_nodes_trixie"]["hosts"] == ["node3"]
    hv = data["_meta"]["hostvars"]["node2"]
    assert hv["ansible_host"] == "10.77.0.12"
    assert hv["ansible_python_interpreter"] == "/usr/bin/python3"
    assert hv["ansible_ssh_private_key_file"] == str(paths.fleet_dir("sandbox") / "id_ed25519")
    assert f"ControlPath={paths.control_dir('sandbox')}/%C" in hv["ansible_ssh_common_args"]


def test_bad_profile_is_an_invalid_input(tmp_path: Path) -> None:
    for name in ("cluster.yml", "hosts.yml"):
        (tmp_path / name).write_text((SANDBOX / name).read_text())
    (tmp_path / "sandbox.yml").write_text("hosts:\n  node2: {faults: [{kind: pcie_downtrained, gpu: 9}]}\n")
    cfg = config.load(tmp_path)
    with pytest.raises(GridreadyError) as err:
        config.render_profile("node2", "10.77.0.12", cfg.hosts[1].profile, "sandbox.yml")
    assert err.value.code == 2 and "node2" in str(err.value)


def test_allocator_never_hands_out_an_address_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "RUN_ROOT", tmp_path)
    with alloc.locked() as table:
        a = alloc.claim(table, "sandbox", Path("/inv/sandbox"), {"node1": "10.77.0.11", "node2": None})
        b = alloc.claim(table, "t-one", Path("/x/t-one"), dict.fromkeys(["node1", "node2", "node3"]))
    assert a == {"node1": "10.77.0.11", "node2": "10.77.0.32"}
    assert b == {"node1": "10.77.0.33", "node2": "10.77.0.34", "node3": "10.77.0.35"}
    with alloc.locked() as table, pytest.raises(GridreadyError, match="held by fleet 'sandbox'"):
        alloc.claim(table, "other", Path("/inv/other"), {"node1": "10.77.0.11"})
    with alloc.locked() as table, pytest.raises(GridreadyError, match="already used by"):
        alloc.claim(table, "sandbox", Path("/elsewhere/sandbox"), {"node1": None})
    with pytest.raises(GridreadyError, match="outside the sandbox range"):
        alloc.check_address("10.78.0.5", "hosts.yml")
    with alloc.locked() as table:
        alloc.release(table, "sandbox")
        c = alloc.claim(table, "t-two", Path("/x/t-two"), {"node1": None})
    assert c == {"node1": "10.77.0.32"}


def _connection_vars(hosts_file: Path) -> dict[str, object]:
    return (yaml.safe_load(hosts_file.read_text())["all"]["vars"])


def test_sandbox_inventories_connect_as_the_sample_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One shape to copy: the committed and the generated sandbox inventories log in as the sample's unprivileged
    user with become, as a customer's inventory does (issue #43); only the sandbox's key and ssh options differ."""
    sample = _connection_vars(REPO / "inventories" / "_sample" / "hosts.yml")
    assert sample["ansible_user"] == image.LOGIN_USER and sample["ansible_become"] is True
    monkeypatch.setattr(paths, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(paths, "RUN_ROOT", tmp_path / "run")
    generated = geninv.make("t-shape", 3)
    for hosts_file in (SANDBOX / "hosts.yml", generated / "hosts.yml"):
        found = _connection_vars(hosts_file)
        assert {k: found.get(k) for k in sample} == sample, hosts_file
        assert "root" not in str(found.get("ansible_user"))


def test_a_generated_fleet_puts_each_release_in_a_node_group_of_its_os(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from gridready import inventory

    monkeypatch.setattr(paths, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(paths, "RUN_ROOT", tmp_path / "run")
    inv_dir = geninv.make("t-two-os", 3, {"node2": {"os": "debian-13"}}, healthy=True)
    inv = inventory.load(inv_dir)
    os_of = {host: g.os for g in inv.spec.node_groups for host in inv.groups[g.name]}
    assert os_of == {"node1": "debian-12", "node2": "debian-13", "node3": "debian-12"}
    assert {h.name: h.release for h in config.load(inv_dir).hosts} == os_of
    only13 = inventory.load(geninv.make("t-all-13", 2, {h: {"os": "debian-13"} for h in ("node1", "node2")},
                                        healthy=True))
    assert [(g.name, g.os) for g in only13.spec.node_groups] == [("gpu_nodes_trixie", "debian-13")]


def test_an_unknown_release_is_an_invalid_input_naming_the_key(tmp_path: Path) -> None:
    for name in ("cluster.yml", "hosts.yml"):
        (tmp_path / name).write_text((SANDBOX / name).read_text())
    (tmp_path / "sandbox.yml").write_text("hosts:\n  node2: {os: debian-11}\n")
    with pytest.raises(GridreadyError) as err:
        config.load(tmp_path)
    assert err.value.code == 2
    assert str(err.value) == (f"{tmp_path / 'sandbox.yml'}: hosts.node2.os: 'debian-11' is not one of "
                              "debian-12, debian-13")
