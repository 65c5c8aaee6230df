"""CTRF (Common Test Report Format, https://ctrf.io): one test per node x gate, beside junit.xml.

Statuses map as JUnit's do: a blocking fail or error is `failed`, a skipped gate `skipped`, a waived failure or a
warning `passed` with the waiver or warning in `rawStatus` and `message` (it does not block certification).
Gates record no duration of their own: `duration` is 0 and the probe's timings stay in certification.json.
Written test by test (the summary's counts from a first, cheap pass), so no fleet's every test is in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from gridready.artifacts import open_atomic
from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.result import GateResult, GateStatus
from gridready.report.worst import gate_outcome, results_by_gate, worst_by_gate

SPEC_VERSION = "0.0.0"
_STATUS = {"failure": "failed", "error": "failed", "skipped": "skipped", "passed": "passed"}


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


def _test(node: NodeVerdict, gate: str, results: list[GateResult], worst: GateStatus | None) -> dict[str, Any]:
    status = _STATUS[gate_outcome(worst, results)]
    raw = (worst.value if worst else "other") + (" waived" if any(r.waived for r in results) else "")
    test: dict[str, Any] = {
        "name": f"{node.node} {gate}", "status": status, "duration": 0, "suite": [node.node],
        "rawStatus": raw, "type": "certification", "tags": [gate],
        "labels": {"node": node.node, "gate": gate, "profile": node.profile},
        "stdout": [f"[{r.status.value}{' waived' if r.waived else ''}] {r.reason}" for r in results],
    }
    if status == "failed":
        test["message"] = next(r.reason for r in results if r.blocks_certification)
    elif worst is GateStatus.WARN or any(r.waived for r in results):
        test["message"] = next(r.reason for r in results if r.status is not GateStatus.PASS)
    return test


def _tests(node: NodeVerdict) -> Iterator[dict[str, Any]]:
    worst = worst_by_gate(node)
    for gate, results in results_by_gate(node).items():
        yield _test(node, gate, results, worst.get(gate))


def _head(fleet: FleetVerdict) -> dict[str, Any]:
    """The report without its tests: the summary counts every node's gates by outcome."""
    counts = dict.fromkeys(("passed", "failed", "skipped", "pending", "other"), 0)
    for node in fleet.nodes.values():
        worst = worst_by_gate(node)
        for gate, results in results_by_gate(node).items():
            counts[_STATUS[gate_outcome(worst.get(gate), results)]] += 1
    start = min((_ms(n.judged_at) for n in fleet.nodes.values()), default=_ms(fleet.judged_at))
    try:
        version = metadata.version("gridready")
    except metadata.PackageNotFoundError:
        version = "0"
    return {
        "reportFormat": "CTRF", "specVersion": SPEC_VERSION, "timestamp": fleet.judged_at,
        "generatedBy": "gridready certify",
        "results": {
            "tool": {"name": "gridready", "version": version},
            "summary": {"tests": sum(counts.values()), **counts, "suites": len(fleet.nodes), "start": start,
                        "stop": max(start, _ms(fleet.judged_at))},
            "tests": [],
        },
        "extra": {"customer": fleet.customer, "run_id": fleet.run_id, "status": fleet.status,
                  "certified": fleet.certified, "quarantined": sorted(fleet.quarantined)},
    }


def ctrf_report(fleet: FleetVerdict) -> dict[str, Any]:
    doc = _head(fleet)
    doc["results"]["tests"] = [t for node in fleet.nodes.values() for t in _tests(node)]
    return doc


def ctrf_chunks(fleet: FleetVerdict) -> Iterator[str]:
    """ctrf.json in pieces: the report around its tests, then one test per line."""
    head = json.dumps(_head(fleet))
    before, after = head.split('"tests": []', 1)
    yield before + '"tests": ['
    sep = "\n"
    for node in fleet.nodes.values():
        for t in _tests(node):
            yield sep + json.dumps(t)
            sep = ",\n"
    yield "\n]" + after + "\n"


def write_ctrf(fleet: FleetVerdict, path: Path) -> Path:
    with open_atomic(path) as out:
        out.writelines(ctrf_chunks(fleet))
    return path
