"""The committed failed fleet example (docs/examples/failed-fleet) as a reader sees it in headless Chromium: in the
screenshot a failed gate's cell and an erroring gate's cell are different colours, the ones the legend gives them.
Skipped where Debian's `chromium` is not installed (setup.sh installs it under CI=true)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from matplotlib.image import imread

from tests.unit.report.test_browser_layout import CHROMIUM, chromium

PAGE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "failed-fleet" / "report.html"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
WIDTH = 1400

# after load: the page's height and the first matrix cell reading F and E (page coordinates), as the title
LOCATE = """<script>
window.addEventListener('load', () => {
  const cell = t => [...document.querySelectorAll('table.matrix td')].find(td => td.textContent === t);
  const box = el => { const r = el.getBoundingClientRect();
    return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height}; };
  document.title = 'gridready-cells=' + JSON.stringify(
    {height: document.documentElement.scrollHeight, F: box(cell('F')), E: box(cell('E'))});
});
</script>"""


def _rgb(colour: str) -> tuple[float, ...]:
    """#f99 or #ff9999 as three floats in 0..1, as matplotlib reads a PNG."""
    digits = colour[1:] if len(colour) == 7 else "".join(c * 2 for c in colour[1:])
    return tuple(int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4))


def test_fail_and_error_cells_differ_in_the_screenshot(tmp_path: Path) -> None:
    text = PAGE.read_text()
    legend = re.findall(r'<span style="background:(#[0-9a-f]{3}|#[0-9a-f]{6})">([FE])</span>', text)
    colours = {letter: _rgb(c) for c, letter in legend}
    assert set(colours) == {"F", "E"}
    page = tmp_path / "report.html"
    page.write_text(text.replace("</body>", LOCATE + "</body>"))
    flags = ["--force-device-scale-factor=1"]
    dom = chromium(tmp_path / "profile", *flags, f"--window-size={WIDTH},900", "--dump-dom", page.as_uri())
    title = re.search(r"gridready-cells=(\{.*?\})</title>", dom)
    assert title, "the page did not report its cells"
    found = json.loads(html.unescape(title.group(1)))
    shot = tmp_path / "shot.png"
    chromium(tmp_path / "profile", *flags, f"--window-size={WIDTH},{found['height']}", f"--screenshot={shot}",
             page.as_uri())
    pixels = imread(shot)
    seen = {}
    for letter in ("F", "E"):
        box = found[letter]
        x, y = int(box["x"] + 3), int(box["y"] + 3)  # inside the cell's padding, off its border and its letter
        seen[letter] = tuple(float(c) for c in pixels[y, x][:3])
        assert max(abs(a - b) for a, b in zip(seen[letter], colours[letter], strict=True)) < 0.05, (letter, seen)
    assert max(abs(a - b) for a, b in zip(seen["F"], seen["E"], strict=True)) > 0.2  # apart at a glance

