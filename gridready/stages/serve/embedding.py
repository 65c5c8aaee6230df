"""One replica of a fixed-cost (Triton embedding) tier deployed again at a given queue delay: what the verify
step's queue-delay sweep does once per setting, and the redeploy step once more to put the tier's own setting back.
"""

from __future__ import annotations

from gridready import ansible
from gridready.artifacts import RunContext, make_dirs
from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving.topology import Certification, TierPlan
from gridready.stages.common import outcome_from_playbook
from gridready.stages.serve import config as serve_config


def redeploy_embedding(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
                       plan: TierPlan, delay_us: int | None, stage: str) -> ansible.PlaybookResult:
    """The first replica of a fixed-cost tier again, with max_queue_delay_microseconds `delay_us` (None: the
    tier's own): `--tags triton` limited to its node (check mode with ctx.check); the role's handler restarts
    Triton on a changed config. Raises StageFailed when the run fails."""
    stage_dir = ctx.stage_dir(stage)
    unit_hosts, role_vars, _ = serve_config.embedding_units(inv, cert, plan, stage_dir, delay_us)[0]
    label = "configured" if delay_us is None else f"qd{delay_us}"
    run_dir = stage_dir / f"triton-{plan.tier.name}-{label}"
    make_dirs(run_dir)
    extravars = (serve_config.hosts_extravars(inv, cert, plans) | role_vars
                 | {"gridready_serve_triton_hosts": unit_hosts})
    result = ansible.run_playbook(inv, "serve.yml", run_dir, check=ctx.check, limit=",".join(unit_hosts),
                                  tags="triton", extravars=extravars)
    _status, code, _outcomes = outcome_from_playbook(result)
    if code != ExitCode.OK:
        raise StageFailed(f"tier {plan.tier.name}: redeploying with max_queue_delay_microseconds "
                          f"{label.removeprefix('qd')} failed ({result.status}, rc {result.rc}); see {run_dir}")
    return result
