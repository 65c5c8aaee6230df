"""Serve readiness (up to 30 minutes for a large model) said nothing while it waited (issue 33, progress): now a
`waiting for readiness` line with the elapsed time and what is not ready yet, at most every 30 s."""

from __future__ import annotations

import asyncio

import pytest

from gridready import console
from gridready.bench import readiness
from gridready.bench.endpoint import Endpoint


def test_a_slow_tier_says_what_it_waits_for(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(console, "info", lines.append)
    monkeypatch.setattr(readiness, "WAITING_EVERY_S", 0.2)

    async def not_yet(ep, timeout):
        return [readiness.Check(name="health", ok=True, detail="200"),
                readiness.Check(name="model", ok=False, detail="llama-3.1-8b not listed yet")], False

    monkeypatch.setattr(readiness, "_checks", not_yet)
    ep = Endpoint(url="http://127.0.0.1:9", model="llama-3.1-8b")
    report = asyncio.run(readiness.await_ready(ep, "llama8b", timeout_s=1.0, interval_s=0.05))
    assert not report.ready
    waiting = [ln for ln in lines if ln.startswith("[llama8b] waiting for readiness:")]
    assert 2 <= len(waiting) <= 6, lines
    assert all("(model: llama-3.1-8b not listed yet)" in ln for ln in waiting)
