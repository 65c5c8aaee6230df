"""gridready_probe_runtime: the pinned PyTorch in its own venv, where the certify role finds it (the sandbox index
serves a SIMULATED torch wheel under the real name and pin, whose CUDA devices are the host's simulated GPUs)."""

from __future__ import annotations

import json

import pytest

from gridready.spec.cluster import SoftwarePins

pytestmark = pytest.mark.sandbox
PYTHON = "/opt/gridready/probe-runtime/bin/python3"
PIN = SoftwarePins().probe_torch


def test_torch_at_the_pin_imports_in_the_probe_runtime(node):
    code = "import torch, importlib.metadata as m; print(m.version('torch'), torch.__version__)"
    run = node.run(f'{PYTHON} -c "{code}"')
    assert run.rc == 0, run.stderr
    assert run.stdout.split() == [PIN, PIN]
    assert node.run("python3 -c 'import torch'").rc != 0  # the system interpreter is left alone


def test_the_venv_is_its_own_and_the_role_reports(node):
    cfg = node.file("/opt/gridready/probe-runtime/pyvenv.cfg").content_string
    assert "include-system-site-packages = false" in cfg
    facts = json.loads(node.file("/etc/gridready/facts.d/probe_runtime.json").content_string)
    assert facts == {"status": "installed", "torch": PIN, "python": PYTHON}
