"""Stage summaries for tests, made only through the stages' own writers (docs/architecture.md, "Stage contracts")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.certify.judge import NodeVerdict, judge_fleet
from gridready.certify.result import GateResult, GateStatus
from gridready.contracts import CertifySummary
from gridready.inventory import Inventory
from gridready.ledger import Ledger
from gridready.stages import certify as certify_stage

HCAS = [f"mlx5_{i}" for i in range(8)]


def certification(
    inv: Inventory, certified: Sequence[str], quarantined: Sequence[str] = (), *,
    hcas: dict[str, list[str]] | None = None, run_id: str = "20261130T010000Z-aaaa", check: bool = False,
    root: Path | None = None, record: bool = True,
) -> tuple[Path, CertifySummary]:
    """A certify summary written by the certify stage's own writer (under `root`, default the artifacts/ beside
    the inventory's inventories/ folder): every node passes the
    `hca_present` gate for `hcas[node]` (default every HCA) and fails `hca_rate` (waived) for the spec's others;
    quarantined nodes also fail a GPU gate. Returns (path, summary); the writer merged it into the ledger unless
    `record` is false (a diagnostic run of some gates records nothing)."""
    spec = inv.spec.certification.model_copy(update={"waive": ["hca_rate"]})
    judged = datetime.now(UTC).isoformat(timespec="seconds")
    verdicts = []
    for host in [*certified, *quarantined]:
        passed = (hcas or {}).get(host, HCAS)
        gates = [GateResult(gate="hca_present", node=host, hca=h, status=GateStatus.PASS, reason=f"{h} present")
                 for h in HCAS]
        gates += [GateResult(gate="hca_rate", node=host, hca=h, status=GateStatus.FAIL, reason=f"{h} rate 200")
                  for h in HCAS if h not in passed]
        if host in quarantined:
            gates.append(GateResult(gate="pcie_link", node=host, gpu=3, status=GateStatus.FAIL, reason="Gen4 x8"))
        verdicts.append(NodeVerdict(node=host, node_group="gpu_nodes", sku="H200-SXM-141GB", gpus_expected=8,
                                    profile=str(spec.profile), certified=False, judged_at=judged).add(gates, spec))
    fleet = judge_fleet(spec, verdicts, outliers=False, customer=inv.customer, run_id=run_id)
    root = root or inv.path.parent.parent / "artifacts"
    ctx = RunContext(customer=inv.customer, run_id=run_id, root=root, check=check)
    summary = certify_stage.write_summary(inv, ctx, fleet, record=record)
    return ctx.stage_dir("certify") / "summary.json", summary


def certified_ledger(inv: Inventory, certified: Sequence[str], quarantined: Sequence[str] = (),
                     **kwargs: Any) -> tuple[Path, Ledger]:
    """`certification(...)`, then the customer's ledger as `ledger.read` returns it (what serve reads)."""
    path, _ = certification(inv, certified, quarantined, **kwargs)
    return ledger.read(path.parents[3], inv.customer)


def watch_fault(inv: Inventory, root: Path, tmp_path: Path, node: str, run_id: str) -> dict[str, Any]:
    """`invoke watch` (customer acme) on an Xid 79 signal of `node`, whose re-certification quarantines it."""
    import json

    from gridready.stages import watch

    signals = tmp_path / "signals.json"
    signals.write_text(json.dumps([{"node": node, "kind": "xid", "code": "79"}]))

    def recertify(inv_: Inventory, sub: RunContext) -> Any:
        return certification(inv_, [], [node], run_id=sub.run_id, root=sub.root, record=False)[1]

    return watch.run(inv, RunContext(customer="acme", run_id=run_id, root=root), str(signals),
                     watch.load_policy(None, None), recertify)
