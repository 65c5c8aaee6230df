"""`invoke quarantine --slurm`: the ledger's verdicts applied to Slurm, gridready's own drains only.

A node the ledger does not let serve (quarantined, expired, drained by the watcher, never certified) is drained with
a reason starting `gridready:`; a node it lets serve again is resumed only when Slurm holds it drained with such a
reason. A drain someone else set, or a node Slurm does not know, is left alone and reported. Commands run on the
controller (`scontrol`, Slurm's own CLI: scontrol(1) `show node -o`, `update nodename=... state=drain reason=...`,
`state=resume`); with --check they are printed, not run. Node names: the inventory's host names.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.inventory import Inventory

PREFIX = "gridready:"
Runner = Callable[[Sequence[str]], tuple[int, str]]


def _run(argv: Sequence[str]) -> tuple[int, str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def slurm_state(text: str) -> tuple[set[str], str]:
    """(state flags, reason) of one `scontrol show node -o` line: State=IDLE+DRAIN -> {IDLE, DRAIN}; Reason= runs
    to the end of the line (it may hold spaces)."""
    state = re.search(r"(?:^|\s)State=(\S+)", text)
    reason = re.search(r"(?:^|\s)Reason=(.*)$", text.strip())
    return (set(state.group(1).split("+")) if state else set()), (reason.group(1).strip() if reason else "")


def plan(inv: Inventory, book: ledger.Ledger, show: Callable[[str], tuple[int, str]],
         now: datetime | None = None) -> tuple[list[list[str]], list[str]]:
    """The scontrol commands that bring Slurm in line with the ledger, and what was left alone and why."""
    commands, notes = [], []
    hours = inv.spec.certification.validity_hours
    for node in inv.gpu_hosts():
        ok, why = ledger.usable(book.nodes.get(node), hours, now or datetime.now(UTC))
        rc, text = show(node)
        if rc != 0:
            notes.append(f"{node}: not a Slurm node ({text.strip().splitlines()[-1][:120] if text.strip() else rc})")
            continue
        flags, reason = slurm_state(text)
        drained = bool(flags & {"DRAIN", "DRAINED", "DRAINING"})
        ours = reason.startswith(PREFIX)
        if not ok and not drained:
            commands.append(["scontrol", "update", f"nodename={node}", "state=drain",
                             f"reason={PREFIX} {why}"[:100]])
        elif not ok and drained and not ours:
            notes.append(f"{node}: already drained by someone else ({reason or 'no reason'}); left as it is")
        elif ok and drained and ours:
            commands.append(["scontrol", "update", f"nodename={node}", "state=resume"])
        elif ok and drained:
            notes.append(f"{node}: certified, but drained by someone else ({reason or 'no reason'}); left drained")
    return commands, notes


def run(inv: Inventory, ctx: RunContext, runner: Runner = _run) -> dict[str, Any]:
    if shutil.which("scontrol") is None and runner is _run:
        raise InvalidInput("scontrol: (controller): Slurm's scontrol is not installed here; run gridready where the "
                           "Slurm commands are, or the certify run's slurm-drain.sh")
    _, book = ledger.read(ctx.root, inv.customer)
    if not any(n in book.nodes for n in inv.gpu_hosts()):
        raise InvalidInput(f"{inv.customer}: no node in the ledger yet; run `invoke certify` first")
    commands, notes = plan(inv, book, lambda n: runner(["scontrol", "show", "node", "-o", n]))
    done = []
    for argv in commands:
        if ctx.check:
            done.append({"command": shlex.join(argv), "ran": False})
            continue
        rc, out = runner(argv)
        done.append({"command": shlex.join(argv), "ran": True, "rc": rc, "output": out.strip()[:300]})
    return {"customer": inv.customer, "check": ctx.check, "commands": done, "notes": notes,
            "failed": [d["command"] for d in done if d.get("rc")]}
