"""watch: one pass of passive health (`invoke watch --once`, run by a systemd timer on the controller:
docs/fleet-lifecycle.md). Reads the signals the nodes already produce, asks gridready.health what to do, and
does it:

1. signals: Xid lines of `journalctl -k` since the last pass (else of `dmesg --time-format iso`, cut at the same
   time), `dcgmi health -c` per node (setting the watches first where none is set; over SSH, as the fabric
   phase reaches the hosts), and each served tier's engine health (`GET <url>/health` of the ledger's deployment);
   or `--signals <file>` (a JSON list of gridready.health.Signal, e.g. from a DaemonSet or an exporter);
2. drain: the node is marked drained in the ledger under the customer lock, so serve, bench and reuse leave it out
   (a serving node's replica is re-planned on the next `invoke serve`), never past the circuit breaker;
3. re-certify: a certify run limited to the faulty nodes (--force) and to the gates that match their fault, in
   its own run id; its verdict, merged into the ledger, returns the node (pass) or quarantines it (fail). A
   drained node with no fault left, and a node due for its scheduled re-certification, get every gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from gridready import health, ledger, safefile
from gridready.artifacts import RunContext, new_run_id
from gridready.bench.http import HttpError, fetch
from gridready.contracts import ServeSummary, read
from gridready.errors import GridreadyError, InvalidInput
from gridready.health import Action, Policy, Signal
from gridready.inventory import Inventory
from gridready.yamlio import MAX_ARTIFACT_BYTES

SIGNALS = TypeAdapter(list[Signal])


def read_signals(path: str) -> list[Signal]:
    try:
        return SIGNALS.validate_json(safefile.read_bytes(Path(path), MAX_ARTIFACT_BYTES))
    except safefile.UnsafeFile as err:  # a FIFO or a folder named by the flag: one line, never a hang
        raise InvalidInput(f"--signals: (flag): {path}: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        raise InvalidInput(f"{path}: {'.'.join(map(str, first['loc'])) or '(file)'}: {first['msg']}") from None


def since_at(entry: ledger.NodeEntry, now: datetime, window: timedelta = timedelta(minutes=15)) -> datetime:
    """The start of the kernel log a pass reads: the last `window`, never before the node's latest verdict, so an Xid
    a re-certification already answered does not drain the node again."""
    judged = datetime.fromisoformat(entry.judged_at)
    judged = judged if judged.tzinfo else judged.replace(tzinfo=UTC)
    return max(now - window, judged).astimezone(UTC)


def since(entry: ledger.NodeEntry, now: datetime, window: timedelta = timedelta(minutes=15)) -> str:
    """journalctl's --since for since_at."""
    return f"{since_at(entry, now, window):%Y-%m-%d %H:%M:%S} UTC"


def _kernel_lines(text: str) -> list[str]:
    """journalctl's lines, without its own notes (`-- No entries --`, `-- Logs begin at ... --`)."""
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("-- ")]


def newer_dmesg(text: str, bound: datetime) -> str:
    """The lines of `dmesg --time-format iso` (util-linux dmesg(1): `2024-01-02T03:04:05,678901+00:00 msg`) stamped
    after `bound`; a line without a readable stamp is left out (its age is unknown)."""
    keep = []
    for ln in text.splitlines():
        stamp = ln.split(" ", 1)[0].replace(",", ".")
        try:
            at = datetime.fromisoformat(stamp)
        except ValueError:
            continue
        if (at if at.tzinfo else at.replace(tzinfo=UTC)) > bound:
            keep.append(ln)
    return "\n".join(keep)


def kernel_log(node: str, entry: ledger.NodeEntry, runner: Any, now: datetime) -> str:
    """The node's kernel lines since `since_at`: `journalctl -k`; where journald holds no kernel line (volatile or
    absent journald, a container), `dmesg --time-format iso` (as the probe reads it, gridready.probe.collect
    `kernel`) cut at the same bound."""
    log = runner.run(node, ["journalctl", "-k", "--no-pager", "-o", "short", "--since", since(entry, now)], 60)
    if log.rc == 0 and _kernel_lines(log.stdout):
        return log.stdout
    ring = runner.run(node, ["dmesg", "--time-format", "iso"], 60)
    return newer_dmesg(ring.stdout, since_at(entry, now)) if ring.rc == 0 else ""


def dcgm_health(node: str, runner: Any) -> str:
    """`dcgmi health -c`; where no watch is set yet (`Error: Health watches not enabled`), set them all
    (`dcgmi health -s a`, kept by the host engine for later passes: NVIDIA DCGM, dcgmi health,
    https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-health.html) and
    check again."""
    check = runner.run(node, ["dcgmi", "health", "-c"], 60)
    unset = "watches not enabled" in (check.stdout + check.stderr).lower()
    if unset and runner.run(node, ["dcgmi", "health", "-s", "a"], 60).rc == 0:
        check = runner.run(node, ["dcgmi", "health", "-c"], 60)
    return check.stdout if check.rc is not None else ""


