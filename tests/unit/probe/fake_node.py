"""A node without its tools, for in-process tests of gridready.probe.collect: `Node` stands in for tools.run and
tools.which (same call signature and result shape as gridready/probe/tools.py documents), answers each command
line with a canned result and records every call. `Processes` stands in one level lower, for the subprocess, shutil
and time modules of a collector that starts its tools itself (gridready/probe/hca.py)."""

from __future__ import annotations

import subprocess as _sp
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from tests.unit.certify.fixtures_io import FIX

SMI_QUERY_CSV = (FIX / "h200x2" / "nvidia-smi-query-gpu.csv").read_text()
SMI_Q_TEXT = (FIX / "h200x2" / "nvidia-smi-q.txt").read_text()
SMI_Q_XML = (FIX / "h200x1" / "nvidia-smi-q-x.xml").read_text()
SMI_NVLINK_S = (FIX / "h200x2" / "nvidia-smi-nvlink.txt").read_text()
SMI_TOPO = (FIX / "h200x2" / "nvidia-smi-topo-m.txt").read_text()


def result(argv: list[str], stdout: str = "", rc: int | None = 0, stderr: str = "", absent: bool = False,
           timed_out: bool = False) -> dict[str, Any]:
    """The dict tools.run returns: {argv, rc, stdout, stderr, wall_s, absent, timed_out}."""
    return {"argv": list(argv), "rc": None if absent else rc, "stdout": stdout, "stderr": stderr, "wall_s": 0.1,
            "absent": absent, "timed_out": timed_out}


Answer = dict[str, Any] | Callable[[list[str]], dict[str, Any]]


class Node:
    """Canned answers per command line (a tuple of argv); a command without one is absent from the node."""

    def __init__(self, tools: Iterable[str] = (), answers: dict[tuple[str, ...], Answer] | None = None) -> None:
        self.tools = set(tools)
        self.answers: dict[tuple[str, ...], Answer] = dict(answers or {})
        self.calls: list[tuple[tuple[str, ...], float, dict[str, str] | None]] = []

    def which(self, tool: str) -> str | None:
        return f"/usr/bin/{tool}" if tool in self.tools else None

    def run(self, argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None) -> dict[str, Any]:
        self.calls.append((tuple(argv), timeout_s, env))
        ans = self.answers.get(tuple(argv))
        if ans is None:
            return result(argv, absent=True)
        return ans(list(argv)) if callable(ans) else {**ans, "argv": list(argv)}

    def argvs(self) -> list[tuple[str, ...]]:
        return [c[0] for c in self.calls]


class Clock:
    """A monotonic clock that returns the given readings in turn (time.monotonic's float seconds)."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def monotonic(self) -> float:
        return self.readings.pop(0)


# ---- the node's processes, for collectors that call the subprocess module themselves (gridready/probe/hca.py) ----

class Done:
    """A command that exits `rc` with its output (subprocess.run returns a CompletedProcess of it)."""

    def __init__(self, rc: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


class Hangs:
    """A command still running at its timeout; `partial` is what it printed by then. subprocess.run raises
    TimeoutExpired with `output` bytes, or None when nothing was read (Python docs, subprocess.TimeoutExpired:
    "always bytes when any output was captured regardless of the text=True setting")."""

    def __init__(self, partial: bytes | str | None = None) -> None:
        self.partial = partial


class Server:
    """What Popen returns: `wait(timeout=)` returns the exit code, or raises TimeoutExpired while it still runs
    (`hangs`); `kill()` ends it (Popen.wait and Popen.kill as the subprocess docs give them)."""

    def __init__(self, argv: list[str], hangs: bool, rc: int = 0) -> None:
        self.argv, self.hangs, self.rc = argv, hangs, rc
        self.waits: list[float | None] = []
        self.killed = False

    def wait(self, timeout: float | None = None) -> int:
        self.waits.append(timeout)
        if self.hangs and not self.killed:
            raise _sp.TimeoutExpired(self.argv, timeout)
        return -9 if self.killed else self.rc

    def kill(self) -> None:
        self.killed = True


class Processes:
    """Stands in for the modules a collector starts tools through: `subprocess` (run, Popen, PIPE, STDOUT,
    TimeoutExpired; the real constants and exception), `shutil.which` and `time` (sleep, time), answering each
    command line (a tuple of argv) with a Done or Hangs and recording every call with its keyword arguments.
    A tool not in `tools` is absent (which -> None). `servers`: Popen's processes hang (never exit by themselves)
    when `server_hangs`."""

    PIPE = _sp.PIPE
    STDOUT = _sp.STDOUT
    TimeoutExpired = _sp.TimeoutExpired
    CompletedProcess = _sp.CompletedProcess

    def __init__(self, tools: Iterable[str] = (), answers: dict[tuple[str, ...], Done | Hangs] | None = None,
                 server_hangs: bool = False, now: float = 1_700_000_000.0) -> None:
        self.tools = set(tools)
        self.answers = dict(answers or {})
        self.server_hangs = server_hangs
        self.now = now
        self.runs: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.popens: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.servers: list[Server] = []
        self.sleeps: list[float] = []
        self.events: list[str] = []  # "popen", "sleep", "run", in the order they happened

    def which(self, tool: str) -> str | None:
        return f"/usr/bin/{tool}" if tool in self.tools else None

    def run(self, argv: list[str], **kw: Any) -> _sp.CompletedProcess[str]:
        self.runs.append((tuple(argv), kw))
        self.events.append("run")
        ans = self.answers.get(tuple(argv))
        if ans is None:
            raise AssertionError(f"the test gave no answer for {argv}")
        if isinstance(ans, Hangs):
            raise _sp.TimeoutExpired(argv, kw.get("timeout") or 0.0, output=ans.partial)
        return _sp.CompletedProcess(argv, ans.rc, ans.stdout, ans.stderr)

    def Popen(self, argv: list[str], **kw: Any) -> Server:  # noqa: N802 (subprocess.Popen's name)
        self.popens.append((tuple(argv), kw))
        self.events.append("popen")
        self.servers.append(Server(list(argv), self.server_hangs))
        return self.servers[-1]

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.events.append("sleep")

    def time(self) -> float:
        return self.now

    def install(self, monkeypatch: Any, module: Any) -> Processes:
        """Replace `module`'s subprocess, shutil and time with this node's."""
        monkeypatch.setattr(module, "subprocess", self)
        monkeypatch.setattr(module, "shutil", SimpleNamespace(which=self.which))
        monkeypatch.setattr(module, "time", SimpleNamespace(sleep=self.sleep, time=self.time))
        return self
