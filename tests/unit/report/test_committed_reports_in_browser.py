"""The committed example reports as a reader opens them (issue 33, examples that render): each report.html under
docs/examples in headless Chromium shows every image, links only to files that are committed beside it, prints no
Python dict or list repr, and carries the SIMULATED banner exactly where its verdicts say the data is simulated;
each Markdown file under docs/examples the same, read as text. A report knows its data is simulated from the JSON
beside it: `<stem>.json`'s `simulated` field, else the nearest report.json up to docs/examples (the verdicts the
report was rendered from). Chromium opens a copy in tmp_path whose <base> points at the example's folder, so
relative links resolve against the committed files and nothing is written under docs/. Browser tests are skipped
where Debian's `chromium` is not installed; the Markdown checks always run."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from gridready.report import write_all
from tests.unit.report.test_browser_layout import CHROMIUM, chromium
from tests.unit.report.test_readable import judged

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "docs" / "examples"
PAGES = sorted(EXAMPLES.rglob("*.html"))
MARKDOWN = sorted(EXAMPLES.rglob("*.md"))
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

# Python reprs leaking into a report: a dict with str keys, a list of dicts or of str, a None field, an enum member
REPRS = {
    "dict repr": re.compile(r"\{'[^'\n]+': "),
    "JSON object": re.compile(r"\{\"[^\"\n]+\": "),
    "list of dicts": re.compile(r"\[\{'"),
    "list of str": re.compile(r"\['[^'\n]*'(?:, '|\])"),
    "None field": re.compile(r"(?::|=) ?None[,)}\]]"),
    "enum repr": re.compile(r"<[A-Z]\w+\.[A-Z_]+: "),
}
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", re.I)  # http:, mailto:, data:, an anchor on the page

# Injected into the copy: after load (images decoded), the page's own view of itself as JSON in a <pre>.
PROBE = """<script>
window.addEventListener('load', () => {
  const refs = [...document.querySelectorAll('[href],[src]')].filter(el => el.tagName !== 'BASE')
    .map(el => el.getAttribute('src') ?? el.getAttribute('href'));
  const imgs = [...document.images].map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}));
  const banners = [...document.querySelectorAll('.sim')];
  const h2 = document.querySelector('h2');
  const first = banners.length > 0 && h2 !== null &&
    !!(banners[0].compareDocumentPosition(h2) & Node.DOCUMENT_POSITION_FOLLOWING);
  const out = {text: document.body.innerText, title: document.title, refs, imgs, banners: banners.length, first};
  const pre = document.createElement('pre');
  pre.id = 'gridready-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def simulated(report: Path) -> bool | None:
    """Whether the report's data is simulated, from the verdicts beside it; None where no verdicts say."""
    own = report.with_suffix(".json")
    if own.is_file() and "simulated" in (doc := json.loads(own.read_text())):
        return bool(doc["simulated"])
    for folder in [report.parent, *report.parent.parents]:
        if (folder / "report.json").is_file():
            return bool(json.loads((folder / "report.json").read_text()).get("simulated"))
        if folder == EXAMPLES:
            break
    return None


def reprs(text: str) -> list[str]:
    return [f"{name}: ...{text[max(0, m.start() - 40):m.end() + 40]}..."
            for name, pat in REPRS.items() for m in pat.finditer(text)]


def missing_targets(folder: Path, refs: list[str]) -> list[str]:
    """Relative link and image targets that are not files (or folders) under the report's folder."""
    local = [unquote(r.split("#")[0].split("?")[0]) for r in refs if r and not EXTERNAL.match(r)]
    return [r for r in local if r and not (folder / r).exists()]


def open_in_browser(page: Path, tmp: Path) -> dict:
    """Load `page` in headless Chromium (relative URLs against its own folder) and return what PROBE saw."""
    text = page.read_text()
    copy = tmp / f"{page.parent.name}-{page.name}"
    copy.write_text(text.replace("<head>", f'<head><base href="{page.parent.as_uri()}/">', 1)
                    .replace("</body>", PROBE + "</body>", 1))
    dom = chromium(tmp / "profile", "--window-size=1400,900", "--virtual-time-budget=5000", "--dump-dom",
                   copy.as_uri())
    found = re.search(r'<pre id="gridready-check">(.*?)</pre>', dom, re.S)
    assert found, f"the check script did not run in {page}"
    return json.loads(html.unescape(found.group(1)))


