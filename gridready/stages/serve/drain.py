"""Drain from live serving: on target hosts the router stops sending requests to the replicas of drained nodes, and
takes them back when the nodes return; on Kubernetes the platform stack gives a drained node gridready's own taint
as NoExecute, so its serving pods leave for certified nodes, and takes it off on return (`sync_taints`). Called
by the watcher after it drained or returned a node (gridready.stages.watch); on hosts nothing else of the
deployment changes (the engines keep running, so a returned node serves again at once).

The deployment is the ledger's `serving` one: its plans are planned again on the nodes it served on (planning is
deterministic) and must give the endpoints its summary recorded, else the router is left alone and the reason
said (`invoke serve` re-plans). The router keeps its host; a tier left with no replica keeps its routes (LiteLLM's
health-check routing and cooldown already refuse a dead upstream; removing the route would answer 404)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gridready import ansible, contracts, ledger
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.contracts import ServeSummary
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import router_drain, router_hosts, topology, vllm
from gridready.serving.topology import Certification, CertifiedNode, TierPlan
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import router as serve_router


def deployed(inv: Inventory, book: ledger.Ledger) -> tuple[Certification, list[TierPlan]] | str:
    """The deployment's certification and plans as serve made them, or why they cannot be had."""
    if book.serving is None:
        return "no deployment in the ledger"
    nodes = sorted(n for n in book.serving.roles if n in inv.gpu_hosts())
    certified = {}
    for n in nodes:
        entry = book.nodes.get(n)
        hcas = None if entry is None or entry.hcas_passed is None else tuple(entry.hcas_passed)
        certified[n] = CertifiedNode(name=n, group=inv.node_group_of(n) or "", ip=topology.node_ip(inv, n),
                                     hcas=hcas)
    cert = Certification(source=f"ledger serving {book.serving.run_id}", finished_at=datetime.now(UTC),
                         certified=certified)
    try:
        plans = topology.plan_tiers(inv, cert)
        summary = contracts.read(Path(book.serving.summary), ServeSummary)
    except GridreadyError as err:
        return f"the deployment cannot be planned again: {err}"
    served = {e.tier: list(e.heads) for e in summary.endpoints}
    if served != {p.tier.name: [r.head for r in p.replicas] for p in plans}:
        return (f"the deployment of run {book.serving.run_id} is not what the inventory plans today on its nodes; "
                "`invoke serve` re-plans it")
    return cert, plans


def without(plans: list[TierPlan], drained: set[str]) -> list[TierPlan]:
    """The plans with every replica that uses a drained node left out (a tier may be left with none)."""
    return [replace(p, replicas=tuple(r for r in p.replicas if not set(r.nodes) & drained)) for p in plans]


def router_vars(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
                drained: set[str]) -> dict[str, Any]:
    """serve.yml's variables for its router play: the deployment as it is, the router's upstreams without the
    drained replicas. A tier with no replica left keeps its upstreams (see the module docstring)."""
    kept = [p if p.replicas else full for p, full in zip(without(plans, drained), plans, strict=True)]
    run_vars = serve_config.hosts_extravars(inv, cert, plans)
    routes = serve_router.routes(inv, ctx.root, plans)
    # the router stays where serve put it: placed by the whole deployment, not by what is left of it
    routed = serve_router.extravars(inv, ctx.root, cert, kept, chosen=routes,
                                    placed=serve_router.placement(inv, cert, plans))
    if routed:
        # the firewall keeps the deployment's: a drained replica's tier port stays the router's alone
        routed["gridready_serve_router"]["upstream_ports"] = router_hosts.upstream_ports(plans)
    run_vars |= routed
    serve_router.open_router_port(run_vars)
    return run_vars


