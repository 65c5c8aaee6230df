"""serve on Kubernetes: readiness, smoke, benchmark and SLO gate through the router, after the controllers' wait.

The tiers are ClusterIP Services whose NetworkPolicies admit the authenticating router's pods only
(gridready/stacks/serving/program.py), so this machine checks them where clients reach them: through the router
(gridready/stacks/serving/router.py), the same bench.verify_tier as on hosts, one tier at a time by the route that
sends requests to it alone. The router is reached at
- `serving.kubernetes.router_url` when the inventory names it (the Gateway listener's, a LoadBalancer's, or a
  `kubectl port-forward svc/gridready-router` on this machine), else
- the Gateway `serving.router.gateway` that the router's HTTPRoute attaches to (rendered when serving.router is
  enabled): once the Gateway publishes an address and has accepted the route, its first HTTP(S) listener;
anything else is exit 2 before `pulumi up` (`reach`), as is a tier the router does not front (Triton), which
nothing outside the cluster reaches. GRIDREADY_SERVE_SKIP_BENCH=1 deploys without these checks.

The controller measures with the serving API key, the router's master key on Kubernetes (no client key's rate
limit shapes the benchmark). The router's added latency is not measured here: no direct path to a tier exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from gridready import bench, console, vault
from gridready.artifacts import RunContext
from gridready.bench.protocols import Api
from gridready.errors import InvalidInput, StageFailed
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import k8s_status, router_k8s, topology
from gridready.serving.k8s_status import Watch
from gridready.serving.topology import TierPlan
from gridready.spec.router import Route
from gridready.stages.serve import k8s_wait
from gridready.stages.serve import router as serve_router
from gridready.stages.serve.context import SKIP_ENV, STAGE, RouterReach

GATEWAY_API = "gateway.networking.k8s.io/v1"


def _route_of(tier: str, routes: list[Route]) -> tuple[str, list[str]] | None:
    """The route by which a tier is checked: one that sends to it alone, else one that sends to it among others."""
    found = []
    for route in routes:
        weighted = [t.tier for t in route.targets if t.weight > 0]
        if tier in weighted:
            found.append((route.model, [t for t in weighted if t != tier]))
    return min(found, key=lambda f: len(f[1])) if found else None


def reach(inv: Inventory, root: Any, plans: list[TierPlan]) -> RouterReach | None:
    """Before anything is applied: how serve will reach every tier through the router; InvalidInput (exit 2,
    naming the key) where the inventory names no way. None with GRIDREADY_SERVE_SKIP_BENCH (no checks)."""
    if os.environ.get(SKIP_ENV):
        return None
    cluster = topology.cluster_file(inv)
    names = [t.name for t in inv.spec.serving.tiers]
    for plan in plans:
        if plan.tier.engine not in router_k8s.OPENAI_SERVICE_ENGINES:
            raise InvalidInput(
                f"{cluster}: serving.tiers[{names.index(plan.tier.name)}].engine: tier {plan.tier.name} "
                f"({plan.tier.engine}) on Kubernetes is not fronted by the router, and nothing outside the cluster "
                f"reaches it, so serve cannot check it; {SKIP_ENV}=1 deploys it without readiness, smoke, "
                "benchmark and SLO gate")
    served = serve_router.routes(inv, root, plans)
    routes: dict[str, tuple[str, list[str]]] = {}
    for plan in plans:
        found = _route_of(plan.tier.name, served)
        if found is None:
            raise InvalidInput(f"{cluster}: serving.router.routes: no route sends requests to tier {plan.tier.name} "
                               "(weight 0 or a fallback only), so serve cannot check it through the router")
        routes[plan.tier.name] = found
    k8s, spec = inv.spec.serving.kubernetes, inv.spec.serving.router
    if k8s.router_url:
        return RouterReach(how="serving.kubernetes.router_url", url=k8s.router_url, routes=routes)
    if spec.enabled:
        timeout = inv.spec.serving.ready_timeout_s
        return RouterReach(how=f"Gateway {k8s.namespace}/{spec.gateway}", routes=routes, gateway=[
            Watch("router", GATEWAY_API, "Gateway", k8s.namespace, spec.gateway, timeout),
            Watch("router", GATEWAY_API, "HTTPRoute", k8s.namespace, router_k8s.ROUTER_SERVICE, timeout)])
    raise InvalidInput(f"{cluster}: serving.kubernetes.router_url: serve checks the tiers through the router from "
                       "this machine, and the inventory names no way to reach it: set router_url (the Gateway "
                       "listener's or a LoadBalancer's URL, or a port-forward's) or enable serving.router (its "
                       f"HTTPRoute on Gateway {spec.gateway}); or {SKIP_ENV}=1 to deploy without the checks")


def router_url(found: RouterReach, read: k8s_wait.Reader, *, poll_s: float = k8s_wait.POLL_S) -> str:
    """The router's URL: the inventory's, or (after the Gateway is programmed with an address and has accepted the
    router's HTTPRoute) its first HTTP(S) listener at its published address. StageFailed (exit 3) otherwise."""
    if found.url:
        return found.url
    k8s_wait.wait_ready(read, found.gateway, poll_s=poll_s)
    gateway = found.gateway[0]
    url = k8s_status.gateway_url(read(gateway) or {})
    if url is None:
        raise StageFailed(f"router: {gateway.ref} has no HTTP or HTTPS listener to reach the router by; set "
                          "serving.kubernetes.router_url")
    return url


def _controller_state(read: k8s_wait.Reader, watches: list[Watch], tier: str) -> Callable[[], str]:
    """The tier's workloads as their controllers report them now, for a tier that is not ready through the router."""

    def state() -> str:
        mine = [w for w in watches if w.tier == tier]
        return "; ".join(f"{w.ref}: {k8s_status.state(w.kind, read(w)).detail}" for w in mine) or "no workload"

    return state


def verify(inv: Inventory, ctx: RunContext, plans: list[TierPlan], found: RouterReach, url: str,
           read: k8s_wait.Reader, watches: list[Watch], data: dict[str, Any], messages: list[str]
           ) -> tuple[str, ExitCode]:
    """Readiness, smoke, benchmark and SLO gate of every tier through the router at `url`, the tier reports and a
    decision record per model served by more than one tier, as on hosts; the router's figures in data["router"]."""
    stage_dir = ctx.stage_dir(STAGE)
    key = vault.ensure_api_key(inv.customer, inv.path)
    reuse = inv.spec.serving.decision.prefix_reuse
    workload = (bench.Workload(shared_prefix_len=reuse.system_prompt_tokens, shared_prefix_share=reuse.share)
                if reuse else bench.Workload())
    reports = []
    for plan in plans:
        model, shared = found.routes[plan.tier.name]
        if shared:
            messages.append(f"tier {plan.tier.name}: checked through route {model}, which also sends to "
                            f"{', '.join(shared)}: its figures are the route's")
        endpoint = bench.Endpoint(url=url, api=Api.OPENAI_CHAT, model=model, api_key=SecretStr(key))
        reports.append(bench.verify_tier(endpoint, plan.tier, workload, gpus=plan.gpus,
                                         ready_timeout_s=float(inv.spec.serving.wait_timeout_s),
                                         unit_state=_controller_state(read, watches, plan.tier.name),
                                         log_lines=list, progress=console.Steps(f"{STAGE} {plan.tier.name}")))
    bench.write_tier_reports(stage_dir, reports, inv.customer)
    # a shared route's figures are not one tier's: only tiers with a route of their own are compared
    bench.write_decisions_by_model(stage_dir, [(p.tier.model.source, r) for p, r in zip(plans, reports, strict=True)
                                               if not found.routes[p.tier.name][1]], inv.spec.serving.decision)
    data["bench"] = bench.bench_data(reports)
    data["router"] = {"url": url, "reached_by": found.how,
                      "routes": sorted({m for m, _ in found.routes.values()}), "overhead": None}
    messages.append("router: its added latency is not measured on Kubernetes (the tiers admit the router's pods "
                    "only: there is no direct path to compare with)")
    failed = [r.gate.message for r in reports if not r.gate.passed]
    messages += failed
    return ("failed", ExitCode.STAGE_FAILED) if failed else ("success", ExitCode.OK)
