"""provision: playbooks/provision.yml over the GPU node groups; per-host changes, installed versions and whether a
reboot is owed.

Where nodes serve (the ledger's deployment), provision rolls: batches drained from serving, provisioned, rebooted
where a reboot is owed, re-certified and returned (gridready.stages.roll, docs/provision.md "Rolling provision").
Where none does, and in check mode, it is one parallel run as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridready import ansible, ledger
from gridready.artifacts import RunContext
from gridready.contracts import HostOutcome, ProvisionSummary
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.provision_vars import role_vars
from gridready.stages import certify, roll, roll_plan
from gridready.stages.common import Timer, base_extravars, outcome_from_playbook
from gridready.stages.serve.drain import sync_serving

STAGE = "provision"


def extravars(inv: Inventory) -> dict[str, Any]:
    """What the roles learn from the spec: the role variables derived per node group, plus the customer."""
    out = base_extravars(inv)
    for group in inv.spec.node_groups:
        out.setdefault("gridready_group_vars", {})[group.name] = role_vars(inv.spec, group)
    return out


def reboot_of(res: dict[str, Any]) -> dict[str, Any] | None:
    """The `gridready_reboot` fact provision.yml reports per host ({owed, reasons, rebooted}), when this result
    holds it."""
    facts = res.get("ansible_facts") or {}
    found = res.get("gridready_reboot") or facts.get("gridready_reboot")
    if not isinstance(found, dict):
        return None
    reasons = found.get("reasons") or []
    return {"owed": _true(found.get("owed")), "rebooted": _true(found.get("rebooted")),
            "reasons": [str(r) for r in reasons] if isinstance(reasons, list) else [str(reasons)]}


def _true(value: Any) -> bool:
    """A boolean as a fact may carry it (a bool, or its string where Jinja rendered one)."""
    return value is True or str(value).strip().lower() == "true"


def _changes_and_versions(result: ansible.PlaybookResult) -> dict[str, dict[str, Any]]:
    per_host: dict[str, dict[str, Any]] = {}
    for ev in result.events:
        data = ev["event_data"]
        host, res = data.get("host"), data.get("res") or {}
        if not host:
            continue
        entry = per_host.setdefault(host, {"changed_tasks": [], "versions": {}, "changed_roles": [],
                                           "reboot": {"owed": False, "rebooted": False, "reasons": []}})
        if res.get("changed") and ev["event"] == "runner_on_ok":
            role = data.get("role") or "-"
            entry["changed_tasks"].append(f"{role}: {data.get('task')}")
            name = role.removeprefix("gridready_")
            if role != "-" and name not in entry["changed_roles"]:
                entry["changed_roles"].append(name)
        if ev["event"] in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            entry.setdefault("failure", f"{data.get('task')}: {str(res.get('msg') or res.get('stderr') or '')[:300]}")
        versions = res.get("gridready_versions") or (res.get("ansible_facts") or {}).get("gridready_versions")
        if isinstance(versions, dict):
            entry["versions"].update(versions)
        reboot = reboot_of(res)
        if reboot is not None:
            entry["reboot"] = reboot
    return per_host


def check_usage(ctx: RunContext) -> None:
    """The flags alone, before the run claims its folder: an unknown tag or a bad --batch/--max-fail is exit 2 with
    nothing written."""
    ansible.check_tags("provision.yml", "--tags", ctx.tags)
    ansible.check_tags("provision.yml", "--skip-tags", ctx.skip_tags)
    roll_plan.parse_amount(ctx.batch, "--batch", zero_ok=False)
    roll_plan.parse_amount(ctx.max_fail, "--max-fail", zero_ok=True)


Converged = tuple[str, ExitCode, dict[str, HostOutcome], dict[str, Any]]


def converge(inv: Inventory, ctx: RunContext, out_dir: Path, limit: str | None) -> Converged:
    """One run of provision.yml over `limit`: (status, exit code, per-host outcomes with their details, the
    runner's figures)."""
    result = ansible.run_playbook(
        inv, "provision.yml", out_dir, check=ctx.check, limit=limit, tags=ctx.tags,
        skip_tags=ctx.skip_tags, extravars={**extravars(inv), "gridready_provision_force": ctx.force},
    )
    status, code, hosts = outcome_from_playbook(result)
    details = _changes_and_versions(result)
    for host, outcome in hosts.items():
        outcome.detail = details.get(host, {"changed_tasks": [], "versions": {}})
    if code == ExitCode.OK and ctx.check and result.changed_hosts:
        status, code = "changes-pending", ExitCode.CHANGES_PENDING
    return status, code, hosts, {"playbook": result.playbook, "runner_status": result.status, "runner_rc": result.rc,
                                 "playbook_seconds": result.seconds}


def rolls(inv: Inventory, ctx: RunContext) -> bool:
    """Whether this run rolls: not check mode, and a node of the selection serves (the ledger's deployment), or an
    earlier roll stopped with nodes drained."""
    if ctx.check:
        return False
    _, book = ledger.read(ctx.root, inv.customer)
    return bool(roll.plan_nodes(inv, ctx, book)[1])


def run(inv: Inventory, ctx: RunContext) -> ProvisionSummary:
    timer = Timer()
    check_usage(ctx)
    if rolls(inv, ctx):
        hooks = roll.Hooks(converge=converge, certify=certify.run, route=sync_serving)
        return roll.apply(inv, ctx, timer, hooks, key=roll.key_of(extravars(inv), ctx))
    stage_dir = ctx.stage_dir(STAGE)
    status, code, hosts, figures = converge(inv, ctx, stage_dir, ctx.limit)
    messages = []
    if code == ExitCode.CHANGES_PENDING:
        messages.append(f"check mode: changes pending on {', '.join(h for h, o in sorted(hosts.items()) if o.changed)}")
    owed = sorted(h for h, o in hosts.items() if (o.detail.get("reboot") or {}).get("owed"))
    if owed:
        messages.append(f"reboot owed on {', '.join(owed)} (the hosts' detail.reboot says why)")
    return ProvisionSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=hosts, messages=messages,
        data={**figures, "rolled": False},
    ).close(ctx)
