"""The fleet's state: a per-node ledger of certifications, never "the newest summary" (DESIGN.md 7.14).

`artifacts/<customer>/ledger.json` holds each node's latest verdict (run, gates, expiry, evidence), the deployment
serve last made, whether the watcher drained a node, and the history of changes. Stages change it only through
`update()` under the customer's lock; every merge rule is a pure function here, tested on its own:

- a certify run replaces the entries of the nodes it judged, and only those: a `--limit` run merges, a node reused
  from an earlier run keeps its entry, a check-mode run or one that ended in an error changes nothing;
- a serve run records its deployment only when it deployed (not check mode, not --render, exit 0);
- the watcher drains and returns nodes; a fresh certified verdict returns a drained node.

Readers (serve, bench, reuse, `invoke status`) take the ledger through `read()`; a file of another schema or with
a drifted key stops them with exit 2 and one line naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gridready.artifacts import read_json, write_json_atomic
from gridready.contracts import CertifySummary, NodeCertification, ServeSummary, now_iso
from gridready.errors import InvalidInput

SCHEMA = "gridready.ledger/1"
LEDGER_FILE = "ledger.json"
HISTORY_KEEP = 1000
Verdict = Literal["certified", "quarantined", "unreachable"]


class NodeEntry(BaseModel):
    """One node's latest verdict, whichever run made it."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict
    group: str | None = None
    run_id: str = Field(description="the certify run that judged the node")
    judged_at: str = Field(description="when that run recorded the verdict")
    valid_until: str | None = Field(None, description="certified nodes: until when serve may use them")
    profile: str
    failing_gates: list[str] = Field(default_factory=list, description="gates that block the node")
    blocking: list[str] = Field(default_factory=list)
    summary: str = Field(description="the certify summary.json of that run")
    certification: str | None = Field(None, description="the node's certification.json")
    evidence: str | None = Field(None, description="the node's signed in-toto statement (DSSE), when signed")
    identity: str | None = Field(None, description="sha256 of the machine identity the statement names")
    hcas_passed: list[str] | None = None
    hcas_failed: list[str] = Field(default_factory=list)
    simulated: bool = False
    drained: bool = Field(False, description="taken out of serving by the watcher")
    drain_reason: str | None = None
    drained_at: str | None = None
    drain_held: bool = Field(False, description=(
        "drained by a rolling provision, which returns it itself after its engines answer: a certified verdict "
        "does not return it"))


class Deployment(BaseModel):
    """What serve deployed last (a deployment, never a render, check or refused run)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    summary: str = Field(description="the serve summary.json bench measures")
    at: str
    roles: dict[str, str] = Field(default_factory=dict, description="node -> '<tier> head' / '<tier> worker'")


class Change(BaseModel):
    model_config = ConfigDict(extra="forbid")

    revision: int
    at: str
    node: str
    before: str | None
    after: str
    source: str = Field(description="what made the change: 'certify <run>', 'serve <run>', 'watch'")
    reason: str = ""


class Ledger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["gridready.ledger/1"] = SCHEMA
    customer: str
    revision: int = 0
    updated_at: str | None = None
    nodes: dict[str, NodeEntry] = Field(default_factory=dict)
    serving: Deployment | None = None
    history: list[Change] = Field(default_factory=list)

    def changes(self, revision: int | None = None) -> list[Change]:
        """The changes of one revision (default the latest): what changed since the previous state."""
        rev = self.revision if revision is None else revision
        return [c for c in self.history if c.revision == rev]


def path_of(root: Path, customer: str) -> Path:
    return root / customer / LEDGER_FILE


def read(root: Path, customer: str) -> tuple[Path, Ledger]:
    """The customer's ledger (an empty one when no run wrote it yet); InvalidInput naming the file and key for
    anything else."""
    path = path_of(root, customer)
    raw = read_json(path, root)  # a link, FIFO or folder there is refused unopened: status never blocks on one
    if raw is None:
        return path, Ledger(customer=customer)
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}: (file): the ledger is a JSON object, got {type(raw).__name__}")
    if raw.get("schema_version") != SCHEMA:
        raise InvalidInput(f"{path}: schema_version: {raw.get('schema_version')!r} is not {SCHEMA!r} "
                           "(written by another gridready version); move it aside and run `invoke certify`")
    try:
        ledger = Ledger.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise InvalidInput(f"{path}: {where}: {first['msg']}") from None
    if ledger.customer != customer:
        raise InvalidInput(f"{path}: customer: {ledger.customer!r} is not {customer!r}")
    for where, recorded in _recorded_paths(ledger):
        if not _beneath(recorded, root):  # later stages read these: never a way out of artifacts/
            raise InvalidInput(f"{path}: {where}: not a path under {root}")
    return path, ledger


def _recorded_paths(ledger: Ledger) -> list[tuple[str, str]]:
    out = [(f"nodes.{node}.{key}", value) for node, entry in ledger.nodes.items()
           for key in ("summary", "certification", "evidence") if isinstance(value := getattr(entry, key), str)]
    if ledger.serving is not None:
        out.append(("serving.summary", ledger.serving.summary))
    return out


def _beneath(recorded: str, folder: Path) -> bool:
    """An absolute path under the artifacts root (as written, or with links above it resolved); a relative one
    without `..` (readers given the artifacts root refuse it unless it lies beneath)."""
    if not os.path.isabs(recorded):
        return os.pardir not in Path(recorded).parts
    path = os.path.normpath(recorded)
    return any(path.startswith(base.rstrip("/") + "/") for base in (os.path.abspath(folder), os.path.realpath(folder)))


def update(root: Path, customer: str, change: Callable[[Ledger], Ledger]) -> Ledger:
    """Apply a pure change and write the result atomically when it changed anything. The caller holds the
    customer's lock (every stage runs under it)."""
    path, before = read(root, customer)
    after = change(before.model_copy(deep=True))
    if after.model_dump() != before.model_dump():
        write_json_atomic(path, after, root)
    return after


