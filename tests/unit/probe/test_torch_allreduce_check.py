"""The correctness check that ends each collective sweep, in process: the ranks run as threads over a
torch.distributed stand-in (tests/unit/probe/fake_dist.py) that refuses shards of unequal size as ProcessGroupNCCL
does. A right collective counts 0 bad elements on any world size (3 and 6 GPUs included: 2^20 elements do not split
into 3 equal shards), and every corrupted element of every rank is counted, on every rank."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gridready.probe import torch_allreduce
from tests.unit.probe.fake_dist import Call, World


def rate(call: Call) -> float:
    return call.nbytes / 100e9


def on_ranks(w: World, fn: Callable[[int], Any]) -> dict[int, Any]:
    """fn(rank) on every rank of `w`, each a thread with its device set and its process group joined."""
    out: dict[int, Any] = {}

    def run(rank: int) -> None:
        w.torch.cuda.set_device(rank)
        w.torch.distributed.init_process_group("nccl", init_method="tcp://127.0.0.1:29500", rank=rank,
                                               world_size=w.world, device_id=w.torch.device("cuda", rank))
        try:
            out[rank] = fn(rank)
        except Exception as exc:
            out[rank] = exc
            w.abort()
    threads = [threading.Thread(target=run, args=(r,)) for r in range(w.world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


COLLS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]


@pytest.mark.parametrize("world", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("coll", COLLS)
def test_check_of_a_right_collective_is_zero(coll: str, world: int) -> None:
    w = World(world, rate)
    got = on_ranks(w, lambda r: torch_allreduce._check(w.torch, w.torch.distributed, coll, world, r))
    assert got == dict.fromkeys(range(world), 0)


@pytest.mark.parametrize("coll", COLLS)
def test_check_counts_every_bad_element_of_every_rank(coll: str) -> None:
    def fault(kind: str, rank: int, arr: np.ndarray) -> None:
        if kind == coll and rank in (1, 2) and arr.size > 1:
            arr[:5 * rank] += 1  # 5 bad elements at the head and 1 at the tail on rank 1, 10 and 2 on rank 2
            arr[-rank:] += 1
    w = World(3, rate, fault=fault)
    got = on_ranks(w, lambda r: torch_allreduce._check(w.torch, w.torch.distributed, coll, 3, r))
    assert got == dict.fromkeys(range(3), 18)


def test_check_counts_a_corrupted_all_reduce() -> None:
    def fault(kind: str, rank: int, arr: np.ndarray) -> None:
        if arr.size > 1 and rank == 0:
            arr[-7:] = 0  # the tail of the reduced buffer
    w = World(2, rate, fault=fault)
    got = on_ranks(w, lambda r: torch_allreduce._check(w.torch, w.torch.distributed, "all_reduce", 2, r))
    assert got == {0: 7, 1: 7}


