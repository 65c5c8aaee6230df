"""Reports that scale: report.json stays within its budget per node whatever a node's results, the page of a large
fleet is summarised (failures first) so its size does not grow with the fleet, and a fleet judged node by node
through the spill writes the same certification.json files as one judged whole."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gridready.certify.judge import FleetVerdict, NodeVerdict, judge_fleet, judge_node
from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.report import write_all
from tests.unit.certify.fixtures_io import group, probe_quick, spec

S = spec(not_applicable=["dcgm", "peermem"])
BUDGET = 8192  # bytes of report.json per node (issue 50)


def _node(name: str, doc: dict) -> NodeVerdict:
    return judge_node(S, group(), doc, node=name, evidence=f"probes/{name}/probe.json")


def _worst_case(name: str) -> NodeVerdict:
    """A node failing every gate many times over, each with a long reason and a large measurement."""
    v = _node(name, probe_quick())
    long = "the measured figure sits far below the floor the catalog sets for this SKU " * 30
    v.add([GateResult(gate=f"{gate}_{i}", node=name, gpu=i % 8, status=GateStatus.FAIL if i % 2 else GateStatus.ERROR,
                      measured={"sweep": list(range(200))}, expected=Expected(floor=1.0), unit="GB/s",
                      reason=f"{long} ({gate} {i})", evidence=f"probes/{name}/probe.json#{gate}")
           for gate in ("pcie_link", "nvlink", "ecc", "hbm_bandwidth", "nccl_allreduce") for i in range(40)], S)
    return v


def test_report_json_stays_within_its_budget_per_node(tmp_path: Path) -> None:
    nodes = [_worst_case(f"gpu-node-{i:03d}.rack-{i % 7}.example.internal") for i in range(12)]
    fleet = judge_fleet(S, nodes, customer="acme", run_id="r1")
    paths = write_all(fleet, tmp_path)
    size = paths["report_json"].stat().st_size
    assert size <= BUDGET * len(nodes), f"report.json: {size / len(nodes):.0f} bytes per node, budget {BUDGET}"
    report = json.loads(paths["report_json"].read_text())
    line = report["nodes"][nodes[0].node]
    # what a reader of the fleet needs is there, the details are one link away
    assert not line["certified"] and line["valid_until"] is None
    assert {"pcie_link_1", "nvlink_0", "nccl_allreduce_39"} <= set(line["failing"])
    assert (tmp_path / line["certification"]).is_file()
    full = NodeVerdict.model_validate_json((tmp_path / line["certification"]).read_text())
    assert len(full.blocking) == len(nodes[0].blocking) >= 200


def _replicas(base: list[NodeVerdict], n: int) -> FleetVerdict:
    """n nodes cycling through the base verdicts (renamed), judged as one fleet."""
    out = []
    for i in range(n):
        v = base[i % len(base)].model_copy(deep=True)
        v.node = f"n{i:05d}"
        v.gates = [r.model_copy(update={"node": v.node}) for r in v.gates]
        out.append(v)
    return judge_fleet(S, out, customer="acme", run_id="r1", outliers=False, sdc_consensus=False)


@pytest.fixture(scope="module")
def bases() -> list[NodeVerdict]:
    slow = copy.deepcopy(probe_quick())
    slow["torch"]["gpus"][0]["h2d_gbps"] = 12.0
    return [_node("a", probe_quick()), _node("b", probe_quick()), _node("c", probe_quick()), _node("d", slow)]


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large fleet's page at a size a unit test can write: a row per node up to 20 nodes, lists cut at 30."""
    from gridready.report import markdown

    monkeypatch.setattr(markdown, "PER_NODE_UP_TO", 20)
    monkeypatch.setattr(markdown, "ROWS_SHOWN", 30)


@pytest.mark.usefixtures("small_pages")
def test_a_large_fleets_page_does_not_grow_with_the_fleet(bases: list[NodeVerdict], tmp_path: Path) -> None:
    sizes = {}
    for n in (40, 120):
        paths = write_all(_replicas(bases, n), tmp_path / str(n))
        sizes[n] = {k: paths[k].stat().st_size for k in ("report_html", "report_md")}
        page = paths["report_html"].read_text()
        # failures first: the matrix opens with the pattern of the nodes that failed, naming how many
        matrix = page[page.index("<h2>Gates per node</h2>"):]
        assert matrix.index(f"{n // 4} nodes: n00003") < matrix.index(f"{n - n // 4} nodes: n00000")
    for k in ("report_html", "report_md"):
        assert sizes[120][k] < 1.1 * sizes[40][k], (k, sizes)


@pytest.mark.usefixtures("small_pages")
def test_many_distinct_failures_are_cut_with_a_pointer(bases: list[NodeVerdict], tmp_path: Path) -> None:
    fleet = _replicas(bases[3:], 50)  # every node fails h2d_bandwidth, each with its own measured figure
    for i, v in enumerate(fleet.nodes.values()):
        v.gates = [r.model_copy(update={"reason": f"{r.reason} ({i})"}) if r.status is GateStatus.FAIL else r
                   for r in v.gates]
        v.add([], S)
    fleet = judge_fleet(S, list(fleet.nodes.values()), outliers=False, sdc_consensus=False)
    page = write_all(fleet, tmp_path)["report_html"].read_text()
    assert "... and 20 more nodes not certified (report.json lists every node" in page
    # 50 failures, each its own row, and the one warning all nodes share (ACS not readable) as one row
    assert "... and 21 more rows (each node&#x27;s nodes/&lt;node&gt;/certification.json holds every result" in page
    assert page.count("<tr><td>n00") == 2 * 30


def test_a_fleet_judged_node_by_node_writes_the_same_files(bases: list[NodeVerdict], tmp_path: Path) -> None:
    from gridready.report.writer import Spill

    whole = [v.model_copy(deep=True) for v in bases]
    fleet = judge_fleet(S, whole, customer="acme", run_id="r1")
    write_all(fleet, tmp_path / "whole")
    spill = Spill(tmp_path / "streamed")
    slim = [spill.keep(v.model_copy(deep=True)) for v in bases]
    assert all(v.is_slim for v in slim) and sum(len(v.gates) for v in slim) < sum(len(v.gates) for v in bases)
    streamed = judge_fleet(S, slim, customer="acme", run_id="r1")
    write_all(streamed, tmp_path / "streamed", spill=spill)
    for v in bases:
        a = json.loads((tmp_path / "whole" / "nodes" / v.node / "certification.json").read_text())
        b = json.loads((tmp_path / "streamed" / "nodes" / v.node / "certification.json").read_text())
        assert a == b
    assert not (tmp_path / "streamed" / ".verdicts.jsonl").exists()
    assert streamed.quarantined == fleet.quarantined and streamed.certified == fleet.certified
