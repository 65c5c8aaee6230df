"""Every report format from a two-node fleet (one certified, one failed): JUnit parses, Prometheus text parses,
plots are PNGs, quarantine.yml lists the failed node, certification.json round-trips through its schema."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gridready.certify.judge import FleetVerdict, NodeVerdict, judge_fleet, judge_node
from gridready.report import write_all
from gridready.report.fleet_json import FleetReport, load_fleet
from tests.unit.certify.fixtures_io import group, probe_quick, spec

S = spec(not_applicable=["dcgm", "peermem"])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetVerdict, dict[str, Path]]:
    bad = copy.deepcopy(probe_quick())
    bad["torch"]["gpus"][0]["h2d_gbps"] = 12.0
    nodes = [judge_node(S, group(), probe_quick(), node="gpu-a", evidence="probes/gpu-a/probe.json"),
             judge_node(S, group(), bad, node="gpu-b", evidence="probes/gpu-b/probe.json")]
    fleet = judge_fleet(S, nodes, customer="acme", run_id="20261130T030000Z-abcd")
    out = tmp_path_factory.mktemp("certify")
    return fleet, write_all(fleet, out, command="invoke certify")


def test_junit_one_testcase_per_node_and_gate(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    fleet, paths = written
    root = ET.parse(paths["junit"]).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["gpu-a", "gpu-b"]
    for s, v in zip(suites, fleet.nodes.values(), strict=True):
        names = [c.get("name") for c in s.findall("testcase")]
        assert names == list(dict.fromkeys(r.gate for r in v.gates))  # one per gate, not per GPU
    fails = [c for c in suites[1].findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in fails] == ["h2d_bandwidth"]
    assert "GPU 0" in (fails[0].find("failure").get("message") or "")  # type: ignore[union-attr]
    # skipped per node: dcgm, peermem, and sdc and training_goodput (the capture predates those probe steps)
    assert int(root.get("failures") or 0) == 1 and int(root.get("skipped") or 0) == 8


def test_prometheus_textfile_parses(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    _, paths = written
    fams = {f.name: f for f in text_string_to_metric_families(paths["metrics"].read_text())}
    certified = {s.labels["node"]: s.value for s in fams["gridready_node_certified"].samples}
    assert certified == {"gpu-a": 1.0, "gpu-b": 0.0}
    status = {(s.labels["node"], s.labels["gate"]): s.labels["status"] for s in fams["gridready_gate_status"].samples}
    assert status[("gpu-b", "h2d_bandwidth")] == "fail" and status[("gpu-a", "dcgm")] == "skipped"
    flops = [s for s in fams["gridready_gpu_gemm_flops"].samples if s.labels["dtype"] == "bf16"]
    assert all(7e14 < s.value < 9e14 for s in flops)  # base units: FLOP/s
    busbw = fams["gridready_nccl_allreduce_busbw_bytes_per_second"].samples
    assert all(3e11 < s.value < 4e11 for s in busbw)


def test_plots_and_markdown(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    _, paths = written
    for key in ("plot:busbw", "plot:per_gpu"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["report_md"].read_text()
    assert "| gpu-b | h2d_bandwidth | GPU 0 | fail |" in md and "probes/gpu-b/probe.json" in md
    assert "![all-reduce busbw vs size](busbw.png)" in md
    html = paths["report_html"].read_text()
    assert html.startswith("<!doctype html>") and "busbw.png" in html and "h2d_bandwidth" in html


def test_quarantine_and_certification_json(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    fleet, paths = written
    q = yaml.safe_load(paths["quarantine_yml"].read_text())
    assert list(q["all"]["children"]["gridready_quarantine"]["hosts"]) == ["gpu-b"]
    cert = NodeVerdict.model_validate_json(paths["certification:gpu-a"].read_text())
    assert cert.certified and cert.valid_until
    report = FleetReport.model_validate(json.loads(paths["report_json"].read_text()))
    assert report.certified == ["gpu-a"] and report.exit_code == fleet.exit_code == 0
    assert report.nodes["gpu-b"].failing == ["h2d_bandwidth"] and not report.nodes["gpu-b"].certified
    assert report.nodes["gpu-a"].valid_until == cert.valid_until
    assert load_fleet(paths["report_json"].parent) == fleet  # report.json and the node files: the whole verdict
