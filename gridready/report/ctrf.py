"""CTRF (Common Test Report Format, https://ctrf.io): one test per node x gate, beside junit.xml.

Statuses map as JUnit's do: a blocking fail or error is `failed`, a skipped gate `skipped`, a waived failure or a
warning `passed` with the waiver or warning in `rawStatus` and `message` (it does not block certification).
Gates record no duration of their own: `duration` is 0 and the probe's timings stay in certification.json.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from importlib import metadata
from typing import Any

from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.result import GateResult, GateStatus

SPEC_VERSION = "0.0.0"


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


def _test(node: NodeVerdict, gate: str, results: list[GateResult]) -> dict[str, Any]:
    worst = node.worst(gate)
    blocking = [r for r in results if r.blocks_certification]
    status = "failed" if blocking else "skipped" if worst is GateStatus.SKIPPED else "passed"
    raw = (worst.value if worst else "other") + (" waived" if any(r.waived for r in results) else "")
    test: dict[str, Any] = {
        "name": f"{node.node} {gate}", "status": status, "duration": 0, "suite": [node.node],
        "rawStatus": raw, "type": "certification", "tags": [gate],
        "labels": {"node": node.node, "gate": gate, "profile": node.profile},
        "stdout": [f"[{r.status.value}{' waived' if r.waived else ''}] {r.reason}" for r in results],
    }
    if blocking:
        test["message"] = blocking[0].reason
    elif worst is GateStatus.WARN or any(r.waived for r in results):
        test["message"] = next(r.reason for r in results if r.status is not GateStatus.PASS)
    return test


def ctrf_report(fleet: FleetVerdict) -> dict[str, Any]:
    tests = []
    for node in fleet.nodes.values():
        by_gate: OrderedDict[str, list[GateResult]] = OrderedDict()
        for r in node.gates:
            by_gate.setdefault(r.gate, []).append(r)
        tests += [_test(node, gate, results) for gate, results in by_gate.items()]
    start = min((_ms(n.judged_at) for n in fleet.nodes.values()), default=_ms(fleet.judged_at))
    counts = {k: sum(t["status"] == k for t in tests) for k in ("passed", "failed", "skipped", "pending", "other")}
    try:
        version = metadata.version("gridready")
    except metadata.PackageNotFoundError:
        version = "0"
    return {
        "reportFormat": "CTRF", "specVersion": SPEC_VERSION, "timestamp": fleet.judged_at,
        "generatedBy": "gridready certify",
        "results": {
            "tool": {"name": "gridready", "version": version},
            "summary": {"tests": len(tests), **counts, "suites": len(fleet.nodes), "start": start,
                        "stop": max(start, _ms(fleet.judged_at))},
            "tests": tests,
        },
        "extra": {"customer": fleet.customer, "run_id": fleet.run_id, "status": fleet.status,
                  "certified": fleet.certified, "quarantined": sorted(fleet.quarantined)},
    }
