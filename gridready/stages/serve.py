"""serve: the serving tiers on certified nodes only, then readiness, smoke, benchmark and the SLO gate.

1. Certification from the customer's ledger (each node's latest verdict, gridready.ledger), fail closed per
   node: never certified, expired, quarantined or drained nodes are left out; none usable -> exit 5. Tiers are
   sized on what remains (too few -> exit 5; a TP x PP that can never fit the inventory -> exit 2).
2. Deploy (stages/serve_deploy.py) what stages/serve_config.py builds: target hosts runs playbooks/serve.yml;
   target kubernetes (and --render) renders the Pulumi stacks, validated, and applies them when the pulumi CLI
   exists.
3. target hosts, not in check mode: readiness -> smoke -> benchmark -> SLO gate -> decision record
   (stages/serve_verify.py), the same steps `invoke bench` repeats later.
"""

from __future__ import annotations

from typing import Any

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.contracts import SUMMARY_FILE, Endpoint, HostOutcome, ServeSummary
from gridready.errors import GridreadyError, InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import topology
from gridready.serving.topology import Certification
from gridready.stages import serve_canary, serve_config, serve_deploy, serve_render_hosts, serve_verify
from gridready.stages.common import Timer
from gridready.stages.serve_config import STAGE


def _result(inv: Inventory, ctx: RunContext, timer: Timer, status: str, code: ExitCode,
            hosts: dict[str, HostOutcome], messages: list[str], data: dict[str, Any],
            cert: Certification | None = None, endpoints: list[Endpoint] | None = None,
            roles: dict[str, str] | None = None) -> ServeSummary:
    """Write the summary; a deployment (roles given, exit 0, not check mode, not --render) becomes the ledger's
    serving state, which bench reads; a refused, failed, check or render run never does."""
    summary = ServeSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=hosts, messages=messages,
        data=data, certification=cert.source if cert else None, endpoints=endpoints or [],
    ).close(ctx)
    path = ctx.stage_dir(STAGE) / SUMMARY_FILE
    if roles is not None and not ctx.render and not ctx.check and summary.exit_code == 0:
        ledger.update(ctx.root, inv.customer, lambda book: ledger.record_serve(
            book, summary, path, roles, deployed=True))
    return summary


def run(inv: Inventory, ctx: RunContext) -> ServeSummary:
    timer = Timer()
    ctx.stage_dir(STAGE)
    hosts: dict[str, HostOutcome] = {}
    try:
        cert = serve_config.current_certification(inv, ctx)
        for host in cert.quarantined:
            hosts[host] = HostOutcome(status="skipped", detail={"reason": "quarantined or not certified"})
        plans = topology.plan_tiers(inv, cert)
    except (NotCertified, InvalidInput) as err:
        status = "not-certified" if err.code == ExitCode.NOT_CERTIFIED else "error"
        return _result(inv, ctx, timer, status, err.code, hosts, str(err).splitlines(), {})
    data: dict[str, Any] = {"certification": cert.source, "certified": sorted(cert.certified),
                            "quarantined": cert.quarantined, "plan": serve_config.plan_summary(plans, cert)}
    messages = list(cert.messages)
    if not plans:
        return _result(inv, ctx, timer, "success", ExitCode.OK, hosts, [*messages, "no serving tiers"], data, cert)
    on_hosts = inv.spec.serving.target == "hosts" and not ctx.render
    try:
        if on_hosts:
            status, code = serve_deploy.hosts(inv, ctx, cert, plans, hosts, data, messages)
            if code == ExitCode.OK and not ctx.check:
                status, code = serve_verify.verify_tiers(inv, ctx, cert, plans, data, messages, stage=STAGE)
            if code == ExitCode.OK and not ctx.check and ctx.canary:
                status, code = serve_canary.on_hosts(inv, ctx, cert, plans, data, messages)
        elif inv.spec.serving.target == "hosts":  # --render: what the hosts would run, never manifests
            status, code = serve_render_hosts.render(inv, ctx, cert, plans, data, messages)
        else:
            status, code = serve_deploy.kubernetes(inv, ctx, cert, plans, data, messages)
    except GridreadyError as err:
        status = {ExitCode.NOT_CERTIFIED: "not-certified", ExitCode.INVALID: "error"}.get(err.code, "failed")
        code = err.code
        messages += str(err).splitlines()
    served = serve_config.endpoints(plans, cert) if on_hosts else []
    return _result(inv, ctx, timer, status, code, hosts, messages, data, cert, served, serve_config.roles(plans))


def render(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """What `invoke plan` shows: the sizing on the current certification, then the validated manifests
    (target kubernetes, written to <stage_dir>/render) or each node's Ray role, env and each tier's command."""
    try:
        cert = serve_config.current_certification(inv, ctx)
        plans = topology.plan_tiers(inv, cert)
    except (NotCertified, InvalidInput) as err:
        return {"refused": str(err), "exit_code": int(err.code)}
    out: dict[str, Any] = {"target": inv.spec.serving.target, "plan": serve_config.plan_summary(plans, cert),
                           "quarantined": cert.quarantined, "certification": cert.source}
    if inv.spec.serving.target == "kubernetes":
        out["manifests"] = serve_config.render_manifests(inv, cert, plans, ctx.stage_dir(STAGE) / "render")
    else:
        serve_vars = serve_config.hosts_extravars(inv, cert, plans)["gridready_serve"]
        out["hosts"] = {h: {k: v[k] for k in ("role", "cluster", "node_ip", "head_address", "env")}
                        for h, v in serve_vars["hosts"].items()}
        out["tiers"] = [{k: t[k] for k in ("name", "head", "expected_gpus", "expected_nodes", "args")}
                        for t in serve_vars["tiers"]]
    return out
