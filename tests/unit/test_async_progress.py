"""A long async task (the node probe, up to 30 minutes) said nothing until it ended (issue 33, progress): its polls,
ansible-runner's `runner_on_async_poll` events, now print one `running` line per host with the elapsed time, at most
every 30 s on plain output."""

from __future__ import annotations

import pytest

from gridready import ansible, console


def test_polls_become_a_running_line_per_host_every_half_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(console, "info", lines.append)
    monkeypatch.setattr(console, "interactive", lambda: False)  # CI: plain lines
    now = [100.0]
    progress = ansible._Progress("certify (acme)", clock=lambda: now[0])

    def poll(host: str) -> None:
        progress.event({"event": "runner_on_async_poll",
                        "event_data": {"host": host, "task": "Run the probe", "res": {"started": 1, "finished": 0}}})

    for t in range(0, 95, 5):  # a poll every 5 s for 90 s on two hosts
        now[0] = 100.0 + t
        poll("node1")
        poll("node2")
    assert lines == [f"[{h}] running: Run the probe ({s} s)" for s in (30, 60, 90) for h in ("node1", "node2")]
    progress.event({"event": "runner_on_ok", "event_data": {"host": "node1", "task": "Run the probe",
                                                            "res": {"changed": False}}})
    assert lines[-1] == "[node1] ok: Run the probe"
