"""Every stage ends with where its report is and how many warnings it holds (issue 33, progress)."""

from __future__ import annotations

import pytest

from gridready import cli, console
from gridready.contracts import CertifySummary


def test_the_footer_names_the_report_and_counts_the_warnings(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    lines: list[str] = []
    monkeypatch.setattr(console, "info", lines.append)
    monkeypatch.setenv("GRIDREADY_ARTIFACTS", str(tmp_path))
    summary = CertifySummary(customer="acme", run_id="20261202T000000Z-f", status="success", exit_code=0,
                             check=False, started_at="2026-12-02T00:00:00+00:00", seconds=1.0,
                             messages=["warning: 1 of 4 nodes quarantined (node3)", "fabric: 3 nodes",
                                       "Warning: ACS recorded as unknown"],
                             reports={"report_html": "report.html", "junit": "junit.xml"}, profile="standard",
                             failure_policy="quarantine", validity_hours=168)
    cli.finish(summary, as_json=False)
    stage_dir = tmp_path / "acme" / "20261202T000000Z-f" / "certify"
    assert f"  report: {stage_dir / 'report.html'}" in lines
    assert lines[-1] == f"  artifacts: {stage_dir} (2 warnings above)"
