"""Step 5, redeploy: every fixed-cost tier whose queue delay the verify step swept serves its own setting again.

It runs whatever happened in verify (a tier must not be left on a setting the sweep tried); a failure is the
run's (exit 3) and is said in one line naming the tier and the run's folder.
"""

from __future__ import annotations

from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.stages.serve import embedding
from gridready.stages.serve.context import STAGE, Redeployed, Verified


def run(verified: Verified) -> Redeployed:
    ctx = verified.ctx
    for plan in verified.swept:
        try:
            embedding.redeploy_embedding(ctx.inv, ctx.run, verified.certification, verified.plans, plan, None, STAGE)
        except StageFailed as err:
            ctx.messages.append(str(err))
            ctx.outcome("failed", ExitCode.STAGE_FAILED)
    return Redeployed.after(verified)
