"""Issue 45, finding 8: DCGM, the container toolkit and NCCL are pinned and held as the driver is, so a node
provisioned later cannot drift from the rest (an unattended or manual upgrade leaves a held package alone; only the
role's pinned install moves it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gridready import inventory
from gridready.errors import InvalidInput
from gridready.provision_vars import role_vars

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("role", "packages"), [
    ("gridready_nvidia_driver", "__gridready_nvidia_driver_packages"),
    ("gridready_dcgm", "__gridready_dcgm_packages"),
    ("gridready_container_toolkit", "__gridready_container_toolkit_packages"),
    ("gridready_nccl", "__gridready_nccl_packages"),
])
def test_the_role_holds_what_it_installs_and_moves_it_only_by_its_pin(role: str, packages: str) -> None:
    tasks = [t for f in sorted((REPO / "roles" / role / "tasks").glob("*.yml"))
             for t in yaml.safe_load(f.read_text()) or []]
    holds = [t for t in tasks if t.get("ansible.builtin.dpkg_selections", {}).get("selection") == "hold"]
    assert holds and any(packages in str(t["loop"]) for t in holds), role
    installs = [t["ansible.builtin.apt"] for t in tasks if t.get("ansible.builtin.apt", {}).get("state") == "present"
                and packages in str(t["ansible.builtin.apt"].get("name"))]
    assert installs and all(a.get("allow_change_held_packages") for a in installs), role


def test_the_spec_pins_dcgm_and_the_toolkit() -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    group = inv.spec.node_groups[0]
    out = role_vars(inv.spec, group)
    assert out["gridready_dcgm_version"] == "" and out["gridready_container_toolkit_version"] == ""
    inv.spec.software.dcgm_version = "4.5.0"
    inv.spec.software.container_toolkit = "1.18.0"
    out = role_vars(inv.spec, group)
    assert out["gridready_dcgm_version"] == "4.5.0" and out["gridready_container_toolkit_version"] == "1.18.0"


def test_a_dcgm_release_of_another_major_is_refused_naming_the_key(tmp_path: Path) -> None:
    inv_dir = tmp_path / "acme"
    shutil.copytree(REPO / "inventories" / "acme-h200", inv_dir)
    cluster = inv_dir / "cluster.yml"
    cluster.write_text(cluster.read_text().replace("  dcgm_major: 4\n", "  dcgm_major: 4\n  dcgm_version: 3.3.9\n", 1))
    with pytest.raises(InvalidInput, match=r"cluster\.yml: software: dcgm_version 3\.3\.9 is not a release of "
                                           r"dcgm_major 4"):
        inventory.load(inv_dir)
