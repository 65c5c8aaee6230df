"""The static fit of a tier on its node group (parallel.fit_problems, what inventory.load reports): TP at most the
group's GPUs per node and a divisor of it, derive as the group's GPUs, and TP x PP x replicas on whole nodes at the
boundary (equal fits, one node short does not), with the exact line; and weights_gib on a name without a '/'."""

from __future__ import annotations

import math

import pytest

from gridready.spec import parallel
from gridready.spec.cluster import NodeGroup
from gridready.spec.serving import Tier
from tests.unit.spec.test_rule_messages import REV

GROUP = NodeGroup.model_validate({"name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 8})


def tier(**over: object) -> Tier:
    return Tier.model_validate({"name": "llama", "engine": "vllm", "served_name": "llama",
                                "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": REV}, **over})


@pytest.mark.parametrize(("over", "nodes", "found"), [
    ({}, 1, []),                                                          # derive, derive
    ({"tensor_parallel": "derive", "pipeline_parallel": "derive", "replicas": 5}, 1, []),  # derive PP: serve decides
    ({"tensor_parallel": 8, "pipeline_parallel": 1}, 1, []),
    ({"tensor_parallel": 4, "pipeline_parallel": 1}, 1, []),
    ({"tensor_parallel": 16}, 4, [("tensor_parallel", "must be <= gpus_per_node (8)")]),
    ({"tensor_parallel": 3}, 4, [("tensor_parallel", "must divide gpus_per_node (8)")]),
    ({"tensor_parallel": 3, "pipeline_parallel": 9}, 1, [("tensor_parallel", "must divide gpus_per_node (8)")]),
    ({"tensor_parallel": "derive", "pipeline_parallel": 2, "replicas": 2}, 4, []),          # 2 x 2 = 4 nodes
    ({"tensor_parallel": "derive", "pipeline_parallel": 2, "replicas": 2}, 3, [
        ("", "tensor_parallel x pipeline_parallel = 8 x 2 needs 2 node(s) per replica x 2 replica(s); gpu_nodes "
             "has 3 node(s) of 8 GPUs")]),
    ({"tensor_parallel": 4, "pipeline_parallel": 3}, 2, []),                                # 12 GPUs: 2 nodes
    ({"tensor_parallel": 4, "pipeline_parallel": 3}, 1, [
        ("", "tensor_parallel x pipeline_parallel = 4 x 3 needs 2 node(s) per replica x 1 replica(s); gpu_nodes has "
             "1 node(s) of 8 GPUs")]),
])
def test_fit_problems(over, nodes, found):
    assert parallel.fit_problems(tier(**over), GROUP, nodes) == found


@pytest.mark.parametrize(("path", "billions"), [("llama-70b", 70.0), ("Qwen2.5-0.5B", 0.5), ("/models/llama-8b", 8.0)])
def test_weights_gib_of_a_name_without_a_folder(path, billions):
    got = parallel.weights_gib(tier(model={"local_path": path}))
    assert got is not None and math.isclose(got, billions * 1e9 * 2 / 2**30, rel_tol=1e-12)


def test_weights_gib_reads_the_last_segment_whatever_letter_ends_it():
    assert parallel.weights_gib(tier(model={"local_path": "/models/Llama-3.1-70B/X"})) is None
    assert parallel.weights_gib(tier(model={"local_path": "/models/Llama-3.1-70BX"})) is None
