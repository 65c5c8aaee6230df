"""`invoke --list`, each task's `--help`, docs/reference.md and the README agree: the reference is generated from
the collection and must be current; the real command line lists the same tasks and flags; every command the
README and the user docs write names a task that exists, with flags that task takes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_user_docs import USER_DOCS

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import command_reference  # noqa: E402

GRIDREADY = [str(REPO / ".venv/bin/gridready")]
CORE_WITH_VALUE = {"-f", "--config", "-i", "--inventory", "-c", "--collection", "-r", "--search-root"}
CORE_FLAGS = {"--list", "-l", "--help", "-h", "--version", "-V", "--complete", "-e", "--echo", "--dry"}


def _cli(*args: str) -> str:
    return subprocess.run([*GRIDREADY, *args], capture_output=True, text=True, timeout=60, check=True,
                          cwd=REPO).stdout


@pytest.fixture(scope="module")
def reference() -> dict[str, set[str]]:
    """Task name -> its long flags, as docs/reference.md lists them."""
    out: dict[str, set[str]] = {}
    task = None
    for line in (REPO / "docs/reference.md").read_text().splitlines():
        if m := re.match(r"^## `([\w.-]+)`$", line):
            task = m.group(1)
            out[task] = set()
        elif task and line.startswith("| `"):
            out[task] |= set(re.findall(r"`(--[\w-]+)`", line.split("|")[1]))
    return out


def test_the_committed_reference_is_current() -> None:
    assert (REPO / "docs/reference.md").read_text() == command_reference.render(), \
        "docs/reference.md is stale: run .venv/bin/python tools/command_reference.py"


def test_list_names_the_tasks_of_the_reference(reference: dict[str, set[str]]) -> None:
    listed = re.findall(r"^  ([\w.-]+)\s", _cli("--list"), re.M)
    assert listed and set(listed) == set(reference)


def test_each_tasks_help_has_the_flags_of_the_reference(reference: dict[str, set[str]]) -> None:
    for task, flags in reference.items():
        text = _cli("--help", task)
        options = text.split("Options:", 1)[1] if "Options:" in text else ""
        assert set(re.findall(r"^  (?:-\w(?: \w+)?, )?(--[a-z][\w-]*)", options, re.M)) == flags, task


def _commands(text: str) -> list[list[str]]:
    """The invoke/gridready command lines of a Markdown page: code spans (which may wrap lines) and fenced lines."""
    spans = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    lines = [ln for block in spans for ln in block.splitlines()]
    lines += [" ".join(s.split()) for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", re.sub(r"```.*?```", "", text,
                                                                                       flags=re.S))]
    out = []
    for ln in lines:
        for m in re.finditer(r"(?:^|[\s(&;|])(?:\S*/)?(?:invoke|gridready)((?:\s+[^\s&;|)#]+)+)", ln):
            try:
                words = shlex.split(m.group(1))
            except ValueError:
                words = m.group(1).split()
            out.append(words)
    return out


def _check(words: list[str], reference: dict[str, set[str]]) -> list[str]:
    problems, task, i = [], None, 0
    while i < len(words):
        w = words[i]
        if task is None and w in CORE_WITH_VALUE:
            i += 2
            continue
        if w.startswith("-"):
            flag = w.split("=", 1)[0]
            if task is None:
                if flag not in CORE_FLAGS:
                    problems.append(f"{flag}: not a core flag")
            elif task in reference and flag.startswith("--") and flag not in reference[task]:
                problems.append(f"{task} {flag}: the task has no such flag")
        elif w in reference:
            task = w
        elif task is None and re.fullmatch(r"[a-z][\w.-]*", w):
            problems.append(f"{w}: no such task")
            task = w  # its flags and values are not judged
        i += 1
    return problems


@pytest.mark.parametrize("doc", USER_DOCS)
def test_the_docs_write_commands_that_exist(doc: str, reference: dict[str, set[str]]) -> None:
    found = _commands((REPO / doc).read_text())
    bad = [f"{' '.join(c)}: {p}" for c in found for p in _check(c, reference)]
    assert not bad, bad


def test_the_check_catches_a_wrong_task_and_a_wrong_flag(reference: dict[str, set[str]]) -> None:
    text = "run `invoke certfy --limit x` then `gridready -i acme serve --rendr`, ```\ninvoke plan --offline\n```"
    got = [p for c in _commands(text) for p in _check(c, reference)]
    assert got == ["certfy: no such task", "serve --rendr: the task has no such flag"]
