"""serve: the serving tiers on certified nodes only, then readiness, smoke, benchmark and the SLO gate.

The stage is its steps, called in order, each with the result of the one before (context.py has the results):

1. plan: the certification from the customer's ledger, fail closed per node; the tiers sized on what remains;
2. rendering: target hosts: serve.yml's variables and the Triton repositories; target kubernetes (and --render): the
   Pulumi stacks' config and their manifests, validated;
3. deploy: target hosts runs playbooks/serve.yml; target kubernetes applies the stacks when the pulumi CLI exists;
4. verify: target hosts, not in check mode: readiness -> smoke -> benchmark -> SLO gate -> decision record and the
   router's overhead, the same checks `invoke bench` repeats later (and, at deployment, the queue-delay sweep);
5. redeploy: the swept fixed-cost tiers back on their own queue delay;
6. rollout: with --canary, the canary split, observed, promoted or rolled back through the router;
7. record: the summary and, for a deployment, the ledger's serving state.

A step that fails records it in the run's context; the steps after it see that and do nothing but the record.
"""

from __future__ import annotations

from gridready.artifacts import RunContext
from gridready.contracts import ServeSummary
from gridready.inventory import Inventory
from gridready.stages.serve import deploy, plan, record, redeploy, rendering, rollout, verify
from gridready.stages.serve.preview import render

__all__ = ["render", "run"]


def run(inv: Inventory, ctx: RunContext) -> ServeSummary:
    planned = plan.run(inv, ctx)
    rendered = rendering.run(planned)
    deployed = deploy.run(rendered)
    verified = verify.run(deployed)
    redeployed = redeploy.run(verified)
    rolled = rollout.run(redeployed)
    return record.run(rolled)