def sync_taints(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """Kubernetes: `pulumi up` of the platform stack with the ledger's certification and drained set (labels and
    gridready's taint only; every other taint stays: gridready.stacks.platform.program.merged_taints)."""
    _, book = ledger.read(ctx.root, inv.customer)
    drained = frozenset(n for n, e in book.nodes.items() if e.drained)
    try:
        cert = topology.read_certification(inv, ledger.read(ctx.root, inv.customer))
    except GridreadyError as err:
        return {"applied": False, "reason": str(err)}
    groups = {h: inv.node_group_of(h) or "" for h in inv.gpu_hosts()}
    config = vllm.platform_stack_config(inv.customer, inv.spec.serving, cert, inv.hosts, groups, drained)
    if not gpulumi.cli_available():
        return {"applied": False, "drained_nodes": sorted(drained),
                "reason": "the pulumi CLI is not installed: the drain taint is applied by the next `invoke serve`"}
    gpulumi.up("platform", inv.customer, config, {"kubeconfig": serve_deploy.kubeconfig(inv)},
               gpulumi.state_dir(inv.customer))
    return {"applied": True, "drained_nodes": sorted(drained),
            "reason": "platform stack applied: gridready's taint NoExecute on the drained nodes"}


def sync_serving(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """Apply the ledger's drained set to the serving of the deployment (the router on hosts, the node taints on
    Kubernetes); what it did, for the watcher's report."""
    spec = inv.spec.serving
    if spec.target == "kubernetes":
        return sync_taints(inv, ctx)
    if not spec.router.enabled:
        return {"applied": False, "reason": "no router on these target hosts; a drained node is left out by the "
                                            "next `invoke serve`"}
    _, book = ledger.read(ctx.root, inv.customer)
    found = deployed(inv, book)
    if isinstance(found, str):
        return {"applied": False, "reason": found}
    cert, plans = found
    drained = {n for n, e in book.nodes.items() if e.drained and n in cert.certified}
    if spec.router.tier_routers.enabled:
        return sync_tier_routers(inv, cert, plans, drained)
    out_dir = ctx.stage_dir("watch") / f"router-{book.revision}"
    result = ansible.run_playbook(inv, "serve.yml", out_dir, tags="router",
                                  extravars=router_vars(inv, ctx, cert, plans, drained))
    out = {"applied": result.rc == 0, "drained_replicas": sorted(drained), "artifacts": str(out_dir),
           "reason": f"router play {result.status} (rc {result.rc})"}
    if result.rc != 0:
        out["exit_code"] = int(ExitCode.STAGE_FAILED)
    return out


def tier_router_workers(inv: Inventory, cert: Certification, plans: list[TierPlan], drained: set[str]
                        ) -> dict[str, list[str]]:
    """Per tier router URL, the replicas it should hold with `drained` left out (gridready.serving.router_drain)."""
    by_tier = {p.tier.name: p for p in plans}
    out = {}
    for tr in router_hosts.tier_routers(inv.spec.serving.router, plans, cert.certified,
                                        serve_router.placement(inv, cert, plans)):
        plan = by_tier[tr.tier]

        def url(r: Any, port: int = plan.tier.port) -> str:
            return router_drain.replica_url(cert.certified[r.head].ip, port)

        out[tr.url] = router_drain.wanted_workers(plan.replicas, url, drained)
    return out


def sync_tier_routers(inv: Inventory, cert: Certification, plans: list[TierPlan], drained: set[str]
                      ) -> dict[str, Any]:
    """The drained set to the running tier routers through their worker API: seconds, no restart; the front
    router (LiteLLM) reaches each tier through its tier router, so its configuration does not change."""
    results = router_drain.sync_all(tier_router_workers(inv, cert, plans, drained))
    errors = [f"{r.router}: {r.error}" for r in results if r.error]
    out: dict[str, Any] = {"applied": not errors, "drained_replicas": sorted(drained),
                           "tier_routers": [r.as_dict() for r in results],
                           "reason": "; ".join(errors) if errors else "tier routers synced through their worker API"}
    if errors:
        out["exit_code"] = int(ExitCode.STAGE_FAILED)
    return out


def tier_router_state(inv: Inventory, root: Path) -> list[dict[str, Any]]:
    """For `invoke status`: per tier router of the deployment, the replicas it holds now (its GET /list_workers),
    the ones the ledger wants, and whether they agree; [] without tier routers or a deployment to plan again."""
    if inv.spec.serving.target == "kubernetes" or not (inv.spec.serving.router.enabled
                                                       and inv.spec.serving.router.tier_routers.enabled):
        return []
    _, book = ledger.read(root, inv.customer)
    found = deployed(inv, book)
    if isinstance(found, str):
        return []
    cert, plans = found
    drained = {n for n, e in book.nodes.items() if e.drained and n in cert.certified}
    wanted = tier_router_workers(inv, cert, plans, drained)
    held = router_drain.held_all(list(wanted))
    return [{"router": url, "wants": sorted(w), "holds": held[url][0], "error": held[url][1],
             "in_sync": held[url][1] is None and sorted(w) == held[url][0]} for url, w in wanted.items()]
