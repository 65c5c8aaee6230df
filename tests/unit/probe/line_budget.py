"""A guard for code that could loop forever: `line_budget(module, n)` fails the module's code once it has executed n
lines (sys.settrace's "line" events; Python docs, sys.settrace: an exception raised by the local trace function
propagates into the traced frame), so a test of a loop that stopped progressing fails at once instead of hanging
the suite. Traces only frames of the module's source file; the previous trace function is restored."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any


@contextmanager
def line_budget(module: ModuleType, lines: int) -> Iterator[None]:
    source = Path(str(module.__file__))
    key = (source.name, source.parent.name)  # also the mutation run's copy (mutants/gridready/probe/<name>.py)
    left = [lines]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            left[0] -= 1
            if left[0] < 0:
                raise AssertionError(f"{source.name} ran past {lines} lines: a loop does not reach its end")
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        path = Path(frame.f_code.co_filename)
        return local if (path.name, path.parent.name) == key else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield
    finally:
        sys.settrace(before)
