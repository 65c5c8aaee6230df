"""The one resolver of a tier's parallelism: `tensor_parallel` / `pipeline_parallel` (numbers or "derive") against
its node group and the nodes certification left for it.

`fit_problems` is the static check run when the inventory loads (exit 2: the spec can never fit hosts.yml);
`resolve` runs once per tier when serve plans on a certification (gridready.serving.topology.TierPlan keeps the
result, and vLLM arguments, the Triton plan, the manifests and the benchmark read it from there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gridready.spec.cluster import NodeGroup
from gridready.spec.serving import Tier


@dataclass(frozen=True)
class Parallelism:
    """TP x PP of one model replica on nodes of `gpus_per_node` GPUs."""

    tensor: int
    pipeline: int
    gpus_per_node: int

    @property
    def world_size(self) -> int:
        return self.tensor * self.pipeline

    @property
    def nodes_per_replica(self) -> int:
        return math.ceil(self.world_size / self.gpus_per_node)


def resolve(tier: Tier, group: NodeGroup, nodes: int) -> Parallelism:
    """derive TP: the group's GPUs per node (TP stays inside a node's NVLink domain); derive PP: the `nodes` left
    for the tier divided by its replicas, at least 1 (one pipeline stage per node)."""
    tp = group.gpus_per_node if tier.tensor_parallel == "derive" else tier.tensor_parallel
    pp = max(nodes // tier.replicas, 1) if tier.pipeline_parallel == "derive" else tier.pipeline_parallel
    return Parallelism(tp, pp, group.gpus_per_node)


def fit_problems(tier: Tier, group: NodeGroup, nodes_in_group: int) -> list[tuple[str, str]]:
    """(key below the tier, message) for each way the tier can never fit its group, whatever certification says."""
    gpn = group.gpus_per_node
    tp = gpn if tier.tensor_parallel == "derive" else tier.tensor_parallel
    out: list[tuple[str, str]] = []
    if tp > gpn:
        out.append(("tensor_parallel", f"must be <= gpus_per_node ({gpn})"))
    elif gpn % tp:
        out.append(("tensor_parallel", f"must divide gpus_per_node ({gpn})"))
    if tier.pipeline_parallel != "derive" and not out:
        plan = Parallelism(tp, tier.pipeline_parallel, gpn)
        if plan.nodes_per_replica * tier.replicas > nodes_in_group:
            out.append(("", f"tensor_parallel x pipeline_parallel = {tp} x {plan.pipeline} needs "
                            f"{plan.nodes_per_replica} node(s) per replica x {tier.replicas} replica(s); "
                            f"{group.name} has {nodes_in_group} node(s) of {gpn} GPUs"))
    return out
