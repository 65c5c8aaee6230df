"""Signed evidence per node (gridready.evidence) for certify, and `invoke evidence verify`.

certify: after the reports, each node judged in this run gets evidence/<node>/statement.dsse.json (signed with
GRIDREADY_EVIDENCE_KEY) or, without a key, an unsigned statement.json and a message saying so. The key is loaded
before any probe runs, so a bad key stops the run with exit 2 and nothing written.

verify: a bundle (an envelope path, or the ledger's evidence of --node) against a public key (--key,
GRIDREADY_EVIDENCE_PUBKEY, inventories/<c>/evidence.pub, else the public half of GRIDREADY_EVIDENCE_KEY), the
reports beside it, and a machine: --machine <probe.json> (a fresh probe of the machine), else the identity the
ledger recorded for --node. Exit 0 valid, 5 when any check fails, 2 for bad input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gridready import evidence, ledger
from gridready.artifacts import RunContext
from gridready.certify.judge import FleetVerdict
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.yamlio import MAX_ARTIFACT_BYTES, YamlError, read_capped

EVIDENCE = "evidence"


def _probe(path: Path) -> dict[str, Any] | None:
    """A probe.json as a mapping; None when it is no regular file of bounded size (a FIFO would block), not JSON
    or not an object."""
    try:
        doc = json.loads(read_capped(path, MAX_ARTIFACT_BYTES))
    except (YamlError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def sign_nodes(ctx: RunContext, fleet: FleetVerdict, stage_dir: Path, reports: dict[str, Path],
               key: Ed25519PrivateKey | None, probes: str = "probes",
               ) -> tuple[dict[str, tuple[str | None, str | None]], list[str]]:
    """node -> (signed statement path or None, identity digest) for every node judged in this run, and messages."""
    out: dict[str, tuple[str | None, str | None]] = {}
    shared = {k: p for k, p in reports.items() if k in ("junit", "ctrf", "report_json") and p.exists()}
    for node, verdict in fleet.nodes.items():
        probe_path = stage_dir / probes / node / "probe.json"
        identity = evidence.machine_identity(_probe(probe_path))
        own = {**shared, "certification": stage_dir / "nodes" / node / "certification.json"}
        if probe_path.exists():
            own["probe"] = probe_path
        own = {k: p for k, p in own.items() if p.exists()}
        # the full verdict as written (the fleet holds a slim copy of each node: NodeVerdict.slim)
        body = _probe(own["certification"]) if verdict.is_slim and "certification" in own else None
        stmt = evidence.statement(node, identity, body or verdict.model_dump(mode="json"), own, stage_dir,
                                  customer=ctx.customer, run_id=ctx.run_id)
        envelope = evidence.sign(stmt, key) if key is not None else None
        path = evidence.write_bundle(stage_dir / EVIDENCE / node, envelope, stmt)
        out[node] = (str(path) if envelope is not None else None, evidence.identity_digest(identity))
    messages = [] if key is not None or not fleet.nodes else [
        f"evidence unsigned: set {evidence.KEY_ENV} to an ed25519 key to sign each node's in-toto statement"]
    return out, messages


def public_key(inv: Inventory, key: str | None) -> Ed25519PublicKey:
    if key:
        return evidence.load_public_key(Path(key), "--key")
    if os.environ.get(evidence.PUBKEY_ENV):
        return evidence.load_public_key(Path(os.environ[evidence.PUBKEY_ENV]), evidence.PUBKEY_ENV)
    if (inv.path / "evidence.pub").exists():
        return evidence.load_public_key(inv.path / "evidence.pub", f"inventories/{inv.name}/evidence.pub")
    private = evidence.load_private_key()
    if private is None:
        raise InvalidInput(f"--key: (flag): no public key: pass --key, set {evidence.PUBKEY_ENV}, or put "
                           f"inventories/{inv.name}/evidence.pub")
    return private.public_key()


def verify(inv: Inventory, ctx: RunContext, *, bundle: str | None, node: str | None, key: str | None,
           machine: str | None) -> dict[str, Any]:
    """What `invoke evidence verify` prints; raises InvalidInput for bad flags."""
    if node is not None and node not in inv.gpu_hosts():
        raise InvalidInput(f"--node: (flag): {node!r} is not a GPU host of inventories/{inv.name}/hosts.yml")
    _, book = ledger.read(ctx.root, inv.customer)
    entry = book.nodes.get(node) if node else None
    if bundle is None:
        if node is None:
            raise InvalidInput("--bundle: (flag): name a bundle (statement.dsse.json) or a --node of the ledger")
        if entry is None or not entry.evidence:
            raise InvalidInput(f"--node: (flag): the ledger holds no signed evidence for {node}")
        bundle = entry.evidence
    path = Path(bundle)
    if path.is_dir():
        path = path / evidence.ENVELOPE_FILE
    if not path.is_file():
        raise InvalidInput(f"--bundle: (flag): {path}: no such file")
    public = public_key(inv, key)
    identity = None
    if machine is not None:
        doc = _probe(Path(machine))
        if doc is None:
            raise InvalidInput(f"--machine: (flag): {machine}: not a readable probe.json")
        identity = evidence.machine_identity(doc)
    stmt, problems = evidence.verify(path, public, identity=identity, node=node)
    if identity is None and entry is not None and stmt is not None and stmt.subject and entry.identity and \
            stmt.subject[0].digest.get("sha256") != entry.identity:
        problems.append(f"{path}: subject: names another machine than the one the ledger certified as {node}")
    return {"bundle": str(path), "node": node, "valid": not problems, "problems": problems,
            "exit_code": int(ExitCode.OK if not problems else ExitCode.NOT_CERTIFIED),
            "subject": stmt.subject[0].name if stmt and stmt.subject else None,
            "certified": stmt.predicate.get("certified") if stmt else None,
            "run_id": stmt.predicate.get("run_id") if stmt else None}
