"""The committed certification examples render (issue 33, examples that render): every image a report.html shows is
committed beside it, and the reports are what the current renderer makes of the example's own verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gridready.certify.judge import FleetVerdict
from gridready.report.writer import write_all

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = ["h200x1", "h200x2"]


@pytest.mark.parametrize("ex", EXAMPLES)
def test_every_image_of_the_report_is_committed(ex: str) -> None:
    folder = REPO / "docs" / "examples" / ex
    sources = re.findall(r'<img src="([^"]+)"', (folder / "report.html").read_text())
    assert sources and all((folder / s).is_file() for s in sources), sources


@pytest.mark.parametrize("ex", EXAMPLES)
def test_the_reports_are_the_current_renderers(ex: str, tmp_path: Path) -> None:
    folder = REPO / "docs" / "examples" / ex
    fleet = FleetVerdict.model_validate(json.loads((folder / "report.json").read_text()))
    write_all(fleet, tmp_path, command=f"the verdicts of docs/examples/{ex}/report.json, re-rendered by "
                                       "gridready.report.writer (2026-12-02)")
    for name in ("report.md", "report.html", "junit.xml", "quarantine.yml"):
        assert (tmp_path / name).read_text() == (folder / name).read_text(), f"stale {ex}/{name}: re-render it"


def test_the_committed_decision_record_shows_its_plots_and_says_it_is_simulated() -> None:
    folder = REPO / "docs" / "examples" / "sandbox" / "decision"
    text = (folder / "decision.md").read_text()
    images = re.findall(r"\]\(([^)]+\.png)\)", text)
    assert images and all((folder / i).is_file() for i in images)
    assert "SIMULATED" in text.splitlines()[2]
    assert json.loads((folder / "decision.json").read_text())["winner"] in text
