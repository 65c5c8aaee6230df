"""The committed certification examples render (issue 33, examples that render): every image a report.html shows is
committed beside it, and the reports are what the current renderer makes of the example's own verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import render_examples

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = ["h200x1", "h200x2"]


@pytest.mark.parametrize("ex", EXAMPLES)
def test_every_image_of_the_report_is_committed(ex: str) -> None:
    folder = REPO / "docs" / "examples" / ex
    sources = re.findall(r'<img src="([^"]+)"', (folder / "report.html").read_text())
    assert sources and all((folder / s).is_file() for s in sources), sources


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return render_examples.render(tmp_path_factory.mktemp("examples"))


@pytest.mark.parametrize("ex", [*EXAMPLES, render_examples.FAILED])
def test_the_reports_are_the_current_renderers(ex: str, rendered: dict[str, Path]) -> None:
    """What tools/render_examples.py makes now is what is committed: the real runs' reports re-rendered, and the
    failed fleet re-judged from the simulator's probe documents."""
    folder = REPO / "docs" / "examples" / ex
    for name in render_examples.committed_files(ex):
        assert (rendered[ex] / name).read_text() == (folder / name).read_text(), \
            f"stale {ex}/{name}: run {render_examples.COMMAND}"


def test_the_failed_example_fails_and_errors_and_names_no_module(rendered: dict[str, Path]) -> None:
    report = json.loads((REPO / "docs" / "examples" / render_examples.FAILED / "report.json").read_text())
    assert report["status"] != "certified" and len(report["quarantined"]) == 7
    assert report["nodes"]["gpu0012"]["failing"] == ["probe"]  # no probe output: an error
    assert {"pcie_link", "nvlink", "xid", "ecc", "row_remap"} <= {
        g for line in report["nodes"].values() for g in line["failing"]}
    for ex in (*EXAMPLES, render_examples.FAILED):
        page = (REPO / "docs" / "examples" / ex / "report.html").read_text()
        assert "gridready.report" not in page and "gridready.certify" not in page.split("<h1>", 1)[1]


def test_the_committed_decision_record_shows_its_plots_and_says_it_is_simulated() -> None:
    folder = REPO / "docs" / "examples" / "sandbox" / "decision"
    text = (folder / "decision.md").read_text()
    images = re.findall(r"\]\(([^)]+\.png)\)", text)
    assert images and all((folder / i).is_file() for i in images)
    assert "SIMULATED" in text.splitlines()[2]
    assert json.loads((folder / "decision.json").read_text())["winner"] in text
