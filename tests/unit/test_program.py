"""`gridready -i <customer> ...` (issue 33, choosing an inventory plainly): one flag for the whole command line, above
GRIDREADY_INVENTORY and an -f config file; the task list says which inventory the tasks would run on."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "GRIDREADY_INVENTORY"}
    return subprocess.run([sys.executable, "-m", "gridready.program", *args], cwd=REPO, capture_output=True,
                          text=True, env={**base, **env}, timeout=120, check=False)


def test_the_flag_chooses_the_inventory_for_the_whole_line() -> None:
    run = _run("-i", "acme-h200", "validate")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("inventory acme-h200: valid")  # progress lines: stderr
    by_path = _run("--inventory", "inventories/acme-h200-k8s", "validate")
    assert by_path.returncode == 0 and "inventory acme-h200-k8s: valid" in by_path.stderr


def test_the_flag_wins_over_the_environment_and_a_config_file() -> None:
    run = _run("-f", "inventories/acme-h200-k8s/invoke.yaml", "-i", "acme-h200", "validate",
               GRIDREADY_INVENTORY="sandbox")
    assert run.returncode == 0 and "inventory acme-h200: valid" in run.stderr, run.stdout + run.stderr
    plain = _run("validate", GRIDREADY_INVENTORY="acme-h200")  # without the flag, the invoke form's choice
    assert "inventory acme-h200: valid" in plain.stderr


def test_an_unknown_inventory_is_a_usage_error() -> None:
    run = _run("-i", "nosuch", "validate")
    assert run.returncode == 2
    assert "inventories/nosuch: (inventory): no such inventory directory" in run.stderr


def test_the_task_list_names_the_inventory() -> None:
    run = _run("-i", "acme-h200", "--list")
    assert run.returncode == 0 and run.stdout.startswith("Inventory: acme-h200")
    assert "provision" in run.stdout and "certify" in run.stdout


def test_the_program_is_installed_as_gridready() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"gridready": "gridready.program:main"}
