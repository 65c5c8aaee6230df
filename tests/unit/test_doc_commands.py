"""The README's and the user docs' commands that need no fleet, run as written: every `invoke`/`gridready` command
line of those pages whose tasks read the inventory alone (validate, schema, status, plan --offline, serve --render,
prune --dry-run, --list, --help) exits 0. Placeholders take the example inventories; artifacts and state go to a
temporary folder. A command that needs hosts (provision, certify, serve, bench, discover, watch, ...) is left to
the fleet tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_command_reference import _commands, command_reference
from tests.unit.test_user_docs import USER_DOCS

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDERS = {"<customer>": "acme-h200", "<c>": "acme-h200"}
# tasks that read only the inventory (and the ledger), with the flag that makes them so where one is needed
NO_FLEET = {"validate": None, "schema": None, "status": None, "plan": "--offline", "serve": "--render",
            "prune": "--dry-run"}
CORE_ONLY = {"--list", "--help", "-h", "-l"}
TASKS = set(command_reference.task_names())
# inventories whose serving render the docs promise to work offline (the sandbox's pins its fleet's bring-up
# writes: a render there boots the fleet, left to the fleet tests)
RENDERS = {"acme-h200-k8s"}


def _runnable(words: list[str]) -> list[str] | None:
    """The command with its placeholders filled, or None when it needs a fleet or names something unknown."""
    words = [PLACEHOLDERS.get(w, w) for w in words]
    if any("<" in w or "..." in w for w in words):
        return None
    tasks = [w for w in words if w in TASKS]
    inv = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-i", "--inventory")), "sandbox")
    if words[0] in ("-f", "--config"):
        return None  # a config file of a customer: the same inventory choice the -i form shows
    if not tasks:
        return words if set(words) & CORE_ONLY else None
    for t in tasks:
        flag = NO_FLEET.get(t, "needs a fleet")
        if flag == "needs a fleet" or (flag and flag not in words):
            return None
    if "serve" in tasks and inv not in RENDERS:
        return None
    return words


def _doc_commands() -> list[tuple[str, list[str]]]:
    seen: dict[str, tuple[str, list[str]]] = {}
    for doc in USER_DOCS:
        for words in _commands((REPO / doc).read_text()):
            cmd = _runnable(words)
            if cmd is not None:
                seen.setdefault(" ".join(cmd), (doc, cmd))
    return sorted(seen.values(), key=lambda x: " ".join(x[1]))


COMMANDS = _doc_commands()


def test_the_docs_hold_commands_to_run() -> None:
    ran = {" ".join(c) for _, c in COMMANDS}
    for must in ("validate", "schema", "-i acme-h200 plan --offline", "-i acme-h200-k8s serve --render",
                 "-i acme-h200 --list"):
        assert any(r.endswith(must) for r in ran), (must, sorted(ran))


def _own_copy(cmd: list[str], tmp_path: Path) -> list[str]:
    """The command on a copy of its inventory's committed files: a render writes the inventory's generated vault
    and pins, which must not race the fleet tests that use the repository's own sandbox inventory."""
    words = list(cmd)
    at = next((i + 1 for i, w in enumerate(words[:-1]) if w in ("-i", "--inventory")), None)
    name = words[at] if at is not None else "sandbox"
    files = subprocess.run(["git", "ls-files", f"inventories/{name}"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    assert files, f"inventories/{name} holds no committed file"
    for f in files:
        dest = tmp_path / "inventories" / Path(f).relative_to("inventories")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest)
    copy = str(tmp_path / "inventories" / name)
    return [*words[:at], copy, *words[at + 1:]] if at is not None else ["-i", copy, *words]


@pytest.mark.parametrize(("doc", "cmd"), COMMANDS, ids=[" ".join(c) for _, c in COMMANDS])
def test_a_documented_command_runs(doc: str, cmd: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDREADY_")}
    env |= {"GRIDREADY_ARTIFACTS": str(tmp_path / "artifacts"), "GRIDREADY_STATE": str(tmp_path / "state")}
    res = subprocess.run([str(REPO / ".venv/bin/gridready"), *_own_copy(cmd, tmp_path)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{doc}: gridready {' '.join(cmd)}: exit {res.returncode}\n{res.stderr[-2000:]}"
