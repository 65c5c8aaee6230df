"""The simulator's own facts: the simulated hardware reads its healthy values from sandbox/sim/hardware.py, never
from the product's catalog, so the catalog's floors and the simulator's values are two witnesses, not one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gridready import catalog
from sandbox.profile import HardwareProfile
from sandbox.sim import hardware, simcore

SANDBOX = Path(__file__).resolve().parents[2] / "sandbox"


def gridready_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every gridready module a file imports, at any depth of the file (`from gridready import
    catalog` names gridready.catalog)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "gridready"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "gridready":
            if node.module == "gridready":
                found += [(node.lineno, f"gridready.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def test_no_sandbox_module_imports_the_catalog() -> None:
    wrong = [f"{p.relative_to(SANDBOX.parent)}:{line}: {module}" for p in sorted(SANDBOX.rglob("*.py"))
             for line, module in gridready_imports(p)
             if module == "gridready.catalog" or module.startswith("gridready.catalog.")]
    assert wrong == []


def test_the_simulated_hardware_takes_nothing_from_the_product() -> None:
    """The tools (sandbox/sim, stdlib only on the hosts) and the hardware profile import no gridready module."""
    files = [*sorted((SANDBOX / "sim").rglob("*.py")), SANDBOX / "profile.py"]
    assert [f"{p.name}:{line}: {module}" for p in files for line, module in gridready_imports(p)] == []


@pytest.mark.parametrize("source", [
    "from gridready import catalog\n", "import gridready.catalog\n", "from gridready.catalog import lookup\n",
    "def f():\n    from gridready import ledger, catalog\n",
])
def test_the_import_check_sees_the_catalog(tmp_path: Path, source: str) -> None:
    probe = tmp_path / "m.py"
    probe.write_text(source)
    assert "gridready.catalog" in [module for _, module in gridready_imports(probe)]


def test_every_simulated_sku_is_named_as_the_product_names_it() -> None:
    """Inventories name a SKU once for both: each simulated SKU's name and PCI device id are the catalog's."""
    for name, facts in hardware.SKUS.items():
        sku = catalog.lookup(name)
        assert sku is not None and sku.name == name and sku.device_id == facts["device_id"]
        assert all(catalog.lookup(alias) == sku for alias in facts["aliases"])


@pytest.mark.parametrize(("key", "name"), [
    ("h200", "H200-SXM-141GB"), ("0x233510DE", "H200-SXM-141GB"), ("2330", "H100-SXM5-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), ("H100-NVL", "H100-NVL-94GB"),
])
def test_the_profile_reads_its_sku_from_the_simulators_table(key: str, name: str) -> None:
    assert HardwareProfile(sku=key, gpus=1 if "NVL" in name else 8).sku == name
    assert simcore.skus()[name]["device_id"] == hardware.SKUS[name]["device_id"]


def test_an_unknown_sku_or_shape_is_refused_by_the_profile() -> None:
    with pytest.raises(ValueError, match="unknown SKU 'b200'"):
        HardwareProfile(sku="b200")
    with pytest.raises(ValueError, match=r"3 x H200-SXM-141GB baremetal is not a node shape of the SKU \(8 GPUs"):
        HardwareProfile(sku="h200", gpus=3)


def test_a_changed_catalog_does_not_move_the_simulated_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two witnesses: a wrong figure in the product's catalog leaves the simulated GPU as it was."""
    before = simcore.skus()["H200-SXM-141GB"]
    h200 = catalog.lookup("h200")
    assert h200 is not None
    wrong = h200.model_copy(update={"nvlink_links": 12, "power_limit_w": 500.0, "pcie_width": 8})
    monkeypatch.setattr(catalog, "SKUS", tuple(wrong if s.name == h200.name else s for s in catalog.SKUS))
    monkeypatch.setattr(catalog, "_BY_NAME", {k: (wrong if v is h200 else v) for k, v in catalog._BY_NAME.items()})
    assert simcore.skus()["H200-SXM-141GB"] == before
    assert (before["nvlink_links"], before["power_limit_w"], before["pcie_width"]) == (18, 700.0, 16)
