"""JUnit XML: one <testsuite> per node, one <testcase> per node x gate (per-GPU results folded into it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import OrderedDict

from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.result import GateResult, GateStatus


def _case(node: NodeVerdict, gate: str, results: list[GateResult]) -> ET.Element:
    case = ET.Element("testcase", classname=f"gridready.certify.{node.node}", name=gate)
    worst = node.worst(gate)
    blocking = [r for r in results if r.blocks_certification]
    lines = "\n".join(f"[{r.status.value}{' waived' if r.waived else ''}] {r.reason}"
                      + (f" (evidence: {r.evidence})" if r.evidence else "") for r in results)
    if blocking:
        tag = "error" if any(r.status is GateStatus.ERROR for r in blocking) else "failure"
        el = ET.SubElement(case, tag, message=blocking[0].reason[:500], type=blocking[0].status.value)
        el.text = lines
    elif worst is GateStatus.SKIPPED:
        ET.SubElement(case, "skipped", message=results[0].reason[:500])
    else:
        ET.SubElement(case, "system-out").text = lines
    return case


def junit_xml(fleet: FleetVerdict) -> str:
    root = ET.Element("testsuites", name="gridready certify")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for node in fleet.nodes.values():
        by_gate: OrderedDict[str, list[GateResult]] = OrderedDict()
        for r in node.gates:
            by_gate.setdefault(r.gate, []).append(r)
        suite = ET.SubElement(root, "testsuite", name=node.node, timestamp=node.judged_at,
                              hostname=node.node)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for gate, results in by_gate.items():
            case = _case(node, gate, results)
            suite.append(case)
            counts["tests"] += 1
            for tag, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
                counts[key] += case.find(tag) is not None
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
