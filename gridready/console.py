"""One rich console on stderr: colour and live progress on a terminal, plain lines in CI and pipes."""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, highlight=False, soft_wrap=True)


def interactive() -> bool:
    """Live displays only on a real terminal outside CI."""
    return err.is_terminal and not os.environ.get("CI") and sys.stderr.isatty()


def info(message: str) -> None:
    err.print(escape(message))


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}" if interactive() else f"warning: {escape(message)}")


def error(message: str) -> None:
    err.print(f"[red]error:[/red] {escape(message)}" if interactive() else f"error: {escape(message)}")


class Steps:
    """Progress lines of one long phase, each with the time since it began: `[fabric +12.3 s] pair a+b: ...`.
    Plain lines (they read the same in CI logs and on a terminal); callable, so it fits a `progress` callback."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        info(f"[{self.phase} +{time.monotonic() - self.t0:.1f} s] {message}")
