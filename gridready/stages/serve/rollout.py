"""Step 6, rollout: `invoke serve --canary <tier> --weight N` (docs/layer3.md), the canary rollout of
gridready.stages.serve.canary.

The flags are checked before anything runs (exit 2, one line). On target hosts, serve deploys every tier with the
canary's route as it is without the canary, readiness/smoke/benchmark pass on each tier directly, and then the
canary is split in, observed on its live metrics through the router and promoted or rolled back: each weight change
is a run of serve.yml's router play (tag `router`), which rewrites the front's configuration and, only when it
changed, restarts LiteLLM or reloads HAProxy hitlessly (its master starts new workers, the old ones finish their
requests). On Kubernetes the canary is the weighted HTTPRoute of its route (rendered by serve).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridready import ansible
from gridready.artifacts import RunContext
from gridready.bench.endpoint import Endpoint
from gridready.charset import ascii_int
from gridready.errors import GridreadyError, InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import router, topology
from gridready.serving.topology import Certification, TierPlan
from gridready.spec.router import Route
from gridready.stages.common import outcome_from_playbook
from gridready.stages.serve import canary as canary
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import router as serve_router
from gridready.stages.serve.context import STAGE, Redeployed, RolledOut

DEFAULT_WEIGHT = 10


def check_flags(inv: Inventory, tier: str | None, weight: str | int | None) -> int:
    """The canary's share (%) from the flags; InvalidInput (exit 2) naming the flag or the spec key at fault."""
    if tier is None:
        if weight is not None:
            raise InvalidInput("--weight: (flag): only with --canary <tier>")
        return DEFAULT_WEIGHT
    try:
        pct = DEFAULT_WEIGHT if weight is None else weight if isinstance(weight, int) else ascii_int(weight)
    except ValueError:
        raise InvalidInput(f"--weight: (flag): {weight!r} is not a whole number of percent") from None
    if not 1 <= pct <= 99:
        raise InvalidInput(f"--weight: (flag): {pct} is not a canary share; give 1..99 (%)")
    cluster = topology.cluster_file(inv)
    tiers = {t.name: t for t in inv.spec.serving.tiers}
    if tier not in tiers:
        raise InvalidInput(f"--canary: (flag): {tier!r} is not a tier of {cluster} serving.tiers "
                           f"({', '.join(tiers)})")
    spec = inv.spec.serving.router
    if not spec.enabled:
        raise InvalidInput(f"{cluster}: serving.router.enabled: a canary is routed by the router; enable it")
    if inv.spec.serving.target == "hosts" and tiers[tier].engine != "vllm":
        raise InvalidInput(f"--canary: (flag): {tier} is a {tiers[tier].engine} tier; the live SLO gate of a "
                           "canary reads vLLM's histograms (gridready/bench/canary_gate.py)")
    slo = tiers[tier].slo
    if slo.ttft_ms_p99 is None and slo.tpot_ms_p99 is None and slo.e2e_ms_p99 is None:
        index = list(tiers).index(tier)
        raise InvalidInput(f"{cluster}: serving.tiers[{index}].slo: the canary {tier} is judged on its latency SLOs; "
                           "set ttft_ms_p99, tpot_ms_p99 or e2e_ms_p99")
    routes = spec.routes or router.default_routes((t.name, t.served_name) for t in inv.spec.serving.tiers)
    try:
        router.canary_route(routes, tier)
    except ValueError as err:
        raise InvalidInput(f"{cluster}: serving.router.routes: {err}") from err
    return pct


def on_hosts(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
             data: dict[str, Any], messages: list[str]) -> tuple[str, ExitCode]:
    """Split, observe, promote or roll back; the record goes to <stage>/decision/canary-<tier>/."""
    assert ctx.canary is not None
    plan = next((p for p in plans if p.tier.name == ctx.canary), None)
    if plan is None:
        raise InvalidInput(f"--canary: (flag): {ctx.canary} is not planned on the certified nodes")
    spec = inv.spec.serving.router
    routes = serve_router.routes(inv, ctx.root, plans)
    extravars = serve_config.hosts_extravars(inv, cert, plans)
    base = router.canary_route(routes, ctx.canary)
    stage_dir = ctx.stage_dir(STAGE)
    applied: list[str] = []
    front = serve_router.extravars(inv, ctx.root, cert, plans, chosen=routes)["gridready_serve_router"]
    router_url, live_path = front["url"], front["live_path"]
    metrics = Endpoint.for_tier(plan.tier, cert.certified[plan.replicas[0].head].ip).metrics_url

    def apply(route: Route) -> None:
        step = f"router-{len(applied) + 1}"
        run_vars = extravars | serve_router.extravars(inv, ctx.root, cert, plans,
                                                      chosen=router.replace_route(routes, route))
        serve_router.open_router_port(run_vars)
        result = ansible.run_playbook(inv, "serve.yml", stage_dir / f"canary-{step}", tags="router",
                                      extravars=run_vars)
        _, code, _ = outcome_from_playbook(result)
        applied.append(f"{step}: {result.status}, changed on {', '.join(result.changed_hosts) or 'no host'}")
        if code != ExitCode.OK:
            raise GridreadyError(f"canary {ctx.canary}: the router play failed ({result.status}, rc {result.rc}); "
                                 f"see {stage_dir / f'canary-{step}'}", code)
        if not serve_router.wait_live(router_url, float(inv.spec.serving.wait_timeout_s), path=live_path):
            raise GridreadyError(f"canary {ctx.canary}: the router did not come back after {step}",
                                 ExitCode.STAGE_FAILED)

    record = canary.rollout(base, ctx.canary, ctx.canary_weight, plan.tier.slo, router_url=router_url,
                        router_key=serve_router.client_key(inv), canary_metrics_url=str(metrics), apply=apply,
                        observe_s=spec.canary.observe_s, requests=spec.canary.requests,
                        out_dir=record_dir(stage_dir, ctx.canary))
    data["canary"] = {"record": str(record_dir(stage_dir, ctx.canary) / "canary.json"), "decision": record.decision,
                      "weight_pct": record.weight_pct, "router_runs": applied}
    messages.append(record.message)
    if record.exit_code:
        return "failed", ExitCode(record.exit_code)
    return "success", ExitCode.OK


def record_dir(stage_dir: Path, tier: str) -> Path:
    return stage_dir / "decision" / f"canary-{tier}"


def run(redeployed: Redeployed) -> RolledOut:
    """On target hosts with --canary, after tiers that passed verify (not check mode)."""
    ctx = redeployed.ctx
    if redeployed.proceeds and redeployed.on_hosts and not ctx.run.check and ctx.run.canary:
        with ctx.failing_on(GridreadyError):
            ctx.outcome(*on_hosts(ctx.inv, ctx.run, redeployed.certification, redeployed.plans, ctx.data,
                                  ctx.messages))
    return RolledOut.after(redeployed)
