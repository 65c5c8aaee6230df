"""Run node tools with a timeout; an absent tool or a timeout is recorded, never raised."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any


def sysfs_root() -> str:
    """`/sys`, or another tree: GRIDREADY_SYSFS_ROOT is either a root holding `sys/`
    or the sysfs tree itself (holding `bus/`, `class/`)."""
    root = os.environ.get("GRIDREADY_SYSFS_ROOT")
    if not root:
        return "/sys"
    return os.path.join(root, "sys") if os.path.isdir(os.path.join(root, "sys")) else root


def proc_root() -> str:
    """`/proc`, or a fake one (GRIDREADY_PROC_ROOT) for cmdline and modules."""
    return os.environ.get("GRIDREADY_PROC_ROOT", "/proc")


def which(tool: str) -> str | None:
    return shutil.which(tool)


def run(argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a command; returns {argv, rc, stdout, stderr, wall_s, absent, timed_out}."""
    out: dict[str, Any] = {"argv": argv, "rc": None, "stdout": "", "stderr": "", "wall_s": 0.0,
                           "absent": False, "timed_out": False}
    path = argv[0] if os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK) else which(argv[0])
    if path is None:
        out["absent"] = True
        return out
    t0 = time.monotonic()
    try:
        proc = subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, **(env or {})}, check=False, errors="replace")
        out.update(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)
    except subprocess.TimeoutExpired as exc:
        out["timed_out"] = True
        out["stdout"] = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    except OSError as exc:
        out["stderr"] = str(exc)
        out["rc"] = 127
    out["wall_s"] = round(time.monotonic() - t0, 3)
    return out


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None
