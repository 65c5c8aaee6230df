"""Step 1, plan: which nodes serve which tiers, sized from the certification.

The customer's ledger (each node's latest verdict, gridready.ledger) is read fail closed per node: never certified,
expired, quarantined or drained nodes are left out; none usable -> exit 5. Tiers are sized on what remains (too few
-> exit 5; a TP x PP that can never fit the inventory -> exit 2). `bench` and `invoke plan` read the certification
and the plan here too.
"""

from __future__ import annotations

from typing import Any

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.contracts import HostOutcome
from gridready.errors import InvalidInput, NotCertified
from gridready.inventory import Inventory
from gridready.serving import topology
from gridready.serving.topology import Certification, TierPlan
from gridready.stages.serve.context import STAGE, Planned, ServeContext


def current_certification(inv: Inventory, ctx: RunContext) -> Certification:
    """The customer's ledger (exit 2 when foreign or drifted), read fail closed per node. `serve --render` needs no
    cluster and no certification: with none yet, it renders as if every GPU node were certified (and says so);
    a deployment always needs one."""
    found = ledger.read(ctx.root, inv.customer)
    if ctx.render and (found is None or not any(h in found[1].nodes for h in inv.gpu_hosts())):
        return topology.hypothetical_certification(inv)
    return topology.read_certification(inv, found)


def plan_summary(plans: list[TierPlan], cert: Certification) -> list[dict[str, Any]]:
    return [{
        "tier": p.tier.name, "engine": p.tier.engine, "node_group": p.group.name,
        "tensor_parallel": p.tensor_parallel, "pipeline_parallel": p.pipeline_parallel,
        "nodes_per_replica": p.nodes_per_replica,
        "replicas": [{"index": r.index, "head": r.head, "head_ip": cert.certified[r.head].ip,
                      "workers": list(r.workers)} for r in p.replicas],
    } for p in plans]


def run(inv: Inventory, run_ctx: RunContext) -> Planned:
    """The run's context and its plan; a refusal (not certified, invalid) is recorded there, with no certification."""
    ctx = ServeContext(inv, run_ctx)
    run_ctx.stage_dir(STAGE)
    with ctx.failing_on(NotCertified, InvalidInput):
        cert = current_certification(inv, run_ctx)
        for host in cert.quarantined:
            ctx.hosts[host] = HostOutcome(status="skipped", detail={"reason": "quarantined or not certified"})
        plans = topology.plan_tiers(inv, cert)
        ctx.data.update({"certification": cert.source, "certified": sorted(cert.certified),
                         "quarantined": cert.quarantined, "plan": plan_summary(plans, cert)})
        ctx.messages += cert.messages
        if not plans:
            ctx.messages.append("no serving tiers")
        return Planned(ctx, cert, plans)
    return Planned(ctx, None, [])
