"""Tests marked `gpu` run on a machine with NVIDIA GPUs and torch (docs/device.md gives the one command); elsewhere
they are skipped with the reason, never passed."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        why = None if torch.cuda.is_available() else "torch sees no CUDA device"
    except ImportError:
        why = "torch is not installed"
    if why:
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {why}"))
