"""JUnit XML: one <testsuite> per node, one <testcase> per node x gate (per-GPU results folded into it).

Written suite by suite: the totals on <testsuites> come from a first, cheap pass over the statuses, so no fleet's
whole XML tree is held in memory."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from gridready.artifacts import open_atomic
from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.result import GateResult, GateStatus
from gridready.report.worst import gate_outcome, results_by_gate, worst_by_gate

_KEYS = ("tests", "failures", "errors", "skipped")


def _case(node: NodeVerdict, gate: str, results: list[GateResult], worst: GateStatus | None) -> ET.Element:
    case = ET.Element("testcase", classname=f"gridready.certify.{node.node}", name=gate)
    outcome = gate_outcome(worst, results)
    lines = "\n".join(f"[{r.status.value}{' waived' if r.waived else ''}] {r.reason}"
                      + (f" (evidence: {r.evidence})" if r.evidence else "") for r in results)
    if outcome in ("error", "failure"):
        first = next(r for r in results if r.blocks_certification)
        el = ET.SubElement(case, outcome, message=first.reason[:500], type=first.status.value)
        el.text = lines
    elif outcome == "skipped":
        ET.SubElement(case, "skipped", message=results[0].reason[:500])
    else:
        ET.SubElement(case, "system-out").text = lines
    return case


def _counts(node: NodeVerdict) -> dict[str, int]:
    worst = worst_by_gate(node)
    counts = dict.fromkeys(_KEYS, 0)
    for gate, results in results_by_gate(node).items():
        outcome = gate_outcome(worst.get(gate), results)
        counts["tests"] += 1
        counts["failures"] += outcome == "failure"
        counts["errors"] += outcome == "error"
        counts["skipped"] += outcome == "skipped"
    return counts


def _suite(node: NodeVerdict) -> str:
    worst = worst_by_gate(node)
    suite = ET.Element("testsuite", name=node.node, timestamp=node.judged_at, hostname=node.node)
    for gate, results in results_by_gate(node).items():
        suite.append(_case(node, gate, results, worst.get(gate)))
    for k, v in _counts(node).items():
        suite.set(k, str(v))
    ET.indent(suite, level=1)
    return "  " + ET.tostring(suite, encoding="unicode") + "\n"


def junit_chunks(fleet: FleetVerdict) -> Iterator[str]:
    totals = dict.fromkeys(_KEYS, 0)
    for node in fleet.nodes.values():
        for k, v in _counts(node).items():
            totals[k] += v
    root = ET.Element("testsuites", {"name": "gridready certify", **{k: str(v) for k, v in totals.items()}})
    if not fleet.nodes:
        yield '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
        return
    head = ET.tostring(root, encoding="unicode").removesuffix(" />")
    yield f'<?xml version="1.0" encoding="UTF-8"?>\n{head}>\n'
    for node in fleet.nodes.values():
        yield _suite(node)
    yield "</testsuites>\n"


def junit_xml(fleet: FleetVerdict) -> str:
    return "".join(junit_chunks(fleet))


def write_junit(fleet: FleetVerdict, path: Path) -> Path:
    with open_atomic(path) as out:
        out.writelines(junit_chunks(fleet))
    return path
