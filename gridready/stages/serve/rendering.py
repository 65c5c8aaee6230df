"""Step 2, rendering: what each target is handed for this run, written and validated, nothing run yet.

target hosts: the API key and the router's secrets in the vault (Ansible reads them there), serve.yml's variables
(Ray topology and sizing, vLLM and SGLang units, the router with its port opened in the serving firewall) and each
Triton replica's model repository and role variables. target kubernetes: both Pulumi stacks' config, their
manifests rendered under mocks, validated offline and written to <stage_dir>/render/. --render renders what the
target would run: the manifests for kubernetes, serve.yml's variables for hosts (render_hosts.py).
"""

from __future__ import annotations

from typing import Any

from gridready import vault
from gridready.errors import GridreadyError
from gridready.spec import API_KEY_ENGINES
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import render_hosts
from gridready.stages.serve import router as serve_router
from gridready.stages.serve.context import STAGE, Planned, Rendered

Units = list[tuple[list[str], dict[str, Any], dict[str, Any]]]


def hosts(planned: Planned) -> tuple[dict[str, Any], Units]:
    """serve.yml's variables and the Triton replicas' units; their summary entries go to data["triton"]."""
    inv, run, cert, plans = planned.ctx.inv, planned.ctx.run, planned.certification, planned.plans
    if any(p.tier.engine in API_KEY_ENGINES for p in plans):
        vault.ensure_api_key(inv.customer, inv.path)  # Ansible reads it from the vault itself, never from here
    extravars = (serve_config.hosts_extravars(inv, cert, plans)
                 | serve_router.extravars(inv, run.root, cert, plans, run.canary))
    serve_router.open_router_port(extravars)
    units = serve_config.triton_units(inv, cert, plans, run.stage_dir(STAGE))
    planned.ctx.data["triton"] = [entry for _, _, entry in units]
    return extravars, units


def kubernetes(planned: Planned) -> dict[str, dict[str, Any]]:
    """Both stacks' config, their manifests validated and written (data["render"])."""
    ctx, cert, plans = planned.ctx, planned.certification, planned.plans
    inv, run = ctx.inv, ctx.run
    stage_dir = run.stage_dir(STAGE)
    configs = serve_config.stack_configs(inv, cert, plans, run.root, run.canary, run.canary_weight)
    ctx.data["render"] = serve_config.render_manifests(inv, cert, plans, stage_dir / "render", configs)
    if run.render or inv.spec.serving.target != "kubernetes":
        ctx.messages.append(f"rendered {sum(c['manifests'] for c in ctx.data['render']['counts'].values())} "
                            f"manifests to {stage_dir / 'render'} (validated)")
    return configs


def run(planned: Planned) -> Rendered:
    if not planned.proceeds:
        return Rendered.after(planned)
    with planned.ctx.failing_on(GridreadyError):
        if planned.on_hosts:
            extravars, units = hosts(planned)
            return Rendered.after(planned, extravars=extravars, triton_units=units)
        if planned.ctx.inv.spec.serving.target == "hosts":  # --render: what the hosts would run, never manifests
            render_hosts.render(planned)
            return Rendered.after(planned)
        return Rendered.after(planned, stack_configs=kubernetes(planned))
    return Rendered.after(planned)
