"""Step 4, verify: readiness -> smoke -> benchmark -> SLO gate per tier, then the decision per model and the
router's added latency: what `serve` runs after a deployment on target hosts and `bench` runs again on its own.

Each tier is measured on its first replica's head (gridready.bench.verify_tier); a tier that never gets ready is
reported with its unit's state and last log lines, read over SSH. Writes the tier reports, the monitoring config,
one decision record per model served by more than one tier, and the router's added latency into `data`. At
deployment (stage serve) a fixed-cost tier's queue delay is swept, one redeploy per setting
(gridready/stages/serve/embedding.py); putting its own setting back is the next step's (redeploy).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gridready import bench, console, vault
from gridready.artifacts import RunContext
from gridready.bench import fixed_cost, queue_delay
from gridready.errors import GridreadyError, StageFailed
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.monitoring.write import write_monitoring
from gridready.serving.topology import Certification, TierPlan
from gridready.spec import API_KEY_ENGINES
from gridready.stages.fabric import SshRunner
from gridready.stages.serve import embedding, k8s_verify
from gridready.stages.serve import router as serve_router
from gridready.stages.serve.context import SKIP_ENV, STAGE, Deployed, Verified

__all__ = ["SKIP_ENV", "run", "verify_tiers"]


def unit_name(tier: Any) -> str:
    """The systemd unit that serves a tier on its head node (roles gridready_vllm, gridready_triton_trtllm)."""
    if tier.engine == "sglang":
        return f"sglang-{tier.name}"  # role gridready_sglang
    return f"vllm-{tier.name}" if tier.engine == "vllm" else f"gridready-triton-{tier.name}"


def unit_probes(inv: Inventory, host: str, unit: str) -> tuple[Callable[[], str], Callable[[], list[str]]]:
    """(unit state, last log lines) of `unit` on `host` over SSH, for the not-ready report."""
    runner = SshRunner.from_inventory(inv)

    def state() -> str:
        res = runner.run(host, ["systemctl", "is-active", unit], 20)
        return f"{unit} on {host}: {res.stdout.strip() or res.stderr.strip() or 'unknown'}"

    def logs() -> list[str]:
        res = runner.run(host, ["journalctl", "-u", unit, "-n", "20", "--no-pager", "-o", "cat"], 20)
        return res.stdout.splitlines()[-20:]

    return state, logs


def _queue_delay_sweep(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
                      plan: TierPlan, endpoint: bench.Endpoint, stage: str, data: dict[str, Any]) -> list[str]:
    """Sweep max_queue_delay_microseconds on the tier's first replica and write the decision record; the tier is
    left on the last setting tried (the redeploy step puts its own back). Returns failures (the tier could not be
    redeployed or measured)."""
    def redeploy(delay: int | None) -> None:
        embedding.redeploy_embedding(inv, ctx, cert, plans, plan, delay, stage)

    timeout = float(inv.spec.serving.wait_timeout_s)
    try:
        decision = queue_delay.sweep(endpoint, plan.tier, redeploy, ready_timeout_s=timeout,
                                     progress=console.Steps(f"{stage} {plan.tier.name} queue delay"))
    except StageFailed as err:
        decision = None
        failure = [str(err)]
    else:
        failure = [] if decision.best_us is not None else [f"tier {plan.tier.name}: queue-delay sweep: "
                                                           f"{decision.reason}"]
    if decision is not None:
        folder = ctx.stage_dir(stage) / "decision" / plan.tier.model.source.replace("/", "--")
        queue_delay.write(folder, decision)
        data.setdefault("queue_delay", {})[plan.tier.name] = {
            "best_us": decision.best_us, "met_slo": decision.met_slo, "configured_us": decision.configured_us,
            "reason": decision.reason, "record": str(folder / f"{queue_delay.RECORD}.md")}
    return failure


def verify_tiers(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan], data: dict[str, Any],
                 messages: list[str], stage: str, swept: list[TierPlan] | None = None) -> tuple[str, ExitCode]:
    """Readiness, smoke, benchmark and SLO gate per tier (first replica's head), decision per model; the tiers whose
    queue delay was swept are added to `swept`."""
    if os.environ.get(SKIP_ENV):
        messages.append(f"benchmark skipped ({SKIP_ENV})")
        return "success", ExitCode.OK
    stage_dir = ctx.stage_dir(stage)
    api_key = vault.ensure_api_key(inv.customer, inv.path) if any(p.tier.engine in API_KEY_ENGINES for p in plans) \
        else None
    reports = []
    reuse = inv.spec.serving.decision.prefix_reuse
    workload = (bench.Workload(shared_prefix_len=reuse.system_prompt_tokens, shared_prefix_share=reuse.share)
                if reuse else bench.Workload())
    sweep_failures: list[str] = []
    for plan in plans:
        head = plan.replicas[0].head
        endpoint = bench.Endpoint.for_tier(plan.tier, cert.certified[head].ip, api_key=api_key)
        unit_state, log_lines = unit_probes(inv, head, unit_name(plan.tier))
        fixed = plan.tier.embedding
        reports.append(bench.verify_tier(endpoint, plan.tier,
                                         fixed_cost.workload_for(fixed) if fixed else workload,
                                         gpus=plan.gpus,
                                         ready_timeout_s=float(inv.spec.serving.wait_timeout_s),
                                         unit_state=unit_state, log_lines=log_lines,
                                         progress=console.Steps(f"{stage} {plan.tier.name}")))
        if fixed is not None and fixed.sweep is not None and reports[-1].readiness.ready:
            if stage == "serve":  # it restarts the tier once per setting: at deployment, never on a live tier
                sweep_failures += _queue_delay_sweep(inv, ctx, cert, plans, plan, endpoint, stage, data)
                if swept is not None:
                    swept.append(plan)
            else:
                messages.append(f"tier {plan.tier.name}: queue-delay sweep not run by {stage} (it restarts the "
                                "tier once per setting; serve runs it)")
    bench.write_tier_reports(stage_dir, reports, inv.customer)
    write_monitoring(stage_dir / "monitoring", inv.customer, [p.tier for p in plans], target="hosts",
                     tier_hosts={p.tier.name: [cert.certified[r.head].ip for r in p.replicas] for p in plans},
                     nodes=[c.ip for c in cert.certified.values()])
    bench.write_decisions_by_model(stage_dir, [(p.tier.model.source, r) for p, r in zip(plans, reports, strict=True)],
                                   inv.spec.serving.decision)
    data["bench"] = bench.bench_data(reports)
    # serve waits for the router it just started; bench finds it up or says so within a minute
    live_timeout = None if stage == "serve" else serve_router.LIVE_TIMEOUT_AFTER_SERVE_S
    router_error = serve_router.measure_overhead(inv, cert, plans, data, messages, api_key,
                                                 live_timeout_s=live_timeout)
    failed = [r.gate.message for r in reports if not r.gate.passed] + ([router_error] if router_error else [])
    failed += sweep_failures
    messages += failed
    return ("failed", ExitCode.STAGE_FAILED) if failed else ("success", ExitCode.OK)


def run(deployed: Deployed) -> Verified:
    """On target hosts, after a deployment that changed the hosts (not check mode, not --render); on
    Kubernetes after the stacks were applied and every workload is ready, through the router."""
    ctx, swept = deployed.ctx, list[TierPlan]()
    if deployed.proceeds and deployed.on_hosts and not ctx.run.check:
        with ctx.failing_on(GridreadyError):
            ctx.outcome(*verify_tiers(ctx.inv, ctx.run, deployed.certification, deployed.plans, ctx.data,
                                      ctx.messages, stage=STAGE, swept=swept))
    elif deployed.proceeds and deployed.k8s is not None:  # applied on Kubernetes, every workload ready
        k8s = deployed.k8s
        with ctx.failing_on(GridreadyError):
            ctx.outcome(*k8s_verify.verify(ctx.inv, ctx.run, deployed.plans, k8s.reach, k8s.url, k8s.read,
                                           k8s.watches, ctx.data, ctx.messages))
    return Verified.after(deployed, swept=swept)
