"""Every `argv` of a command task in the roles and playbooks is a list of strings.

YAML reads an unquoted item that ends in a colon as a one-key mapping: `- --only-binary=:all:` became
{'--only-binary=:all': None}, which pip refused ("Invalid requirement"), so the router's wheels were never
downloaded. ansible-lint does not see it; this test does, for every task file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
FILES = sorted([*REPO.glob("roles/*/tasks/*.yml"), *REPO.glob("roles/*/handlers/*.yml"),
                *REPO.glob("playbooks/*.yml"), *REPO.glob("playbooks/tasks/*.yml")])


def _argvs(node: Any) -> Iterator[list[Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "argv" and isinstance(value, list):
                yield value
            else:
                yield from _argvs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _argvs(item)


def test_the_scan_finds_argv_lists() -> None:
    assert sum(1 for f in FILES for _ in _argvs(yaml.safe_load(f.read_text()))) > 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_argv_item_is_a_string(path: Path) -> None:
    for argv in _argvs(yaml.safe_load(path.read_text())):
        bad = [item for item in argv if not isinstance(item, str)]
        assert bad == [], f"{path.relative_to(REPO)}: argv items that are not strings: {bad} (quote them)"
