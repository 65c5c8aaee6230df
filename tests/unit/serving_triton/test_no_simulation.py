"""The Triton tiers know nothing of the sandbox (issue 27): the role and the serving modules do on a sandbox host
exactly what they do on a real one. The word may appear only in a comment that cites upstream behaviour (a URL)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
WORD = re.compile(r"simulat", re.IGNORECASE)
COMMENT = re.compile(r"^\s*(#|\{#)")


def _files() -> list[Path]:
    role = REPO / "roles" / "gridready_triton_trtllm"
    modules = (REPO / "gridready" / "serving").glob("triton*.py")
    return sorted([p for p in role.rglob("*") if p.is_file()] + list(modules))


def test_the_triton_role_and_modules_have_no_simulation_branch() -> None:
    files = _files()
    assert len(files) > 10, files
    found = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if WORD.search(line) and not (COMMENT.match(line) and "https://" in line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
