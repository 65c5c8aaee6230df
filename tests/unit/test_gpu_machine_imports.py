"""The GPU suite's collection on a lent GPU machine (docs/device.md): it has no tritonclient and no protobuf, and
`pytest -m gpu` loads tests/conftest.py, which loads the sandbox plugin, which reads the Triton pins. The Triton
package imported tritonclient's protos at import time, so the whole GPU suite failed to collect there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCKED = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "tritonclient" or name.startswith("google.protobuf"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Absent())
import tests.conftest
from gridready.serving.triton import versions
print(sorted(versions.pins()["lines"]))
"""


def test_the_test_configuration_and_the_triton_pins_import_without_tritonclient() -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCKED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith("[")
