"""Style gates in the test run: ruff on the Python, ansible-lint (production profile, empty skip list)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)


def test_ruff_is_clean():
    proc = _run(str(BIN / "ruff"), "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_config_is_production_with_empty_skip_list():
    cfg = yaml.safe_load((REPO / ".ansible-lint").read_text())
    assert cfg["profile"] == "production"
    assert cfg.get("skip_list") == []
    assert not cfg.get("warn_list")


@pytest.mark.skipif(not (BIN / "ansible-lint").exists() and not shutil.which("ansible-lint"),
                    reason="ansible-lint not installed (pip install -e '.[dev]')")
def test_ansible_lint_production_profile_passes():
    proc = _run(str(BIN / "ansible-lint"), "--offline", "--profile", "production", "playbooks", "roles")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
