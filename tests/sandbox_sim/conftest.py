"""Run the simulated tools in-process against a profile written to a temp file (no root, no fleet)."""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.profile import Fault, HardwareProfile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

Run = Callable[..., tuple[int, str]]


def call(module: str, args: list[str], prog: str | None = None, func: str = "main") -> tuple[int, str]:
    """(exit code, stdout+stderr) of sandbox.sim.<module>.<func>(args[, prog])."""
    fn = getattr(importlib.import_module(f"sandbox.sim.{module}"), func)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            rc = fn(args, prog=prog) if prog else fn(args)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, buf.getvalue()


@pytest.fixture
def use_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., HardwareProfile]:
    """use_profile(*faults, **sample kwargs): write that profile and point GRIDREADY_SIM_PROFILE at it."""

    def make(*faults: dict[str, Any], **kw: Any) -> HardwareProfile:
        prof = HardwareProfile.sample(kw.pop("host", "sim-a"), faults=[Fault(**f) for f in faults], **kw)
        path = prof.write(tmp_path / f"{prof.host}.json")
        monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(path))
        for var in ("NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET",
                    "GRIDREADY_SIM_WORLD"):  # fmt: skip
            monkeypatch.delenv(var, raising=False)
        return prof

    return make


@pytest.fixture
def healthy(use_profile: Callable[..., HardwareProfile]) -> HardwareProfile:
    return use_profile()
