"""bench: re-run readiness, smoke, the load benchmark and the SLO gate against tiers `serve` deployed.

Same plan as `serve` (certified nodes from disk), no deployment; writes artifacts/.../bench/ with the tier reports,
the decision record and summary.json. Exit 3 when a tier misses its SLO, 5 without a current certification.
"""

from __future__ import annotations

from typing import Any

from gridready import artifacts
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import topology
from gridready.stages import serve
from gridready.stages.common import StageResult, Timer

STAGE = "bench"


def run(inv: Inventory, ctx: RunContext) -> StageResult:
    timer = Timer()
    messages: list[str] = []
    data: dict[str, Any] = {}
    if inv.spec.serving.target != "hosts":
        status, code = "error", ExitCode.INVALID
        messages.append("invoke bench drives tiers on target hosts; Kubernetes Services are cluster-internal")
    else:
        try:
            cert = topology.read_certification(inv, artifacts.latest_summary(ctx.root, inv.customer, "certify"))
            plans = topology.plan_tiers(inv, cert)
        except (NotCertified, InvalidInput) as err:
            status, code = ("not-certified" if err.code == ExitCode.NOT_CERTIFIED else "error"), err.code
            messages += str(err).splitlines()
        else:
            data["plan"] = serve.plan_summary(plans, cert)
            status, code = serve.verify_tiers(inv, ctx, cert, plans, data, messages, stage=STAGE)
    summary = StageResult(
        stage=STAGE, customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, messages=messages, data=data,
    )
    summary.finished_at = Timer().started_at
    summary.write(ctx)
    return summary
