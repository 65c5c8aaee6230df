"""library/gridready_apt_sources.py: which source files already serve a repository (issue 28, finding 4: DOCA's
own doca.list beside gridready's entry for the same URL, with another Signed-By, stops apt; the driver role had
the same check as a grep over one-line entries only)."""

from __future__ import annotations

from pathlib import Path

from tests import library_modules

mod = library_modules.load("gridready_apt_sources")
DOCA = "https://linux.mellanox.com/public/repo/doca/3.1.0/ubuntu24.04/x86_64/"


def _root(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (tmp_path / "etc/apt" / name).write_text(text)
    return tmp_path


def test_docas_own_one_line_entry_is_found_and_ours_is_left_out(tmp_path):
    root = _root(tmp_path, {
        "sources.list": "deb http://deb.debian.org/debian bookworm main\n",
        "sources.list.d/doca.list": f"deb [signed-by=/etc/apt/trusted.gpg.d/GPG-KEY-Mellanox.pub] {DOCA[:-1]} ./\n",
        "sources.list.d/gridready-doca.list": f"deb [signed-by=/usr/share/keyrings/gridready-doca.asc] {DOCA} ./\n",
    })
    assert mod.serving(DOCA, str(root), ["/etc/apt/sources.list.d/gridready-doca.list"]) == [
        "/etc/apt/sources.list.d/doca.list"]


def test_deb822_stanzas_count_unless_disabled_or_source_only(tmp_path):
    root = _root(tmp_path, {
        "sources.list.d/a.sources": f"Types: deb-src\nURIs: {DOCA}\nSuites: ./\n",
        "sources.list.d/b.sources": f"Types: deb\nURIs: {DOCA}\nSuites: ./\nEnabled: no\n",
        # a folded second URI, its host in capitals (scheme and host compare case-insensitively)
        "sources.list.d/c.sources": "# DOCA\nTypes: deb deb-src\nURIs: https://example.invalid/x\n "
                                    + DOCA.replace("linux.mellanox.com", "LINUX.Mellanox.com") + "\nSuites: ./\n",
    })
    assert mod.serving(DOCA, str(root)) == ["/etc/apt/sources.list.d/c.sources"]


def test_comments_source_lines_and_other_urls_do_not_count(tmp_path):
    root = _root(tmp_path, {
        "sources.list": f"# deb {DOCA} ./\ndeb-src {DOCA} ./\ndeb {DOCA}extra ./\n",
    })
    assert mod.serving(DOCA, str(root)) == []
