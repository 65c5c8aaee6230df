"""`invoke serve --down`: take the customer's serving tiers down and record that nothing is served.

Hosts: playbooks/serve-down.yml stops and disables the serving units gridready installed on the GPU nodes (engines,
router, health timers, then Ray); the serving firewall stays, so the ports stay closed. Kubernetes: `pulumi destroy`
of the serving stack (the platform stack, with the operators, stays). The ledger then holds an empty deployment,
which `invoke status` and `bench` read; a check-mode or failed run records nothing. `--limit` takes some nodes down
and keeps the others' roles.
"""

from __future__ import annotations

from typing import Any

from gridready import ansible, console, ledger
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.contracts import SUMMARY_FILE, HostOutcome, ServeSummary
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.stages.common import Timer, outcome_from_playbook

STAGE = "serve"


def _hosts_down(inv: Inventory, ctx: RunContext, data: dict[str, Any],
                hosts: dict[str, HostOutcome]) -> tuple[str, ExitCode]:
    result = ansible.run_playbook(inv, "serve-down.yml", ctx.stage_dir(STAGE), check=ctx.check, limit=ctx.limit,
                                  extravars={"gridready_serve_down_hosts": ",".join(inv.gpu_hosts())})
    status, code, outcomes = outcome_from_playbook(result)
    for host, outcome in outcomes.items():
        stopped = [r.get("item") for r in result.task_results(host, "Stop and disable them")]
        outcome.detail = {"stopped": [u for u in stopped if u]}
        hosts[host] = outcome
    data["stopped"] = {h: o.detail["stopped"] for h, o in hosts.items()}
    return status, code


def _kubernetes_down(inv: Inventory, ctx: RunContext, messages: list[str]) -> tuple[str, ExitCode]:
    if ctx.check:
        messages.append("check mode: would destroy the serving stack (the platform stack stays)")
        return "success", ExitCode.OK
    if not gpulumi.cli_available():
        messages.append("the pulumi CLI is not installed: nothing destroyed")
        return "failed", ExitCode.STAGE_FAILED
    api = None
    if ctx.purge_volumes:  # the kubeconfig is read (exit 2 on a bad one) before anything is destroyed
        from gridready.serving import topology
        from gridready.stages.serve import deploy as serve_deploy
        from gridready.stages.serve import k8s_wait

        api = k8s_wait.ApiReader(serve_deploy.kubeconfig(inv),
                                       f"{topology.cluster_file(inv)}: serving.kubeconfig")
    gpulumi.destroy("serving", inv.customer, gpulumi.state_dir(inv.customer),
                    on_output=lambda line: console.info(f"[pulumi serving] {line.rstrip()}") if line.strip() else None)
    messages.append("destroyed the serving stack (the platform stack, with its operators, stays)")
    if api is None:
        messages.append("kept the weights and engine-cache claims (the next serve reuses them); "
                        "--purge-volumes deletes them")
    else:
        from gridready.stages.serve import k8s_volumes

        gone = k8s_volumes.purge(api, inv.spec.serving.kubernetes.namespace)
        messages.append(f"deleted the kept claims: {', '.join(gone) or 'none found'}")
    return "success", ExitCode.OK


def run(inv: Inventory, ctx: RunContext) -> ServeSummary:
    timer = Timer()
    ctx.stage_dir(STAGE)
    hosts: dict[str, HostOutcome] = {}
    data: dict[str, Any] = {"down": True, "target": inv.spec.serving.target}
    messages: list[str] = []
    try:
        if inv.spec.serving.target == "kubernetes":
            status, code = _kubernetes_down(inv, ctx, messages)
        else:
            status, code = _hosts_down(inv, ctx, data, hosts)
    except GridreadyError as err:
        status, code = "failed", err.code
        messages += str(err).splitlines()
    summary = ServeSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=hosts, messages=messages,
        data=data,
    ).close(ctx)
    path = ctx.stage_dir(STAGE) / SUMMARY_FILE
    if code == ExitCode.OK and not ctx.check:
        def down(book: ledger.Ledger) -> ledger.Ledger:
            old = book.serving.roles if book.serving else {}
            left = {} if not ctx.limit else {n: r for n, r in old.items() if n not in hosts}
            return ledger.record_serve(book, summary, path, left, deployed=True)

        ledger.update(ctx.root, inv.customer, down)
    return summary