def page_problems(page: Path, seen: dict, flag: bool | None) -> list[str]:
    problems = [f"image not shown: {i['src']}" for i in seen["imgs"] if not i["ok"]]
    problems += [f"link to a missing file: {r}" for r in missing_targets(page.parent, seen["refs"])]
    problems += reprs(seen["text"])
    if flag is not None and bool(seen["banners"]) != flag:
        problems.append(f"SIMULATED banner {'missing' if flag else 'shown'}: the data is "
                        f"{'' if flag else 'not '}simulated")
    if flag and not seen["first"]:
        problems.append("the SIMULATED banner is not above the first section")
    if flag is False and "SIMULATED" in seen["text"] + seen["title"]:
        problems.append("SIMULATED said of real data")
    return problems


def test_the_examples_have_reports() -> None:
    assert {p.relative_to(EXAMPLES).as_posix() for p in PAGES} >= {"h200x1/report.html", "h200x2/report.html"}
    assert all(simulated(p) is False for p in PAGES if p.parts[-2].startswith("h200x"))  # real H200 runs


@needs_chromium
@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(EXAMPLES).as_posix() for p in PAGES])
def test_committed_report_renders_in_a_browser(page: Path, tmp_path: Path) -> None:
    seen = open_in_browser(page, tmp_path)
    assert seen["imgs"], f"{page} shows no image"
    assert page_problems(page, seen, simulated(page)) == []


@needs_chromium
def test_the_browser_check_sees_the_banner_and_catches_faults(tmp_path: Path) -> None:
    """The same check on a simulated fleet's report: banner found; with a repr and a broken image planted, both
    reported (the check is not blind)."""
    out = tmp_path / "sim"
    paths = write_all(judged(4, 4), out, command="invoke certify")
    page = paths["report_html"]
    assert simulated(page) is True
    assert page_problems(page, open_in_browser(page, tmp_path), True) == []
    bad = out / "planted.html"
    bad.write_text(page.read_text().replace("</body>", "<p>{'gen': 4, 'width': 8}</p><img src='gone.png'></body>"))
    problems = page_problems(bad, open_in_browser(bad, tmp_path), False)
    assert any(p.startswith("image not shown: gone.png") for p in problems)
    assert any(p.startswith("link to a missing file: gone.png") for p in problems)
    assert any(p.startswith("dict repr") for p in problems)
    assert any(p.startswith("SIMULATED banner shown") for p in problems)


FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)  # fenced blocks quote commands and logs verbatim
MD_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MD_REF = re.compile(r"^\s*\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_REF = re.compile(r"<(?:img|a)\s[^>]*(?:src|href)=[\"']([^\"']+)[\"']", re.I)
BANNER = re.compile(r"^> \*\*SIMULATED", re.M)


def markdown_problems(doc: Path) -> list[str]:
    text = FENCE.sub("", doc.read_text())
    refs = [m.group(1) for pat in (MD_LINK, MD_REF, HTML_REF) for m in pat.finditer(text)]
    problems = [f"link to a missing file: {r}" for r in missing_targets(doc.parent, refs)]
    problems += reprs(text)
    flag = simulated(doc)
    if flag is True and not BANNER.search(text):
        problems.append("SIMULATED banner missing: the data is simulated")
    if flag is False and "SIMULATED" in text:
        problems.append("SIMULATED said of real data")
    return problems


@pytest.mark.parametrize("doc", MARKDOWN, ids=[p.relative_to(EXAMPLES).as_posix() for p in MARKDOWN])
def test_committed_markdown_links_resolve_and_reads_as_text(doc: Path) -> None:
    assert markdown_problems(doc) == []


def test_the_markdown_check_catches_faults(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"simulated": ["gpu0000"]}))
    (tmp_path / "there.png").write_bytes(b"png")
    doc = tmp_path / "report.md"
    doc.write_text("# r\n\n![ok](there.png) ![gone](gone.png) [x](sub/none.md#a)\n\n| measured | {'sm': 1980} |\n"
                   "\n```\n{'quoted': 'in a log'} ![log](not-a-link.png)\n```\n")
    problems = markdown_problems(doc)
    assert problems[:2] == ["link to a missing file: gone.png", "link to a missing file: sub/none.md"]
    assert [p.split(":")[0] for p in problems[2:]] == ["dict repr", "SIMULATED banner missing"]
