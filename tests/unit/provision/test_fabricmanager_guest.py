"""Issue 45, finding 6: inside an 8-GPU passthrough guest (shared NVSwitch model) fabric manager runs in the host or
service VM, as the catalog's node shape says: provision neither installs it in the guest nor demands it active (the
guest's fabric state Completed is still demanded: tests/unit/fastpath/test_post_state.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gridready import inventory
from gridready.provision_vars import role_vars

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("platform", "on_node"), [("baremetal", True), ("passthrough", False)])
def test_fabric_manager_runs_where_the_catalog_puts_it(platform: str, on_node: bool) -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    group = inv.spec.node_groups[0].model_copy(update={"platform": platform})
    shape = group.catalog_sku.shape(8, platform)
    assert shape is not None and shape.fabric_manager_on_node is on_node
    out = role_vars(inv.spec, group)
    assert out["gridready_fabricmanager_nvswitch"] is True  # the guest still sees the NVSwitch fabric
    assert out["gridready_fabricmanager_on_node"] is on_node


def test_the_role_installs_only_where_it_runs_on_the_node() -> None:
    tasks = yaml.safe_load((REPO / "roles/gridready_fabricmanager/tasks/main.yml").read_text())
    (install,) = [t for t in tasks if t.get("ansible.builtin.include_tasks") == "install.yml"]
    assert "gridready_fabricmanager_on_node" in install["when"]
