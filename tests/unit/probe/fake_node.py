"""A node without its tools, for in-process tests of gridready.probe.collect: `Node` stands in for tools.run and
tools.which (same call signature and result shape as gridready/probe/tools.py documents), answers each command
line with a canned result and records every call."""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
