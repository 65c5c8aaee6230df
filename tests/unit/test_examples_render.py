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