def _stamp(ledger: Ledger, at: str, events: list[tuple[str, str | None, str, str]], source: str) -> Ledger:
    """Bump the revision and append the events (node, before, after, reason)."""
    ledger.revision += 1
    ledger.updated_at = at
    ledger.history += [Change(revision=ledger.revision, at=at, node=n, before=b, after=a, source=source, reason=r)
                       for n, b, a, r in events]
    ledger.history = ledger.history[-HISTORY_KEEP:]
    return ledger


def failing_gates(blocking: Iterable[str]) -> list[str]:
    """Gate names of the blocking lines ('<gate>: <reason>')."""
    return sorted({line.split(":", 1)[0].strip() for line in blocking if line.strip()})


def state(entry: NodeEntry | None) -> str:
    """One word for the history: the verdict, drained while drained."""
    if entry is None:
        return "absent"
    return "drained" if entry.drained else entry.verdict


def record_certify(ledger: Ledger, summary: CertifySummary, summary_path: Path, *,
                   groups: dict[str, str | None] | None = None,
                   evidence: dict[str, tuple[str | None, str | None]] | None = None,
                   at: str | None = None) -> Ledger:
    """Merge one certify run: the nodes it judged take its verdict; every other node keeps its entry. A
    check-mode run or one that ended in an error changes nothing. `evidence`: node -> (statement path, identity)."""
    if summary.check or summary.status == "error":
        return ledger
    at = at or summary.finished_at or now_iso()
    events = []
    for host, node in sorted(summary.hosts.items()):
        if node.reused:
            continue  # certified by an earlier run: that run's entry stands
        before = ledger.nodes.get(host)
        kept = bool(before and before.drained and (node.status != "certified" or before.drain_held))
        stmt, ident = (evidence or {}).get(host, (None, None))
        entry = NodeEntry(
            verdict=node.status, group=(groups or {}).get(host, before.group if before else None),
            run_id=summary.run_id, judged_at=at, valid_until=node.valid_until, profile=summary.profile,
            failing_gates=failing_gates(node.blocking), blocking=node.blocking, summary=str(summary_path),
            certification=node.certification, evidence=stmt, identity=ident, hcas_passed=node.hcas_passed,
            hcas_failed=node.hcas_failed, simulated=host in summary.simulated,
            # a fresh pass returns a drained node, unless a roll holds it; any other verdict keeps it out
            drained=kept, drain_reason=before.drain_reason if before and kept else None,
            drained_at=before.drained_at if before and kept else None, drain_held=bool(before and kept
                                                                                       and before.drain_held),
        )
        ledger.nodes[host] = entry
        reason = ", ".join(entry.failing_gates) or ("re-certified" if before else "first certification")
        events.append((host, state(before), state(entry), reason))
    return _stamp(ledger, at, events, f"certify {summary.run_id}") if events else ledger


