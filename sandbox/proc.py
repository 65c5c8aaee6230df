"""Small process helpers: run a command with a one-line error, and kill a saved PID only if it is still ours."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode


def run(cmd: Sequence[str], *, check: bool = True, env: dict[str, str] | None = None,
        timeout: float | None = None, what: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `cmd`; on failure raise GridreadyError with its last stderr line."""
    res = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if check and res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()
        detail = tail[-1] if tail else f"exit {res.returncode}"
        raise GridreadyError(f"sandbox: {what or ' '.join(cmd[:3])} failed: {detail}", ExitCode.INTERNAL)
    return res


def start_time(pid: int) -> int | None:
    """Kernel start time of `pid` (clock ticks since boot), None when it is gone or a zombie.

    Saved with every PID, it guards against signalling a reused PID.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def alive(pid: int | None, started: int | None) -> bool:
    return bool(pid) and started is not None and start_time(pid) == started  # type: ignore[arg-type]


def kill_saved(pid: int | None, started: int | None, sig: int = signal.SIGKILL) -> bool:
    """Signal `pid` only if it is the very process we saved (same start time). True if signalled."""
    if not alive(pid, started):
        return False
    try:
        os.kill(pid, sig)  # type: ignore[arg-type]
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int | None, started: int | None, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
