"""Collective sweeps figure by figure, in process: the ranks run as threads over a torch.distributed stand-in with
simulated clocks (tests/unit/probe/fake_dist.py), so every figure must come back as nccl-tests defines it for the
time the collective took (algbw = size / time, busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather,
reduce_scatter and alltoall, 1 for sendrecv; GB/s = 1e9 B/s), the slowest rank's time, the best of the trials, the
correctness check of each collective exact, and the result document the parent reads (certify.nccl's input)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import torch_allreduce
from tests.unit.probe.fake_dist import Call, Context, Mp, World, bfloat16

KIB = 1 << 10
ALGBW = 100e9  # B/s of the simulated fabric, per rank


def rate(call: Call) -> float:
    """Every collective moves its size at ALGBW; barriers are free."""
    return call.nbytes / ALGBW


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Callable[[World, Context | None], Mp]:
    """The module's torch, torch.distributed, os, time and multiprocessing are the world's; sys.modules restored."""

    def _install(w: World, ctx: Context | None = None) -> Mp:
        monkeypatch.setitem(sys.modules, "torch", w.torch)
        monkeypatch.setitem(sys.modules, "torch.distributed", w.torch.distributed)
        monkeypatch.setattr(torch_allreduce, "os", w.os)
        monkeypatch.setattr(torch_allreduce, "time", w.time)
        mp = Mp(ctx or Context(w))
        monkeypatch.setattr(torch_allreduce, "mp", mp)
        monkeypatch.setattr(torch_allreduce, "_free_port", lambda: 29500)
        return mp

    return _install


@pytest.mark.parametrize(("coll", "n", "factor"), [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75), ("all_gather", 8, 0.875),
    ("reduce_scatter", 4, 0.75), ("alltoall", 2, 0.5), ("sendrecv", 8, 1.0), ("all_reduce", 1, 0.0)])
def test_busbw_factors_are_nccl_tests(coll: str, n: int, factor: float) -> None:
    assert torch_allreduce.FACTORS[coll](n) == pytest.approx(factor)


class Recorder:
    """A dist that records each call with the element counts it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []
        self.waits = 0
        self.P2POp = lambda op, t, peer: (op, t, peer)

    def _rec(self, name: str, *ts: Any) -> None:
        self.calls.append((name, [len(t) for t in ts]))

    def all_reduce(self, t: Any) -> None:
        self._rec("all_reduce", t)

    def all_gather_into_tensor(self, out: Any, inp: Any) -> None:
        self._rec("all_gather", out, inp)

    def reduce_scatter_tensor(self, out: Any, inp: Any) -> None:
        self._rec("reduce_scatter", out, inp)

    def all_to_all_single(self, out: Any, inp: Any) -> None:
        self._rec("alltoall", out, inp)

    def isend(self) -> None: ...

    def irecv(self) -> None: ...

    def batch_isend_irecv(self, ops: list[Any]) -> list[Any]:
        self.calls.append(("p2p", [(o[0].__name__, len(o[1]), o[2]) for o in ops]))
        rec = self

        class Req:
            def wait(self) -> None:
                rec.waits += 1
        return [Req() for _ in ops]


@pytest.mark.parametrize(("coll", "want"), [
    ("all_reduce", ("all_reduce", [1000])), ("all_gather", ("all_gather", [1000, 250])),
    ("reduce_scatter", ("reduce_scatter", [250, 1000])), ("alltoall", ("alltoall", [1000, 1000]))])
def test_op_shards_of_equal_size(coll: str, want: tuple[str, list[int]]) -> None:
    rec = Recorder()
    buf, out = list(range(2000)), list(range(2000))
    torch_allreduce._op(rec, coll, 4, 1, buf, out, 1003)()  # 1003 elements: 1000 in 4 equal shards
    assert rec.calls == [want]


