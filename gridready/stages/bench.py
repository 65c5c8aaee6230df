"""bench: re-run readiness, smoke, the load benchmark and the SLO gate against the tiers `serve` deployed.

Reads the ledger's deployment (the serve summary it points to: its endpoints) and the certification it was deployed
on, both validated against their contracts; no deployment. Writes artifacts/.../bench/ with the tier reports, the
decision record and summary.json. Exit 3 when a tier misses its SLO, 5 without a current certification, 2 without a
serve run that matches the current plan (or with a foreign summary).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridready import contracts, ledger
from gridready.artifacts import RunContext
from gridready.contracts import BenchSummary, ServeSummary
from gridready.errors import InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import topology
from gridready.stages.common import Timer
from gridready.stages.serve import plan as serve_plan
from gridready.stages.serve import verify as serve_verify

STAGE = "bench"


def deployed(inv: Inventory, ctx: RunContext, plans: list[topology.TierPlan]) -> str:
    """The serve summary of the ledger's deployment (never a render, check or refused run) whose endpoints are the
    tiers planned now; InvalidInput when there is none."""
    _, book = ledger.read(ctx.root, inv.customer)
    if book.serving is None:
        raise InvalidInput(f"bench: no deployment found for {inv.customer}; run `invoke serve` first")
    path = Path(book.serving.summary)
    summary = contracts.read(path, ServeSummary, ctx.root)
    served = {e.tier: e.heads for e in summary.endpoints}
    planned = {p.tier.name: [r.head for r in p.replicas] for p in plans}
    if served != planned:
        def said(tiers: dict[str, list[str]]) -> str:
            return "; ".join(f"{t} on {', '.join(h)}" for t, h in sorted(tiers.items())) or "none"

        raise InvalidInput(f"{path}: endpoints: served {said(served)}, but the current certification plans "
                           f"{said(planned)}; run `invoke serve` again")
    return str(path)


def run(inv: Inventory, ctx: RunContext) -> BenchSummary:
    timer = Timer()
    messages: list[str] = []
    data: dict[str, Any] = {}
    served: str | None = None
    if inv.spec.serving.target != "hosts":
        status, code = "error", ExitCode.INVALID
        messages.append("invoke bench drives tiers on target hosts; Kubernetes Services are cluster-internal")
    else:
        try:
            cert = serve_plan.current_certification(inv, ctx)
            plans = topology.plan_tiers(inv, cert)
            served = deployed(inv, ctx, plans)
        except (NotCertified, InvalidInput) as err:
            status, code = ("not-certified" if err.code == ExitCode.NOT_CERTIFIED else "error"), err.code
            messages += str(err).splitlines()
        else:
            data["plan"] = serve_plan.plan_summary(plans, cert)
            status, code = serve_verify.verify_tiers(inv, ctx, cert, plans, data, messages, stage=STAGE)
    return BenchSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, messages=messages, data=data,
        serve_summary=served,
    ).close(ctx)
