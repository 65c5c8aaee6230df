"""Reports as a person reads them: SIMULATED said in every format when any evidence was simulated, measured and
expected written out ("Gen4 x8", ">= 330 GB/s"), the summary (counts per gate and status, nodes not certified with
their reasons) before the node x gate matrix, and the busbw floor inside the plot's axis. The fleet comes from the
simulator's own tools (sandbox.probe_docs), one node with a PCIe link trained at Gen4 x8."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridready import inventory
from gridready.certify.judge import FleetVerdict, judge_fleet, judge_node
from gridready.report import write_all
from gridready.report.plots import busbw_plot
from sandbox.probe_docs import fleet_docs


def judged(n: int, faulted_every: int) -> FleetVerdict:
    inv = inventory.load("sandbox")
    # sandbox.probe_docs runs the simulated tools in-process, without the probe runtime: no torch section
    spec = inv.spec.certification.model_copy(update={"not_applicable": [
        *inv.spec.certification.not_applicable, "gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth",
        "peer_bandwidth"]})
    group = inv.spec.node_groups[0]
    return judge_fleet(spec, [judge_node(spec, group, d, node=h, node_group=group.name, evidence=f"{h}.json")
                              for h, d in fleet_docs(n, faulted_every)], customer="sandbox", run_id="r1")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetVerdict, dict[str, Path]]:
    fleet = judged(4, 4)  # gpu0003 carries the first fault: GPU 3's PCIe link at Gen4 x8
    return fleet, write_all(fleet, tmp_path_factory.mktemp("readable"), command="invoke certify")


def test_every_format_says_simulated(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    fleet, paths = written
    assert fleet.simulated == ["gpu0000", "gpu0001", "gpu0002", "gpu0003"]
    assert json.loads(paths["report_json"].read_text())["simulated"] == fleet.simulated
    assert "sysfs" in fleet.nodes["gpu0000"].simulated and "nvidia_smi_q" in fleet.nodes["gpu0000"].simulated
    for key in ("report_md", "report_html"):
        text = paths[key].read_text()
        assert text.count("SIMULATED") >= 2, key  # at the top and again under the figures


def test_real_evidence_is_not_called_simulated() -> None:
    from tests.unit.certify.fixtures_io import group, probe_quick, spec

    v = judge_node(spec(), group(), probe_quick(), node="gpu-a")
    fleet = judge_fleet(spec(), [v])
    assert v.simulated == [] and fleet.simulated == []


def test_failing_pcie_link_reads_as_a_person_writes_it(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    _, paths = written
    md = paths["report_md"].read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| gpu0003 | pcie_link | GPU 3 | fail |"))
    assert "| Gen4 x8 (capable Gen5 x16) | Gen5 x16 (catalog: H200-SXM-141GB) |" in row
    assert "{" not in md.split("## Gates per node")[0]  # no Python dict anywhere above the matrix
    html = paths["report_html"].read_text()
    assert "Gen4 x8 (capable Gen5 x16)" in html and "{&#x27;equals&#x27;" not in html


def test_summary_comes_before_the_matrix(written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    _, paths = written
    md = paths["report_md"].read_text()
    summary, matrix = md.index("## Summary"), md.index("## Gates per node")
    assert summary < md.index("### Gates by status") < md.index("### Nodes not certified") < matrix
    counts = md[md.index("### Gates by status"):md.index("### Nodes not certified")]
    assert "| pcie_link | 3 |  | 1 |  |  |" in counts  # 3 pass, 1 fail
    nodes = md[md.index("### Nodes not certified"):md.index("## Failed, erroring")]
    assert "| gpu0003 | pcie_link: GPU 3 (0000:5d:00.0): link trained at x8, expected x16" in nodes
    assert "gpu0000" not in nodes


def test_busbw_floor_is_on_the_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    written: tuple[FleetVerdict, dict[str, Path]]) -> None:
    from matplotlib.figure import Figure

    fleet, _ = written
    seen: dict[str, tuple[float, float]] = {}
    orig = Figure.savefig

    def keep(self: Figure, *a: object, **k: object) -> None:
        seen["ylim"] = self.axes[0].get_ylim()
        orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    busbw_plot(fleet, tmp_path / "b.png")
    lo, hi = seen["ylim"]
    assert lo <= 0 and hi > 330 * 1.05  # floor 330 GB/s (catalog, 8 x H200 ring) inside, with room above


def test_certify_summary_says_simulated(tmp_path: Path) -> None:
    from gridready.artifacts import RunContext
    from gridready.contracts import CertifySummary
    from gridready.stages import certify as certify_stage

    fleet = judged(2, 50)
    ctx = RunContext(customer="sandbox", run_id="20261201T040000Z-sim", root=tmp_path, check=False)
    certify_stage.write_summary(inventory.load("sandbox"), ctx, fleet)
    summary = CertifySummary.model_validate_json((ctx.stage_dir("certify") / "summary.json").read_text())
    assert summary.simulated == ["gpu0000", "gpu0001"]
    assert summary.messages[0].startswith("SIMULATED: the evidence of 2 node(s)")
