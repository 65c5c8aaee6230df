"""The not-ready report of `serve` names the unit's state and its last log lines, read over SSH on the head."""

from __future__ import annotations

from types import SimpleNamespace

from gridready.stages import fabric
from gridready.stages.fabric import CommandResult
from gridready.stages.serve.verify import unit_name, unit_probes


class FakeRunner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def run(self, host: str, argv: list[str], timeout: float) -> CommandResult:
        self.calls.append((host, list(argv)))
        if argv[0] == "systemctl":
            return CommandResult(rc=3, stdout="activating\n")
        return CommandResult(rc=0, stdout="\n".join(f"line {i}" for i in range(30)) + "\n")


def test_unit_names_follow_the_roles():
    assert unit_name(SimpleNamespace(name="llama8b-vllm", engine="vllm")) == "vllm-llama8b-vllm"
    assert unit_name(SimpleNamespace(name="t", engine="triton-trtllm")) == "gridready-triton-t"


def test_state_and_last_20_log_lines_of_the_unit_on_the_head(monkeypatch):
    fake = FakeRunner()
    monkeypatch.setattr(fabric.SshRunner, "from_inventory", classmethod(lambda cls, inv: fake))
    state, logs = unit_probes(object(), "node1", "vllm-llama8b")
    assert state() == "vllm-llama8b on node1: activating"
    assert logs() == [f"line {i}" for i in range(10, 30)]
    assert fake.calls[0] == ("node1", ["systemctl", "is-active", "vllm-llama8b"])
    assert fake.calls[1][1][:3] == ["journalctl", "-u", "vllm-llama8b"]
