"""prune: artifacts retention. Keeps the last N valid runs per stage and every run the ledger points to (a node's
certification and evidence, the deployment bench measures); removes the other run folders of this customer."""

from __future__ import annotations

import shutil
from typing import Any

from gridready import ledger
from gridready.artifacts import RunContext, prunable
from gridready.inventory import Inventory


def run(inv: Inventory, ctx: RunContext, keep: int, dry_run: bool = False) -> dict[str, Any]:
    """Run under the customer's lock (no stage runs meanwhile). What was (or would be) removed."""
    _, book = ledger.read(ctx.root, inv.customer)
    protected = ledger.protected_runs(book)
    doomed = prunable(ctx.root, inv.customer, keep, protected)
    if not dry_run:
        for path in doomed:  # prunable lists plain folders only; rmtree never follows a link inside one
            shutil.rmtree(path)
    return {"customer": inv.customer, "keep": keep, "dry_run": dry_run, "protected": sorted(protected),
            "removed": [p.name for p in doomed]}
