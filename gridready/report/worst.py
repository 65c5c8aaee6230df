"""Each gate's worst status on a node, in one pass over its results (not gates x results)."""

from __future__ import annotations

from gridready.certify.judge import NodeVerdict
from gridready.certify.result import GateResult, GateStatus

RANK = {GateStatus.ERROR: 0, GateStatus.FAIL: 1, GateStatus.WARN: 2, GateStatus.PASS: 3, GateStatus.SKIPPED: 4}


def worst_by_gate(v: NodeVerdict) -> dict[str, GateStatus]:
    """NodeVerdict.worst for every gate at once, gates in the order of their first result."""
    out: dict[str, GateStatus] = {}
    for r in v.gates:
        if r.gate not in out or RANK[r.status] < RANK[out[r.gate]]:
            out[r.gate] = r.status
    return out


def results_by_gate(node: NodeVerdict) -> dict[str, list[GateResult]]:
    by_gate: dict[str, list[GateResult]] = {}
    for r in node.gates:
        by_gate.setdefault(r.gate, []).append(r)
    return by_gate


def gate_outcome(worst: GateStatus | None, results: list[GateResult]) -> str:
    """failure, error, skipped or passed: what a node's gate is as one test case (JUnit, CTRF)."""
    blocking = [r for r in results if r.blocks_certification]
    if blocking:
        return "error" if any(r.status is GateStatus.ERROR for r in blocking) else "failure"
    return "skipped" if worst is GateStatus.SKIPPED else "passed"
