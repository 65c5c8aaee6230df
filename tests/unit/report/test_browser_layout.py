"""report.html in a real browser (headless Chromium): a 60-node simulated fleet with every gate fits a 1400 px
window without horizontal scrolling, and the page renders (screenshot kept in the test's tmp dir).
Skipped where Debian's `chromium` is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gridready.report import write_all
from tests.unit.report.test_readable import judged

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
WIDTH = 1400


def chromium(profile: Path, *args: str) -> str:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True).stdout


def test_report_fits_1400_px_and_renders(tmp_path: Path) -> None:
    fleet = judged(60, 20)
    paths = write_all(fleet, tmp_path / "report", command="invoke certify")
    gates = {r.gate for v in fleet.nodes.values() for r in v.gates}
    assert len(gates) >= 25
    page = paths["report_html"]
    probe = page.with_name("measure.html")  # the report plus a script that reports the page's layout width
    probe.write_text(page.read_text().replace(
        "</body>", "<script>document.title = 'scrollWidth=' + document.documentElement.scrollWidth;</script></body>"))
    dom = chromium(tmp_path / "profile", f"--window-size={WIDTH},900", "--dump-dom", probe.as_uri())
    width = int(re.search(r"scrollWidth=(\d+)", dom).group(1))  # type: ignore[union-attr]
    assert width <= WIDTH, f"report.html is {width} px wide in a {WIDTH} px window"
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--window-size={WIDTH},1800", f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
