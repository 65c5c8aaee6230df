"""Report values and charts from the committed H200 verdicts (docs/examples/h200x1, h200x2): measured values with
nested dicts, lists, sets and None read as words (no Python repr), the per-GPU charts draw each gate's floor as a
labelled line taken from the results' expected values, and a one-GPU node gets a line saying why there is no
busbw chart instead of an empty one."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from gridready.certify.judge import FleetVerdict
from gridready.certify.result import Expected, GateStatus
from gridready.report import write_all
from gridready.report.humanize import measured_text
from gridready.report.plots import busbw_plot, per_gpu_plot
from tests.unit.report.test_committed_reports_in_browser import reprs

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def example(name: str) -> FleetVerdict:
    return FleetVerdict.model_validate(json.loads((EXAMPLES / name / "report.json").read_text()))


def drawn(fleet: FleetVerdict, plot: object, path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """The axes of the figure `plot` saves (captured at savefig)."""
    seen: list = []
    orig = Figure.savefig

    def keep(self: Figure, *a: object, **k: object) -> None:
        seen.extend(self.axes)
        orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    assert plot(fleet, path) == path  # type: ignore[operator]
    return seen


def floors(ax: object, vertical: bool = False) -> dict[str, float]:
    """label -> position of every straight floor line of an axes."""
    out = {}
    for line in ax.get_lines():  # type: ignore[attr-defined]
        data = line.get_xdata() if vertical else line.get_ydata()
        if line.get_label().startswith(("floor", "bf16 floor", "fp8 floor")) and data[0] == data[1]:
            out[line.get_label()] = float(data[0])
    return out


def test_nested_measured_values_read_as_words(tmp_path: Path) -> None:
    fleet = example("h200x2")
    node = fleet.nodes["localhost"]
    remap = next(r for r in node.gates if r.gate == "row_remap")
    remap.status = GateStatus.FAIL
    remap.measured = {"remap": {"correctable": 0, "pending": True}, "banks": [None, 2], "rows": {7, 3},
                      "history": [{"bank": 1, "row": 7}, {"bank": 2, "row": None}]}
    link = next(r for r in node.gates if r.gate == "nvlink")
    link.status = GateStatus.FAIL
    link.measured = {"active_links": 0, "inactive": [], "slow": [], "errors": None, "errors_after_load": None}
    assert measured_text(remap) == ("remap (correctable 0, pending yes), banks (-, 2), rows (3, 7), "
                                    "history (bank 1, row 7; bank 2)")
    assert measured_text(link) == "active_links 0"  # the compared count stays even when it is 0
    paths = write_all(fleet, tmp_path, command="test")
    for key in ("report_md", "report_html"):
        text = html.unescape(paths[key].read_text())
        assert reprs(text) == [] and "None" not in text and "{3, 7}" not in text, key


def test_per_gpu_panels_draw_the_gates_floors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = example("h200x2")
    for r in fleet.nodes["localhost"].gates:
        if r.gate == "hbm_bandwidth" and r.expected:
            r.expected = Expected(floor=3.7, source="spec")  # the floor comes from the results, not the catalog
    gemm, hbm, host = drawn(fleet, per_gpu_plot, tmp_path / "p.png", monkeypatch)
    assert floors(gemm) == {"bf16 floor 600 TFLOP/s": 600.0, "fp8 floor 1020 TFLOP/s": 1020.0}
    assert floors(hbm) == {"floor 3.7 TB/s": 3.7}
    assert floors(host) == {"floor 48 GB/s": 48.0}  # one floor for both directions (the h2d_bandwidth gate)
    assert hbm.get_ylim()[1] > 3.7 and "floor 3.7 TB/s" in [t.get_text() for t in hbm.get_legend().get_texts()]


def test_a_fleets_histograms_draw_the_floors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = example("h200x2").nodes["localhost"]
    fleet = example("h200x2")
    fleet.nodes = {f"gpu{i:03d}": one.model_copy(update={"node": f"gpu{i:03d}"}) for i in range(60)}  # 120 GPUs
    gemm, hbm, host = drawn(fleet, per_gpu_plot, tmp_path / "p.png", monkeypatch)
    assert "120 GPUs" in hbm.get_title()
    assert floors(gemm, vertical=True) == {"bf16 floor 600 TFLOP/s": 600.0, "fp8 floor 1020 TFLOP/s": 1020.0}
    assert floors(hbm, vertical=True) == {"floor 3.3 TB/s": 3.3}
    assert floors(host, vertical=True) == {"floor 48 GB/s": 48.0}


def test_one_gpu_node_says_why_there_is_no_busbw_chart(tmp_path: Path) -> None:
    fleet = example("h200x1")
    assert busbw_plot(fleet, tmp_path / "b.png") is None and not (tmp_path / "b.png").exists()
    paths = write_all(fleet, tmp_path / "r", command="test")
    md, page = paths["report_md"].read_text(), paths["report_html"].read_text()
    why = "all-reduce busbw vs size: not drawn: one GPU per node"
    assert f"*{why}" in md and f'<p class="note">{why}' in page
    assert "busbw.png" not in md + page and "plot:busbw" not in paths
    two = write_all(example("h200x2"), tmp_path / "two", command="test")
    assert "not drawn" not in two["report_md"].read_text() and "plot:busbw" in two


def test_no_per_gpu_figures_say_so(tmp_path: Path) -> None:
    fleet = example("h200x2")
    for v in fleet.nodes.values():
        v.figures["gpus"] = []
    md = write_all(fleet, tmp_path, command="test")["report_md"].read_text()
    assert "*per-GPU compute and bandwidth: not drawn: no node recorded per-GPU" in md
