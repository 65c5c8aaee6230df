"""The weights a tier's name implies, in GiB (parameters x bytes per parameter / 2**30: a billion parameters in
bf16 are 1.86 GiB, not 2 GB), and the nodes they need at the boundary of one node's usable memory."""

from __future__ import annotations

import math

import pytest

from gridready.spec import parallel
from tests.unit.spec.test_rule_messages import spec, tier

REV = "0e9e39f249a16976918f6564b8830bc894c89659"


def one(hf_id: str, **over):
    s = spec(serving__tiers=[tier(model={"hf_id": hf_id, "revision": REV}, tensor_parallel="derive",
                                  pipeline_parallel="derive", **over)])
    return s.serving.tiers[0], s.node_groups[0]


@pytest.mark.parametrize(("hf_id", "quant", "gib"), [
    ("meta-llama/Llama-3.1-8B-Instruct", None, 8e9 * 2 / 2**30),      # 14.90 GiB
    ("meta-llama/Llama-3.1-70B-Instruct", None, 70e9 * 2 / 2**30),    # 130.39 GiB
    ("meta-llama/Llama-3.1-70B-Instruct", "fp8", 70e9 / 2**30),
    ("meta-llama/Llama-3.1-70B-Instruct", "awq", 70e9 * 0.5 / 2**30),
    ("Qwen/Qwen2.5-0.5B-Instruct", None, 0.5e9 * 2 / 2**30),
    ("acme/model_7b_chat", None, 7e9 * 2 / 2**30),                    # `_` reads as a separator, `b` as B
    ("mistralai/Mixtral-8x7B-v0.1", None, None),
])
def test_weights_gib(hf_id, quant, gib):
    t, _ = one(hf_id, quantization=quant) if quant else one(hf_id)
    got = parallel.weights_gib(t)
    assert got == gib if gib is None else math.isclose(got, gib, rel_tol=1e-12)


def test_nodes_for_weights_at_one_nodes_usable_memory():
    """One H200 node holds 8 x 140.4 GiB x gpu_memory_utilization x 0.75 of weights; a model one parameter-billion
    over that takes a second node (pipeline stage), one at or under it stays on one."""
    t, g = one("acme/Big-100B")
    per_node = g.gpus_per_node * g.catalog_sku.memory_gib * t.gpu_memory_utilization * parallel.WEIGHTS_SHARE
    fits = math.floor(per_node * 2**30 / 2e9)          # billions of bf16 parameters that still fit
    assert parallel.nodes_for_weights(one(f"acme/Big-{fits}B")[0], g) == 1
    assert parallel.nodes_for_weights(one(f"acme/Big-{fits + 1}B")[0], g) == 2
    assert parallel.nodes_for_weights(one(f"acme/Big-{2 * fits + 1}B")[0], g) == 3
    assert parallel.resolve(one(f"acme/Big-{fits + 1}B")[0], g) == parallel.Parallelism(8, 2, 8)


@pytest.mark.parametrize(("path", "gib"), [
    ("/models/Llama-3.1-70B/", 70e9 * 2 / 2**30),   # the last folder names the model
    ("/models/llama-70b/snapshot-1", None),         # a size only in an upper folder is not the model's name
])
def test_weights_gib_of_a_local_path_reads_its_last_segment(path, gib):
    s = spec(serving__tiers=[tier(model={"local_path": path})])
    got = parallel.weights_gib(s.serving.tiers[0])
    assert got == gib if gib is None else math.isclose(got, gib, rel_tol=1e-12)


def test_a_name_without_a_size_takes_one_node_and_numbers_are_kept():
    t, g = one("mistralai/Mixtral-8x7B-v0.1")
    assert parallel.nodes_for_weights(t, g) == 1
    s = spec(serving__tiers=[tier(tensor_parallel=4, pipeline_parallel=3)])
    assert parallel.resolve(s.serving.tiers[0], s.node_groups[0]) == parallel.Parallelism(4, 3, 8)


def test_h100_sxm_memory_is_the_real_boards_gib_not_its_marketing_gb():
    """The weights fit is computed in GiB: the catalog holds what nvidia-smi reports on a real H100 80GB HBM3
    (81559 MiB in docs/examples/h100x1), not the datasheet's "80 GB"."""
    import json
    from pathlib import Path

    from gridready import catalog

    probe = json.loads((Path(__file__).parents[3] / "docs/examples/h100x1/accuracy/run-08/probe.json").read_text())
    row = probe["raw"]["nvidia_smi_query"].splitlines()[1].split(", ")
    mib = float(next(v for v in row if v.endswith(" MiB")).split()[0])
    sku = catalog.lookup("h100")
    assert sku is not None and abs(sku.memory_gib - mib / 1024) < 0.1
