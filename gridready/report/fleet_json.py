"""report.json: what a person or a dashboard reads about the fleet, a few lines per node (verdict, failing gates,
expiry, the link to the node's certification.json), within a budget per node that holds at any fleet size; every
result and figure of a node stays in its own nodes/<node>/certification.json.

`load_fleet` reads a report folder back into the judged fleet (FleetVerdict): report.json of schema 2 with the
per-node files beside it, or a schema 1 report.json, which held every node's verdict inline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gridready.certify.judge import FLEET_SCHEMA, FleetVerdict, NodeVerdict
from gridready.certify.result import GateStatus
from gridready.yamlio import MAX_ARTIFACT_BYTES, read_capped

REPORT_SCHEMA: Literal["gridready.fleet-report/2"] = "gridready.fleet-report/2"
NODE_BUDGET_BYTES = 8192  # report.json per node at most, whatever the node's results (tests hold it)
LINES_SHOWN = 4  # blocking lines per node; the rest are counted, and listed in certification.json
LINE_CHARS = 240  # a blocking line or a quarantine reason is cut here
NODES = "nodes"
CERTIFICATION = "certification.json"


def certification_path(out_dir: Path, node: str) -> Path:
    return out_dir / NODES / node / CERTIFICATION


def _cut(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


class NodeLine(BaseModel):
    """One node in report.json."""

    model_config = ConfigDict(extra="forbid")

    certified: bool
    node_group: str | None = None
    sku: str
    judged_at: str
    valid_until: str | None = Field(None, description="certified nodes only: when the certification expires")
    failing: list[str] = Field(default_factory=list, description="gates with a result that blocks certification")
    warning: list[str] = Field(default_factory=list, description="gates with a warning (not blocking)")
    blocking: list[str] = Field(default_factory=list, description=f"the first {LINES_SHOWN} blocking lines")
    blocking_more: int = Field(0, description="blocking lines not shown here (all are in the certification)")
    simulated: bool = False
    certification: str = Field(description="the node's full verdict, relative to report.json")


class FleetReport(BaseModel):
    """report.json, schema 2: the fleet's decision and one NodeLine per node judged in this run."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["gridready.fleet-report/2"] = REPORT_SCHEMA
    customer: str | None = None
    run_id: str | None = None
    judged_at: str
    profile: str
    failure_policy: str
    min_certified_nodes: int
    certified: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict, description="node -> first blocking reason")
    reused: list[str] = Field(default_factory=list, description="nodes skipped: certification still valid")
    exit_code: int
    status: Literal["certified", "degraded", "not-certified"]
    messages: list[str] = Field(default_factory=list)
    simulated: list[str] = Field(default_factory=list, description="nodes judged on simulated evidence")
    nodes: dict[str, NodeLine] = Field(default_factory=dict)


def node_line(v: NodeVerdict) -> NodeLine:
    failing = [r.gate for r in v.gates if r.blocks_certification]
    warning = [r.gate for r in v.gates if r.status is GateStatus.WARN and not r.waived]
    return NodeLine(certified=v.certified, node_group=v.node_group, sku=v.sku, judged_at=v.judged_at,
                    valid_until=v.valid_until, failing=list(dict.fromkeys(failing)),
                    warning=list(dict.fromkeys(warning)), blocking=[_cut(b) for b in v.blocking[:LINES_SHOWN]],
                    blocking_more=max(0, len(v.blocking) - LINES_SHOWN), simulated=bool(v.simulated),
                    certification=f"{NODES}/{v.node}/{CERTIFICATION}")


def fleet_report(fleet: FleetVerdict) -> FleetReport:
    head = fleet.model_dump(exclude={"schema_version", "nodes", "quarantined"})
    return FleetReport(**head, quarantined={n: _cut(why) for n, why in fleet.quarantined.items()},
                       nodes={n: node_line(v) for n, v in fleet.nodes.items()})


def load_fleet(folder: Path) -> FleetVerdict:
    """The judged fleet of a report folder: report.json with each node's certification.json (schema 2), or the
    verdicts inline (schema 1)."""
    doc = json.loads(read_capped(folder / "report.json", MAX_ARTIFACT_BYTES))
    if doc.get("schema_version") == FLEET_SCHEMA:
        return FleetVerdict.model_validate(doc)
    report = FleetReport.model_validate(doc)
    nodes = {}
    for n in report.nodes:
        if "/" in n or n in (".", ".."):
            raise ValueError(f"{folder / 'report.json'}: nodes: {n!r} is not a host name")
        nodes[n] = NodeVerdict.model_validate_json(read_capped(certification_path(folder, n), MAX_ARTIFACT_BYTES))
    return FleetVerdict(**report.model_dump(exclude={"schema_version", "nodes"}), nodes=nodes)
