"""The command line loads where one stage's dependencies are missing: the lent GPU machines have no Pulumi
(shared/reference/h200-machine.md), and `invoke certify` must still run there (docs/device.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_tasks_load_and_certify_imports_without_pulumi() -> None:
    code = ("import sys; sys.modules['pulumi'] = None; sys.modules['pulumi_kubernetes'] = None\n"
            "import tasks\nimport gridready.stages.certify, gridready.stages.discover\n"
            "assert 'certify' in tasks.ns.task_names and 'discover' in tasks.ns.task_names\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
