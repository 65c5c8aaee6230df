"""`serve --render` on a hosts inventory: what playbooks/serve.yml would be given, written, nothing run.

The variables of serve.yml (each node's Ray role, env and the tiers' engine commands: the units' contents) go to
<stage_dir>/render/hosts/serve-vars.yml, and each Triton replica's role variables beside them (its model
repository and launch script are written under <stage_dir>/triton/). Only this target's rules apply: Kubernetes
manifests are neither rendered nor validated, so a node-local LoRA path, valid on hosts, passes.
Secrets never appear: the engines' keys and the HF token are read from the vault by Ansible on the nodes.
"""

from __future__ import annotations

import yaml

from gridready.artifacts import make_dirs, write_atomic
from gridready.stages.serve import config as serve_config
from gridready.stages.serve.context import STAGE, Planned


def render(planned: Planned) -> None:
    """serve.yml's variables and each Triton replica's role variables, written under <stage_dir>/render/hosts/."""
    inv, run, cert, plans = planned.ctx.inv, planned.ctx.run, planned.certification, planned.plans
    data, messages = planned.ctx.data, planned.ctx.messages
    stage_dir = run.stage_dir(STAGE)
    out = make_dirs(stage_dir / "render" / "hosts")
    files = [write_atomic(out / "serve-vars.yml", yaml.safe_dump(serve_config.hosts_extravars(inv, cert, plans),
                                                                 sort_keys=True))]
    for unit_hosts, role_vars, _ in serve_config.triton_units(inv, cert, plans, stage_dir):
        tier = role_vars.get("gridready_triton_trtllm_tier", "tier")
        files.append(write_atomic(out / f"triton-{tier}-{unit_hosts[0]}.yml",
                                  yaml.safe_dump({"hosts": unit_hosts, **role_vars}, sort_keys=True)))
    data["render"] = {"target": "hosts", "files": [str(f) for f in files]}
    messages.append(f"rendered serve.yml's variables for {len(plans)} tier(s) to {out} (nothing run)")