def test_op_all_gather_reads_the_buffer_and_writes_the_output() -> None:
    seen: list[tuple[str, Any]] = []

    class Dist(Recorder):
        def all_gather_into_tensor(self, out: Any, inp: Any) -> None:
            seen.append(("out", out[0]))
            seen.append(("in", inp[0]))

        def reduce_scatter_tensor(self, out: Any, inp: Any) -> None:
            seen.append(("out", out[0]))
            seen.append(("in", inp[0]))

        def all_to_all_single(self, out: Any, inp: Any) -> None:
            seen.append(("out", out[0]))
            seen.append(("in", inp[0]))

    for coll in ("all_gather", "reduce_scatter", "alltoall"):
        torch_allreduce._op(Dist(), coll, 2, 0, ["buf"] * 8, ["out"] * 8, 8)()
    assert seen == [("out", "out"), ("in", "buf")] * 3


@pytest.mark.parametrize(("rank", "to", "frm"), [(0, 1, 3), (2, 3, 1), (3, 0, 2)])
def test_op_sendrecv_sends_to_the_next_rank_and_receives_from_the_one_before(rank: int, to: int, frm: int) -> None:
    rec = Recorder()
    buf, out = list(range(100)), list(range(100, 200))
    op = torch_allreduce._op(rec, "sendrecv", 4, rank, buf, out, 42)
    op()
    (name, ops), = rec.calls
    assert name == "p2p"
    assert ops == [("isend", 40, to), ("irecv", 40, frm)]
    assert rec.waits == 2


def test_op_sendrecv_sends_the_buffer_into_the_output() -> None:
    got: list[Any] = []

    class Dist(Recorder):
        def batch_isend_irecv(self, ops: list[Any]) -> list[Any]:
            got.extend((o[0].__name__, o[1][0]) for o in ops)
            return []

    torch_allreduce._op(Dist(), "sendrecv", 2, 0, ["buf"] * 4, ["out"] * 4, 4)()
    assert got == [("isend", "buf"), ("irecv", "out")]


def row(nbytes: int, best: float, factor: float, trials: list[float]) -> dict[str, Any]:
    """A result row as nccl-tests defines it; exact to 1e-9 (a float32 time would be off by about 1e-7)."""
    def near(x: float) -> Any:
        return pytest.approx(x, rel=1e-9)
    return {"bytes": nbytes, "time_us": near(best * 1e6), "algbw_gbps": near(nbytes / best / 1e9),
            "busbw_gbps": near(nbytes / best / 1e9 * factor),
            "busbw_trials_gbps": [near(nbytes / t / 1e9 * factor) for t in trials]}


def test_sweep_all_reduce_on_two_gpus(install: Callable[..., Mp]) -> None:
    # trial 0 runs at half the rate, trial 1 at the full rate: the best is trial 1
    warmup, iters = 2, 3

    def cost(call: Call) -> float:
        slow = call.kind == "all_reduce" and call.nbytes >= KIB and warmup <= call.seq < warmup + iters
        return call.nbytes / ALGBW * (2 if slow else 1)
    w = World(2, cost, nccl=(2, 23, 4))
    mp = install(w)
    res = torch_allreduce.sweep(2, [KIB, 4 * KIB], iters, warmup, 2, {"NCCL_ALGO": "Ring"}, 60.0)
    t1, t4 = KIB / ALGBW, 4 * KIB / ALGBW
    assert res == {"world": 2, "collective": "all_reduce", "env": {"NCCL_ALGO": "Ring"}, "dtype": "bfloat16",
                   "sizes": [row(KIB, t1, 1.0, [2 * t1, t1]), row(4 * KIB, t4, 1.0, [2 * t4, t4])],
                   "wrong": 0, "nccl": "2.23.4", "wall_s": res["wall_s"]}
    assert mp.methods == ["spawn"]  # CUDA cannot run in a forked child
    assert [i["init_method"] for i in w.inits] == ["tcp://127.0.0.1:29500"] * 2
    assert all(i["env"] == {"NCCL_ALGO": "Ring"} for i in w.inits)
    assert sorted(w.destroyed) == [0, 1]
    # rank 0's collectives: per size, the warm-ups and 2 trials of 3, each trial's time reduced (8 bytes, MAX)
    sweep = [(k, b) for _, k, b in w.calls if k != "barrier"]
    per_size = [[("all_reduce", s)] * warmup + ([("all_reduce", s)] * iters + [("all_reduce", 8)]) * 2
                for s in (KIB, 4 * KIB)]
    assert sweep[:len(per_size[0]) * 2] == per_size[0] + per_size[1]
    assert [k for _, k, _ in w.calls].count("barrier") == 4


