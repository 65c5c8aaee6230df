"""Waiting on a sandbox host from the controller: an engine's /health, any condition with a deadline."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable


def health(address: str, port: int) -> bool:
    """Whether the engine at address:port answers /health with 200 (vLLM's public route, no key)."""
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/health", timeout=3) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll `predicate` every 2 s until it is true; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(2)