def record_serve(ledger: Ledger, summary: ServeSummary, summary_path: Path, roles: dict[str, str], *,
                 deployed: bool, at: str | None = None) -> Ledger:
    """Merge one serve run: only a deployment (not check mode, not a render, exit 0) becomes the fleet's serving
    state; anything else leaves the last deployment in place."""
    if not deployed or summary.check or summary.exit_code != 0:
        return ledger
    at = at or summary.finished_at or now_iso()
    old = ledger.serving.roles if ledger.serving else {}
    ledger.serving = Deployment(run_id=summary.run_id, summary=str(summary_path), at=at, roles=dict(roles))
    events = [(n, old.get(n) or "idle", roles.get(n) or "idle", "serve")
              for n in sorted(set(old) | set(roles)) if old.get(n) != roles.get(n)]
    return _stamp(ledger, at, events, f"serve {summary.run_id}")


def drain(ledger: Ledger, node: str, reason: str, *, at: str | None = None, held: bool = False) -> Ledger:
    """The watcher (or a roll: `held`, returned only by `undrain`) took `node` out of serving."""
    entry = ledger.nodes.get(node)
    if entry is None or entry.drained:
        if entry is not None and held:
            entry.drain_held = True
        return ledger
    at = at or now_iso()
    before = state(entry)
    entry.drained, entry.drain_reason, entry.drained_at, entry.drain_held = True, reason, at, held
    return _stamp(ledger, at, [(node, before, "drained", reason)], "watch")


def record_targeted(ledger: Ledger, node: str, result: NodeCertification, gates: Iterable[str], summary_path: Path,
                    run_id: str, *, at: str | None = None) -> Ledger:
    """The watcher's re-certification of a drained node on the gates that match its fault only (a certify run of
    those gates, which records nothing itself). A pass returns the node on its standing certification (its
    window and evidence unchanged); a fail quarantines it, naming this run and the gates, and keeps it drained, so
    that only a full certification (`certify --limit <node> --force`) returns it."""
    entry = ledger.nodes.get(node)
    if entry is None:
        return ledger
    at = at or now_iso()
    names = ", ".join(sorted(gates))
    before = state(entry)
    if result.status == "certified":
        if not entry.drained or entry.drain_held:  # a roll's drain: the roll returns it after its health wait
            return ledger
        entry.drained, entry.drain_reason, entry.drained_at = False, None, None
        return _stamp(ledger, at, [(node, before, entry.verdict, f"targeted re-certification passed ({names}; "
                                    f"run {run_id})")], "watch")
    entry.verdict, entry.run_id, entry.judged_at, entry.summary = result.status, run_id, at, str(summary_path)
    entry.valid_until, entry.blocking = None, list(result.blocking)
    entry.failing_gates = failing_gates(result.blocking)
    if not entry.drained:
        entry.drained, entry.drain_reason, entry.drained_at = True, f"targeted re-certification: {names}", at
    return _stamp(ledger, at, [(node, before, result.status, f"targeted re-certification failed: "
                               f"{', '.join(entry.failing_gates) or result.status} (run {run_id})")], "watch")


def undrain(ledger: Ledger, node: str, reason: str, *, at: str | None = None) -> Ledger:
    """Put a drained node back (its verdict decides whether serve uses it)."""
    entry = ledger.nodes.get(node)
    if entry is None or not entry.drained:
        return ledger
    at = at or now_iso()
    entry.drained, entry.drain_reason, entry.drained_at, entry.drain_held = False, None, None, False
    return _stamp(ledger, at, [(node, "drained", entry.verdict, reason)], "watch")


def _time(value: str) -> datetime:
    stamp = datetime.fromisoformat(value)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def expires(entry: NodeEntry, validity_hours: int) -> datetime | None:
    """When a certified entry stops being usable: its own valid_until, shortened by today's spec window."""
    if entry.verdict != "certified" or entry.valid_until is None:
        return None
    return min(_time(entry.valid_until), _time(entry.judged_at) + timedelta(hours=validity_hours))


def usable(entry: NodeEntry | None, validity_hours: int, now: datetime | None = None) -> tuple[bool, str]:
    """Whether serve may place work on the node, and, when not, why (one phrase)."""
    if entry is None:
        return False, "never certified"
    if entry.verdict != "certified":
        return False, entry.verdict + (f" ({', '.join(entry.failing_gates)})" if entry.failing_gates else "")
    until = expires(entry, validity_hours)
    if until is None or (now or datetime.now(UTC)) >= until:
        return False, f"certification expired at {until.isoformat() if until else '?'}"
    if entry.drained:
        return False, f"drained: {entry.drain_reason}"
    return True, "certified"


def protected_runs(ledger: Ledger) -> set[str]:
    """Run ids the ledger points to (certifications, evidence, the deployment): retention never removes them."""
    runs = {e.run_id for e in ledger.nodes.values()}
    if ledger.serving:
        runs.add(ledger.serving.run_id)
    return runs