def test_sweep_wall_time_to_two_decimals(install: Callable[..., Mp]) -> None:
    w = World(2, lambda call: 0.123456 if call.nbytes == KIB else 0.0)
    install(w)
    w.set_now(1000.0)  # the parent's clock when the sweep starts
    res = torch_allreduce.sweep(2, [KIB], 1, 0, 1, {}, 60.0)
    ends = [p._end for p in torch_allreduce.mp.ctx.procs]  # type: ignore[attr-defined]
    assert res["wall_s"] == round(max(ends) - 1000.0, 2) == 0.12  # the one timed call; the rest is free
    assert res["sizes"][0]["time_us"] == pytest.approx(123456.0)


def test_the_slowest_rank_sets_the_time(install: Callable[..., Mp]) -> None:
    # ranks leave each barrier 0, 3 and 6 ms after the last one arrived: rank 0 starts first and waits longest
    iters = 4
    w = World(3, rate, skew={1: 0.003, 2: 0.006})
    install(w)
    nbytes = 8 * KIB
    res = torch_allreduce.sweep(3, [nbytes], iters, 1, 1, {}, 60.0)
    moved = (nbytes // 2 - (nbytes // 2) % 3) * 2  # whole shards of bf16
    best = moved / ALGBW + 0.006 / iters
    assert res["sizes"] == [row(nbytes, best, 4 / 3, [best])]


@pytest.mark.parametrize(("coll", "factor"), [("all_gather", 0.75), ("reduce_scatter", 0.75), ("alltoall", 0.75),
                                              ("sendrecv", 1.0), ("all_reduce", 1.5)])
def test_sweep_of_each_collective_moves_size_bytes(install: Callable[..., Mp], coll: str, factor: float) -> None:
    w = World(4, rate)
    install(w)
    res = torch_allreduce.sweep(4, [KIB, 2 * KIB, 4 * KIB], 2, 1, 1, {"NCCL_PROTO": "Simple"}, 60.0,
                                collective=coll)
    assert (res["collective"], res["wrong"], res["env"], res["world"]) == (coll, 0, {"NCCL_PROTO": "Simple"}, 4)
    assert res["sizes"] == [row(b, b / ALGBW, factor, [b / ALGBW]) for b in (KIB, 2 * KIB, 4 * KIB)]
    moved = [b for _, k, b in w.calls if k == coll and b > 8]  # not the 8-byte reductions of times and counts
    # per size: 1 warm-up and 2 timed calls of `size` bytes; then the check's call on 1 Mi elements of bf16
    assert moved[:9] == [KIB] * 3 + [2 * KIB] * 3 + [4 * KIB] * 3
    assert len(moved) == 10


def test_sweep_buffers_are_bf16_on_the_ranks_gpu(install: Callable[..., Mp]) -> None:
    seen: list[tuple[Any, ...]] = []
    w = World(2, rate)
    install(w)
    zeros = w.torch.zeros

    def spy(*size: int, dtype: Any = None, device: Any = None) -> Any:
        seen.append((size, dtype, device))
        return zeros(*size, dtype=dtype, device=device)
    w.torch.zeros = spy
    torch_allreduce.sweep(2, [KIB, 4 * KIB, 2 * KIB], 1, 0, 1, {}, 60.0)
    sweep_bufs = sorted(s for s in seen if s[0] == (2 * KIB,))
    assert sweep_bufs == [((2 * KIB,), bfloat16, 0), ((2 * KIB,), bfloat16, 1)]


def test_a_rank_that_fails_fails_the_sweep(install: Callable[..., Mp]) -> None:
    w = World(2, rate, fail_at={1: "init"})
    install(w)
    with pytest.raises(RuntimeError, match=r"^all-reduce workers exited with \[1, 1\]$"):
        torch_allreduce.sweep(2, [KIB], 1, 0, 1, {}, 60.0)


def test_a_rank_that_fails_after_rank_0_wrote_still_fails_the_sweep(install: Callable[..., Mp]) -> None:
    w = World(2, rate, fail_at={1: "destroy"})
    install(w)
    with pytest.raises(RuntimeError, match=r"^all-reduce workers exited with \[0, 1\]$"):
        torch_allreduce.sweep(2, [KIB], 1, 0, 1, {}, 60.0)


def test_a_hung_rank_is_killed_after_the_timeout(install: Callable[..., Mp]) -> None:
    w = World(2, rate, timeout=0.05)
    ctx = Context(w, hang={1})
    install(w, ctx)
    with pytest.raises(TimeoutError, match=r"^all-reduce sweep exceeded 30 s$"):
        torch_allreduce.sweep(2, [KIB], 1, 0, 1, {}, 30.4)
    p0, p1 = ctx.procs
    assert (p0.killed, p1.killed, p0.exitcode) == (False, True, 1)
    assert p0.joins == [pytest.approx(30.4)] and p1.joins == [pytest.approx(30.4)]


def test_after_the_deadline_each_join_waits_one_second(install: Callable[..., Mp]) -> None:
    w = World(3, rate)
    ctx = Context(w, hang={0, 1, 2})
    install(w, ctx)
    with pytest.raises(TimeoutError, match=r"^all-reduce sweep exceeded 5 s$"):
        torch_allreduce.sweep(3, [KIB], 1, 0, 1, {}, 5.0)
    assert [p.joins for p in ctx.procs] == [[5.0], [1.0], [1.0]]
    assert all(p.killed for p in ctx.procs)


def test_free_port_is_a_free_loopback_port() -> None:
    port = torch_allreduce._free_port()
    assert isinstance(port, int) and 1024 <= port <= 65535
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing holds it any more


def test_a_worker_config_without_a_collective_sweeps_all_reduce(install: Callable[..., Mp], tmp_path: Path) -> None:
    w = World(4, rate)
    install(w)
    ctx = Context(w)
    path = str(tmp_path / "result.json")
    cfg = {"sizes": [4 * KIB], "iters": 2, "warmup": 0, "best_of": 1, "env": {}}
    procs = [ctx.Process(target=torch_allreduce._worker, args=(r, 4, 29500, cfg, path)) for r in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    doc = json.loads(Path(path).read_text())
    t = 4 * KIB / ALGBW
    assert doc["rows"] == [row(4 * KIB, t, 1.5, [t])] and doc["wrong"] == 0
    assert {k for _, k, _ in w.calls} == {"all_reduce", "barrier"}


def test_sweep_on_one_gpu(install: Callable[..., Mp]) -> None:
    # one rank: all_reduce moves nothing between GPUs (busbw factor 2(n-1)/n = 0); rank 0 still writes the result
    w = World(1, rate)
    install(w)
    res = torch_allreduce.sweep(1, [2 * KIB], 2, 1, 1, {}, 60.0)
    t = 2 * KIB / ALGBW
    assert res["sizes"] == [row(2 * KIB, t, 0.0, [t])]
    assert (res["world"], res["wrong"]) == (1, 0)


def test_the_result_file_lives_in_a_private_directory_removed_after(install: Callable[..., Mp], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    w = World(2, rate)
    ctx = Context(w)
    install(w, ctx)
    torch_allreduce.sweep(2, [KIB], 1, 0, 1, {}, 60.0)
    paths = {p.args[4] for p in ctx.procs}
    assert len(paths) == 1
    path = Path(paths.pop())
    assert path.is_absolute() and path.parent != tmp_path and not path.parent.exists()
    assert list(tmp_path.iterdir()) == []  # nothing left where the probe runs
