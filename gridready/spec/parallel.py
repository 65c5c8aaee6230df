"""The one resolver of a tier's parallelism: `tensor_parallel` / `pipeline_parallel` (numbers or "derive") against
its node group and the nodes certification left for it.

`fit_problems` is the static check run when the inventory loads (exit 2: the spec can never fit hosts.yml);
`resolve` runs once per tier when serve plans on a certification (gridready.serving.topology.TierPlan keeps the
result, and vLLM arguments, the Triton plan, the manifests and the benchmark read it from there).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gridready.spec.cluster import NodeGroup
from gridready.spec.serving import Tier

# A parameter count in a model's name, in billions: Llama-3.1-8B-Instruct, Qwen2.5-0.5B, Llama-3.1-405B-FP8.
# An expert count before it (Mixtral-8x7B) is no size: such a name reads as unknown.
SIZE_IN_NAME = re.compile(r"(?<![A-Za-z0-9.])([0-9]{1,4}(?:\.[0-9]{1,3})?)[Bb](?![A-Za-z0-9])")
BYTES_PER_PARAM = {None: 2.0, "fp8": 1.0, "modelopt": 1.0, "compressed-tensors": 1.0, "awq": 0.5, "gptq": 0.5}
WEIGHTS_SHARE = 0.75  # of the memory an engine may take (gpu_memory_utilization): the rest is KV cache and activations


def weights_gib(tier: Tier) -> float | None:
    """The model's weights in GiB, from the parameter count its name gives and the tier's quantization; None when
    the name gives no size (a local path, a name without one)."""
    name = (tier.model.hf_id or tier.model.local_path or "").rstrip("/").rsplit("/", 1)[-1]
    found = SIZE_IN_NAME.findall(name.replace("_", "-"))
    if not found:
        return None
    return float(found[-1]) * 1e9 * BYTES_PER_PARAM.get(tier.quantization, 2.0) / 2**30


def nodes_for_weights(tier: Tier, group: NodeGroup) -> int:
    """The fewest nodes of `group` whose GPUs hold the tier's weights with room for the KV cache: 1 for a model that
    fits one node, or whose size its name does not give."""
    gib = weights_gib(tier)
    if gib is None:
        return 1
    per_node = group.gpus_per_node * group.catalog_sku.memory_gib * tier.gpu_memory_utilization * WEIGHTS_SHARE
    return max(1, math.ceil(gib / per_node))


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


def resolve(tier: Tier, group: NodeGroup) -> Parallelism:
    """derive TP: the group's GPUs per node (TP stays inside a node's NVLink domain); derive PP: one pipeline stage
    per node the weights need (nodes_for_weights), so a model that fits one node runs on one node: pipeline
    parallelism across nodes only where the model needs it, never because more nodes are there (how many nodes are
    left is the callers' placement check)."""
    tp = group.gpus_per_node if tier.tensor_parallel == "derive" else tier.tensor_parallel
    pp = nodes_for_weights(tier, group) if tier.pipeline_parallel == "derive" else tier.pipeline_parallel
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
