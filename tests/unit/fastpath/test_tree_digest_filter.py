"""playbooks/filter_plugins/gridready_digest.py: the digest of each role's code that the fast path compares."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

PLUGIN = Path(__file__).resolve().parents[3] / "playbooks" / "filter_plugins" / "gridready_digest.py"


@pytest.fixture(scope="module")
def dg() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gridready_digest", PLUGIN)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(top: Path) -> tuple[Path, Path]:
    role = top / "roles" / "r"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("---\n")
    common = top / "provision.yml"
    common.write_text("---\n")
    return role, common


def test_digest_changes_with_any_file_of_the_role_or_the_common_files(dg: ModuleType, tmp_path: Path) -> None:
    role, common = _tree(tmp_path)
    first = dg.tree_digests({"r": str(role)}, [str(common)])
    (role / "tasks" / "main.yml").write_text("--- # edited\n")
    second = dg.tree_digests({"r": str(role)}, [str(common)])
    common.write_text("--- # edited\n")
    third = dg.tree_digests({"r": str(role)}, [str(common)])
    (role / "templates").mkdir()
    (role / "templates" / "new.j2").write_text("")
    fourth = dg.tree_digests({"r": str(role)}, [str(common)])
    assert len({first["r"], second["r"], third["r"], fourth["r"]}) == 4


def test_digest_is_the_same_in_another_checkout_and_ignores_bytecode(dg: ModuleType, tmp_path: Path) -> None:
    role, common = _tree(tmp_path / "a")
    here = dg.tree_digests({"r": str(role)}, [str(common)])
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "roles" / "r" / "__pycache__").mkdir()
    (tmp_path / "b" / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    there = dg.tree_digests({"r": str(tmp_path / "b" / "roles" / "r")}, [str(tmp_path / "b" / "provision.yml")])
    assert here == there


def test_the_filter_is_registered_under_its_name(dg: ModuleType) -> None:
    assert dg.FilterModule().filters()["gridready_tree_digests"] is dg.tree_digests