def collect(inv: Inventory, book: ledger.Ledger, runner: Any, now: datetime | None = None) -> list[Signal]:
    """Signals from every certified GPU node (runner: gridready.stages.fabric.SshRunner or a test double)."""
    now = now or datetime.now(UTC)
    out: list[Signal] = []
    for node in inv.gpu_hosts():
        entry = book.nodes.get(node)
        if entry is None or entry.verdict != "certified":
            continue
        out += health.from_kernel_log(node, kernel_log(node, entry, runner, now))
        out += health.from_dcgm_health(node, dcgm_health(node, runner))
    if book.serving is not None:
        try:
            summary = read(Path(book.serving.summary), ServeSummary)
        except InvalidInput:
            summary = None
        for ep in summary.endpoints if summary else []:
            try:
                code = asyncio.run(fetch(ep.url, "/health", timeout=10))[0]
            except HttpError as err:
                code, detail = 0, str(err)
            else:
                detail = f"HTTP {code}"
            out += health.from_engine(ep.heads[0], ep.tier, code == 200, detail)
    return out


def _drained(root: Path, customer: str) -> set[str]:
    return {n for n, e in ledger.read(root, customer)[1].nodes.items() if e.drained}


def once(inv: Inventory, ctx: RunContext, signals: list[Signal], policy: Policy | None = None,
         recertify: Callable[[Inventory, RunContext], Any] | None = None,
         route: Callable[[Inventory, RunContext], dict[str, Any]] | None = None) -> dict[str, Any]:
    """One pass: decide, drain (ledger), re-certify the nodes that need it, report. The caller holds the lock;
    `recertify` is the certify stage's run (composed here), given a context limited to the nodes.

    A node drained for a fault is re-certified on the gates that match it only (one certify run per set of gates,
    which records nothing itself; its outcome is merged here: gridready.ledger.record_targeted); a node with no
    fault left, or due for its scheduled re-certification, gets a full certify run, which records itself. When the
    drained set changed, `route` (gridready.stages.serve.drain.sync_serving) takes the drained nodes' replicas out
    of the live router, or puts returned ones back."""
    _, book = ledger.read(ctx.root, inv.customer)
    was = {n for n, e in book.nodes.items() if e.drained}
    actions = health.decide(book, signals, inv.gpu_hosts(), policy)
    for a in actions:
        if a.kind == "drain":
            ledger.update(ctx.root, inv.customer, lambda b, a=a: ledger.drain(b, a.node, a.reason))
    batches: dict[tuple[str, ...], list[str]] = {}
    for a in actions:
        if a.kind == "recertify":
            nodes = batches.setdefault(tuple(a.gates), [])
            if a.node not in nodes:
                nodes.append(a.node)
    results: list[Action] = []
    runs: list[dict[str, Any]] = []
    for gates, todo in sorted(batches.items()) if recertify is not None else []:
        run_id = new_run_id()
        sub = replace(ctx, run_id=run_id, limit=",".join(sorted(todo)), force=True, check=False,
                      gates=gates, skip_gates=())
        sub.claim_stage("certify")
        runs.append({"run_id": run_id, "nodes": sorted(todo), "gates": list(gates) or "all"})
        try:
            summary = recertify(inv, sub)
        except GridreadyError as err:
            verdicts = {n: f"error: {err}" for n in todo}
        else:
            verdicts = {n: h.status for n, h in summary.hosts.items() if n in todo}
            if gates:
                path = sub.stage_dir("certify") / "summary.json"
                for n in todo:
                    if n in summary.hosts:
                        merge = partial(ledger.record_targeted, node=n, result=summary.hosts[n], gates=gates,
                                        summary_path=path, run_id=run_id)
                        ledger.update(ctx.root, inv.customer, merge)
        results += health.outcome([a for a in actions if tuple(a.gates) == gates], verdicts)
    now = _drained(ctx.root, inv.customer)
    routed = route(inv, ctx) if route is not None and now != was else None
    _, after = ledger.read(ctx.root, inv.customer)
    return {"customer": inv.customer, "signals": [s.model_dump() for s in signals],
            "actions": [a.model_dump() for a in [*actions, *results]],
            "recertify_run": runs[0]["run_id"] if runs else None, "recertify_runs": runs,
            "drained": sorted(now), "router": routed, "revision": after.revision}


def load_policy(share: float | None, days: float | None) -> Policy:
    """The policy from flags (defaults: 50% breaker, weekly re-certification); exit 2 naming the flag."""
    values: dict[str, Any] = {}
    if share is not None:
        values["max_drain_share"] = share
    if days is not None:
        values["recertify_days"] = days
    try:
        return Policy(**values)
    except ValidationError as err:
        first = err.errors()[0]
        flag = "--max-drain-share" if first["loc"][0] == "max_drain_share" else "--recertify-days"
        raise InvalidInput(f"{flag}: (flag): {first['msg']}") from None


def run(inv: Inventory, ctx: RunContext, signals: str | None, policy: Policy,
        recertify: Callable[[Inventory, RunContext], Any]) -> dict[str, Any]:
    """`invoke watch --once`: signals from the file, else from the nodes over SSH; then one pass."""
    from gridready.stages.fabric import SshRunner
    from gridready.stages.serve.drain import sync_serving

    found = read_signals(signals) if signals else collect(inv, ledger.read(ctx.root, inv.customer)[1],
                                                          SshRunner.from_inventory(inv))
    return once(inv, ctx, found, policy, recertify, sync_serving)
