"""stacks/<project>/__main__.py, what the Pulumi CLI runs, imports its program from the installed gridready package.

The Pulumi CLI runs a Python project's directory as a program (its directory first on sys.path, the repository root
not on it); the test imports what each `__main__.py` imports the same way, with only the gridready package on the
path, and finds no `sys.path` edit in the projects or in gridready's Pulumi wrapper.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gridready import pulumi as gpulumi

REPO = Path(__file__).resolve().parents[3]


def _edits_sys_path(path: Path) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)
            and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"]


@pytest.mark.parametrize("project", sorted(gpulumi.PROGRAMS))
def test_the_project_imports_its_program_from_the_installed_package(project, tmp_path):
    main = REPO / "stacks" / project / "__main__.py"
    assert _edits_sys_path(main) == []
    froms = [n for n in ast.parse(main.read_text()).body if isinstance(n, ast.ImportFrom)]
    assert [n.module for n in froms] == [f"gridready.stacks.{project}.program"]
    (tmp_path / "gridready").symlink_to(REPO / "gridready")  # the package alone, as an install puts it
    code = "\n".join(f"from {n.module} import {', '.join(a.name for a in n.names)}" for n in froms)
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{code}"],
                          cwd=main.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_gridready_never_imports_the_repository_root():
    """`stacks` (the Pulumi projects' folder) is no package of the installation; gridready.stacks is."""
    wrong = []
    for path in sorted((REPO / "gridready").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            wrong += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "stacks"]
    assert wrong == []


def test_no_pulumi_module_edits_sys_path():
    paths = [REPO / "gridready" / "pulumi.py", *sorted((REPO / "gridready" / "stacks").rglob("*.py")),
             *sorted((REPO / "stacks").rglob("*.py"))]
    assert [f"{p.relative_to(REPO)}:{line}" for p in paths for line in _edits_sys_path(p)] == []
