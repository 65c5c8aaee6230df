"""Every role has a README generated from its own interface (issue 33: a README per role saying what it installs,
its variables and the tag that selects it); a role whose interface changed without its README fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())


def _tool():
    spec = importlib.util.spec_from_file_location("role_readmes", REPO / "tools" / "role_readmes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("role", ROLES)
def test_the_readme_is_the_roles_interface(role: str) -> None:
    readme = REPO / "roles" / role / "README.md"
    assert readme.is_file(), "run: python tools/role_readmes.py"
    assert readme.read_text() == _tool().render(role), "stale README: run python tools/role_readmes.py"


def test_provision_roles_name_their_tag() -> None:
    text = (REPO / "roles" / "gridready_nccl" / "README.md").read_text()
    assert "(tag `nccl`)" in text and "`gridready_nccl_tests_bundled_tarball`" in text


def test_a_readme_is_no_input_of_the_fast_path(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("digest", REPO / "playbooks/filter_plugins/gridready_digest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "main.yml").write_text("---\n")
    before = mod.tree_digests({"r": str(tmp_path)})
    (tmp_path / "README.md").write_text("# docs\n")
    assert mod.tree_digests({"r": str(tmp_path)}) == before
