"""`invoke quarantine --slurm` (issue 33, verbs: the quarantine outputs applied as a command, not a file to copy):
the ledger's verdicts become Slurm drains and resumes of gridready's own, and nothing else Slurm holds is touched.
scontrol answers as scontrol(1) `show node -o` prints: one line of Key=Value pairs, Reason= last."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gridready import inventory, ledger
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.stages import slurm_sync

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _line(node: str, state: str, reason: str = "") -> str:
    return (f"NodeName={node} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 Gres=gpu:h200:8 NodeAddr={node} "
            f"State={state} ThreadsPerCore=2 Partitions=gpu" + (f" Reason={reason}" if reason else ""))


class Scontrol:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes, self.calls = nodes, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[:3] == ["scontrol", "show", "node"]:
            node = argv[-1]
            return (0, self.nodes[node] + "\n") if node in self.nodes else (1, f"Node {node} not found\n")
        return 0, ""


def _book(inv, verdicts: dict[str, str], drained: set[str] = frozenset()) -> ledger.Ledger:
    book = ledger.Ledger(customer=inv.customer)
    for node, verdict in verdicts.items():
        book.nodes[node] = ledger.NodeEntry(
            verdict=verdict, run_id="r1", judged_at=(NOW - timedelta(hours=1)).isoformat(), profile="standard",
            valid_until=(NOW + timedelta(days=6)).isoformat() if verdict == "certified" else None,
            failing_gates=[] if verdict == "certified" else ["xid"], summary="s.json",
            drained=node in drained, drain_reason="xid 79" if node in drained else None)
    return book


def test_the_plan_drains_what_may_not_serve_and_resumes_only_its_own_drains() -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    a, b, c, d = inv.gpu_hosts()
    book = _book(inv, {a: "certified", b: "quarantined", c: "certified", d: "certified"}, drained={d})
    slurm = Scontrol({a: _line(a, "IDLE+DRAIN", "gridready: quarantined (xid)"),  # returned: resume
                      b: _line(b, "IDLE"),  # quarantined now: drain
                      c: _line(c, "MIXED+DRAIN", "maintenance window [ops@2026-12-01T08:00:00]"),  # not ours
                      d: _line(d, "DRAIN", "someone else")})  # drained by the watcher, Slurm already drained
    commands, notes = slurm_sync.plan(inv, book, lambda n: slurm(["scontrol", "show", "node", "-o", n]), now=NOW)
    assert commands == [["scontrol", "update", f"nodename={a}", "state=resume"],
                        ["scontrol", "update", f"nodename={b}", "state=drain",
                         "reason=gridready: quarantined (xid)"]]
    assert any(n.startswith(f"{c}: certified, but drained by someone else") for n in notes)
    assert any(n.startswith(f"{d}: already drained by someone else") for n in notes)


def test_a_node_slurm_does_not_know_is_reported(tmp_path: Path) -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    book = _book(inv, dict.fromkeys(inv.gpu_hosts(), "quarantined"))
    commands, notes = slurm_sync.plan(inv, book, lambda n: (1, f"Node {n} not found\n"), now=NOW)
    assert commands == [] and all("not a Slurm node (Node " in n for n in notes)


def test_check_mode_runs_nothing_and_a_run_reports_each_command(tmp_path: Path) -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    a, *_ = inv.gpu_hosts()
    book = _book(inv, {a: "quarantined"})
    root = tmp_path / "artifacts"
    ledger.update(root, inv.customer, lambda b: book)
    slurm = Scontrol({a: _line(a, "IDLE")})
    dry = slurm_sync.run(inv, RunContext(customer=inv.customer, run_id="r", root=root, check=True), runner=slurm)
    assert [d["ran"] for d in dry["commands"]] == [False]
    assert not [c for c in slurm.calls if c[1] == "update"]
    done = slurm_sync.run(inv, RunContext(customer=inv.customer, run_id="r2", root=root), runner=slurm)
    assert done["commands"][0]["ran"] and done["failed"] == [] and json.dumps(done)
    assert ["scontrol", "update", f"nodename={a}", "state=drain"] == slurm.calls[-1][:4]


def test_without_a_ledger_it_says_so(tmp_path: Path) -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    with pytest.raises(InvalidInput, match="no node in the ledger yet"):
        slurm_sync.run(inv, RunContext(customer=inv.customer, run_id="r", root=tmp_path), runner=Scontrol({}))
