"""Step 7, record: the run's summary (ServeSummary, with the endpoints on target hosts) and, for a deployment, the
ledger's serving state.

A deployment (tiers planned, exit 0, not check mode, not --render) becomes the ledger's serving state, which bench,
drain and status read; a refused, failed, check or render run never does.
"""

from __future__ import annotations

from gridready import ledger
from gridready.bench.endpoint import Endpoint as BenchEndpoint
from gridready.contracts import SUMMARY_FILE, Endpoint, ServeSummary
from gridready.serving.topology import Certification, TierPlan
from gridready.stages.serve.context import STAGE, RolledOut


def roles(plans: list[TierPlan]) -> dict[str, str]:
    """Each planned node's serving role, for the ledger and `invoke status`."""
    out: dict[str, str] = {}
    for plan in plans:
        for r in plan.replicas:
            out[r.head] = f"{plan.tier.name} head"
            out.update({w: f"{plan.tier.name} worker" for w in r.workers if w not in out})
    return out


def endpoints(plans: list[TierPlan], cert: Certification) -> list[Endpoint]:
    """Where each tier answers on target hosts (its first replica's head), for clients and `invoke bench`."""
    out = []
    for plan in plans:
        heads = [r.head for r in plan.replicas]
        ep = BenchEndpoint.for_tier(plan.tier, cert.certified[heads[0]].ip)
        out.append(Endpoint(tier=plan.tier.name, engine=plan.tier.engine, api=str(ep.api), model=ep.model,
                            url=ep.url, metrics_url=ep.metrics_url, heads=heads))
    return out


def run(rolled: RolledOut) -> ServeSummary:
    ctx, cert, plans = rolled.ctx, rolled.cert, rolled.plans
    inv, run_ctx = ctx.inv, ctx.run
    deployed = cert is not None and bool(plans)
    served = endpoints(plans, cert) if cert is not None and plans and rolled.on_hosts else []
    summary = ServeSummary(
        customer=inv.customer, run_id=run_ctx.run_id, status=ctx.status,  # type: ignore[arg-type]
        exit_code=int(ctx.code), check=run_ctx.check, started_at=ctx.timer.started_at, seconds=ctx.timer.seconds,
        hosts=ctx.hosts, messages=ctx.messages, data=ctx.data, certification=cert.source if cert else None,
        endpoints=served,
    ).close(run_ctx)
    path = run_ctx.stage_dir(STAGE) / SUMMARY_FILE
    if deployed and not run_ctx.render and not run_ctx.check and summary.exit_code == 0:
        ledger.update(run_ctx.root, inv.customer, lambda book: ledger.record_serve(
            book, summary, path, roles(plans), deployed=True))
    return summary
