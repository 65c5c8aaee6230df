"""provision: playbooks/provision.yml over the GPU node groups; per-host changes and installed versions."""

from __future__ import annotations

from typing import Any

from gridready import ansible
from gridready.artifacts import RunContext
from gridready.contracts import ProvisionSummary
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.provision_vars import role_vars
from gridready.stages.common import Timer, base_extravars, outcome_from_playbook

STAGE = "provision"


def extravars(inv: Inventory) -> dict[str, Any]:
    """What the roles learn from the spec: the role variables derived per node group, plus the customer."""
    out = base_extravars(inv)
    for group in inv.spec.node_groups:
        out.setdefault("gridready_group_vars", {})[group.name] = role_vars(inv.spec, group)
    return out


def _changes_and_versions(result: ansible.PlaybookResult) -> dict[str, dict[str, Any]]:
    per_host: dict[str, dict[str, Any]] = {}
    for ev in result.events:
        data = ev["event_data"]
        host, res = data.get("host"), data.get("res") or {}
        if not host:
            continue
        entry = per_host.setdefault(host, {"changed_tasks": [], "versions": {}})
        if res.get("changed") and ev["event"] == "runner_on_ok":
            entry["changed_tasks"].append(f"{data.get('role') or '-'}: {data.get('task')}")
        versions = res.get("gridready_versions") or (res.get("ansible_facts") or {}).get("gridready_versions")
        if isinstance(versions, dict):
            entry["versions"].update(versions)
    return per_host


def check_usage(ctx: RunContext) -> None:
    """The flags alone, before the run claims its folder: an unknown tag is exit 2 with nothing written."""
    ansible.check_tags("provision.yml", "--tags", ctx.tags)
    ansible.check_tags("provision.yml", "--skip-tags", ctx.skip_tags)


def run(inv: Inventory, ctx: RunContext) -> ProvisionSummary:
    timer = Timer()
    check_usage(ctx)
    stage_dir = ctx.stage_dir(STAGE)
    result = ansible.run_playbook(
        inv, "provision.yml", stage_dir, check=ctx.check, limit=ctx.limit, tags=ctx.tags,
        skip_tags=ctx.skip_tags, extravars={**extravars(inv), "gridready_provision_force": ctx.force},
    )
    status, code, hosts = outcome_from_playbook(result)
    details = _changes_and_versions(result)
    for host, outcome in hosts.items():
        outcome.detail = details.get(host, {"changed_tasks": [], "versions": {}})
    messages = []
    if code == ExitCode.OK and ctx.check and result.changed_hosts:
        status, code = "changes-pending", ExitCode.CHANGES_PENDING
        messages.append(f"check mode: changes pending on {', '.join(result.changed_hosts)}")
    return ProvisionSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=hosts, messages=messages,
        data={"playbook": result.playbook, "runner_status": result.status, "runner_rc": result.rc,
              "playbook_seconds": result.seconds},
    ).close(ctx)
