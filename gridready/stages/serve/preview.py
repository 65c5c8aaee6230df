"""What `invoke plan` shows of serve (`gridready.stages.serve.render`): the plan step's sizing on the current
certification, then what the rendering step would hand each target, with nothing written to the vault or run."""

from __future__ import annotations

from typing import Any

from gridready.artifacts import RunContext
from gridready.errors import InvalidInput, NotCertified
from gridready.inventory import Inventory
from gridready.serving import topology
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import plan
from gridready.stages.serve.context import STAGE


def render(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """What `invoke plan` shows: the sizing on the current certification, then the validated manifests
    (target kubernetes, written to <stage_dir>/render) or each node's Ray role, env and each tier's command."""
    try:
        cert = plan.current_certification(inv, ctx)
        plans = topology.plan_tiers(inv, cert)
    except (NotCertified, InvalidInput) as err:
        return {"refused": str(err), "exit_code": int(err.code)}
    out: dict[str, Any] = {"target": inv.spec.serving.target, "plan": plan.plan_summary(plans, cert),
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
