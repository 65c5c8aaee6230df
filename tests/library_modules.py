"""The custom Ansible modules of library/ as Python modules: Ansible ships each to the node as a script, so tests
load them from their files (they are no package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

LIBRARY = Path(__file__).resolve().parents[1] / "library"


def path(name: str) -> Path:
    return LIBRARY / f"{name}.py"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path(name))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
