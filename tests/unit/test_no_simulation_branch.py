"""The product knows nothing of the sandbox: no role, playbook, Ansible module or template mentions the simulated
fleet or switches on it, and no product module names the sandbox (its imports: tests/unit/test_layers.py).

A sandbox host runs the exact tasks a real host runs; what a real host gets from the network, the sandbox serves
under the real names (sandbox/aptserve.py, sandbox/pypi.py). The product may still label evidence that a
simulated tool produced (the tools say so in their output), so `simulat` is refused in roles, playbooks and
library/, and `sandbox` everywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIRS = ("roles", "playbooks", "library")
MENTION = re.compile(r"sandbox|simulat", re.IGNORECASE)
SANDBOX = re.compile(r"sandbox", re.IGNORECASE)
# What still branches, with the reason; each entry is a file that must lose its branch, never a pattern.
PENDING: dict[str, str] = {}


def pending(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in PENDING)


def mentions(root: Path, pattern: re.Pattern[str], suffixes: tuple[str, ...] | None = None) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or (suffixes and path.suffix not in suffixes):
            continue
        rel = str(path.relative_to(REPO))
        if pending(rel):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_roles_playbooks_and_modules_never_mention_the_simulation():
    assert [m for d in ANSIBLE_DIRS for m in mentions(REPO / d, MENTION)] == []


def test_product_modules_never_name_the_sandbox():
    assert mentions(REPO / "gridready", SANDBOX, (".py", ".yml", ".yaml", ".j2", ".json", ".txt")) == []


def test_the_scan_sees_a_mention(tmp_path):
    (tmp_path / "tasks.yml").write_text("- name: Copy the engine\n  when: engine == 'Simulated'\n")
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert mentions(tmp_path, MENTION) == ["tasks.yml:2: when: engine == 'Simulated'"]
    finally:
        REPO = saved


def test_every_pending_entry_still_exists():
    """An entry whose file lost its branch (or is gone) must leave the list."""
    for rel in PENDING:
        path = REPO / rel
        assert path.exists(), rel
        text = "".join(p.read_text() for p in ([path] if path.is_file() else sorted(path.rglob("*.*"))))
        assert MENTION.search(text), f"{rel} no longer mentions the simulation: drop it from PENDING"
