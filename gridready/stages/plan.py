"""`invoke plan`: what each stage would do, without changing anything.

provision runs in Ansible check mode (with --diff); certify lists the gates per node group and profile;
serve renders what would be deployed (manifests for Kubernetes, units and engine arguments for hosts).
"""

from __future__ import annotations

from typing import Any

from gridready import console
from gridready.artifacts import RunContext, write_json_atomic
from gridready.inventory import Inventory
from gridready.stages import provision, serve


def _certify_plan(inv: Inventory) -> dict[str, Any]:
    cert = inv.spec.certification
    return {
        "profile": cert.profile.value,
        "dcgm_level": cert.effective_dcgm_level(),
        "nccl": cert.nccl.model_dump(),
        "waived": cert.waive,
        "not_applicable": cert.not_applicable,
        "groups": {g.name: {"sku": g.catalog_sku.name, "nodes": inv.groups.get(g.name, [])}
                   for g in inv.spec.node_groups},
    }


def _serve_plan(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    return {"rendered": serve.render(inv, ctx)}


def run(inv: Inventory, ctx: RunContext, as_json: bool = False) -> dict[str, Any]:
    plan_dir = ctx.stage_dir("plan")
    prov = provision.run(inv, ctx)
    result = {
        "provision": {"status": prov.status, "exit_code": prov.exit_code,
                      "changes": {h: o.detail.get("changed_tasks", []) for h, o in prov.hosts.items()}},
        "certify": _certify_plan(inv),
        "serve": _serve_plan(inv, ctx),
    }
    write_json_atomic(plan_dir / "plan.json", result)
    if as_json:
        import json
        import sys

        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    else:
        for host, changes in sorted(result["provision"]["changes"].items()):
            console.info(f"provision {host}: {len(changes)} change(s) pending")
            for change in changes:
                console.info(f"  - {change}")
        console.info(f"certify: profile {result['certify']['profile']}, DCGM level {result['certify']['dcgm_level']}")
        console.info(f"plan written to {plan_dir / 'plan.json'}")
    return result
