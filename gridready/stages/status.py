"""status: the fleet as the ledger holds it, one row per GPU node of the inventory, and what changed last.

Read-only: no run folder, no lock (the ledger is written atomically). `rows` and `view` are pure over the ledger;
`table` renders them with rich. Nodes the ledger holds but the inventory no longer lists are not shown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.inventory import Inventory
from gridready.ledger import Ledger
from gridready.stages import roll_state
from gridready.stages.roll_state import RollState


def rows(inv: Inventory, book: Ledger, now: datetime | None = None) -> list[dict[str, Any]]:
    """One dict per GPU node: node, group, verdict (certified, expired, quarantined, unreachable, never),
    certified_until, failing_gates, serving role, drained, run."""
    now = now or datetime.now(UTC)
    hours = inv.spec.certification.validity_hours
    roles = book.serving.roles if book.serving else {}
    out = []
    for host in inv.gpu_hosts():
        entry = book.nodes.get(host)
        until = ledger.expires(entry, hours) if entry else None
        verdict = "never" if entry is None else entry.verdict
        if verdict == "certified" and (until is None or now >= until):
            verdict = "expired"
        out.append({
            "node": host, "group": inv.node_group_of(host), "verdict": verdict,
            "certified_until": until.isoformat(timespec="seconds") if until else None,
            "failing_gates": entry.failing_gates if entry else [],
            "serving": roles.get(host), "drained": bool(entry and entry.drained),
            "drain_reason": entry.drain_reason if entry else None, "run_id": entry.run_id if entry else None,
            "evidence": entry.evidence if entry else None,
        })
    return out


def view(inv: Inventory, book: Ledger, now: datetime | None = None, roll: RollState | None = None) -> dict[str, Any]:
    """What `invoke status --json` prints; `roll`: the rolling provision, as it goes and after (roll.json)."""
    return {
        "schema_version": "gridready.status/1", "customer": inv.customer, "revision": book.revision,
        "updated_at": book.updated_at, "nodes": rows(inv, book, now),
        "serving": book.serving.model_dump() if book.serving else None,
        "changes": [c.model_dump() for c in book.changes()],
        "roll": roll.model_dump() if roll else None,
    }


def table(doc: dict[str, Any]) -> list[Any]:
    """The rich renderables of the fleet table and the last changes."""
    t = Table(title=f"{doc['customer']}: ledger revision {doc['revision']} ({doc['updated_at'] or 'never written'})")
    for col in ("node", "group", "verdict", "certified until", "failing gates", "serving", "drained"):
        t.add_column(col)
    colour = {"certified": "green", "quarantined": "red", "unreachable": "red", "expired": "yellow"}
    for r in doc["nodes"]:
        verdict = r["verdict"]
        t.add_row(r["node"], r["group"] or "-", f"[{colour.get(verdict, 'white')}]{verdict}[/]",
                  r["certified_until"] or "-", ", ".join(r["failing_gates"]) or "-", r["serving"] or "-",
                  f"yes: {r['drain_reason']}" if r["drained"] else "no")
    out: list[Any] = [t]
    if doc.get("tier_routers"):
        tr = Table(title="tier routers (live): the replicas each holds against the ledger's drains")
        for col in ("router", "holds", "ledger wants", "in sync"):
            tr.add_column(col)
        for r in doc["tier_routers"]:
            tr.add_row(r["router"], "\n".join(r["holds"]) or "-", "\n".join(r["wants"]),
                       "[green]yes[/]" if r["in_sync"] else f"[red]no[/]{': ' + r['error'] if r['error'] else ''}")
        out.append(tr)
    if doc["changes"]:
        ch = Table(title="changed since the previous state")
        for col in ("node", "before", "after", "by", "reason"):
            ch.add_column(col)
        for c in doc["changes"]:
            ch.add_row(c["node"], c["before"] or "-", c["after"], c["source"], c["reason"] or "-")
        out.append(ch)
    if doc.get("roll"):
        out.append(roll_table(doc["roll"]))
    return out


def roll_table(roll: dict[str, Any]) -> Table:
    """The rolling provision: one row per node it planned, in batch order."""
    title = (f"rolling provision {roll['status']} (runs {', '.join(roll['runs'])}; batch {roll['current']} of "
             f"{len(roll['batches'])}, {roll['batch_size']} serving node(s) per batch, {roll['max_failures']} "
             f"failure(s) tolerated)")
    if roll.get("stopped_because"):
        title += f": {roll['stopped_because']}"
    t = Table(title=title)
    for col in ("node", "batch", "serving", "step", "rebooted", "re-certified", "seconds", "why"):
        t.add_column(col)
    colour = {"done": "green", "failed": "red", "pending": "white"}
    for node, r in sorted(roll["nodes"].items(), key=lambda kv: (kv[1]["batch"], kv[0])):
        gates = "-" if r["gates"] is None else (", ".join(r["gates"]) or "all gates")
        t.add_row(node, str(r["batch"]), "yes" if r["serving"] else "idle",
                  f"[{colour.get(r['step'], 'yellow')}]{r['step']}[/]", "yes" if r["rebooted"] else "no", gates,
                  "-" if r["seconds"] is None else f"{r['seconds']:g}", r["reason"] or "-")
    return t


def run(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """The ledger's view with the rolling provision's state and, with tier routers deployed, what each holds now
    (gridready.serving.router_drain)."""
    from gridready.stages.serve.drain import tier_router_state

    doc = view(inv, ledger.read(ctx.root, inv.customer)[1], roll=roll_state.read(ctx.root, inv.customer))
    states = tier_router_state(inv, ctx.root)
    return doc | {"tier_routers": states} if states else doc
