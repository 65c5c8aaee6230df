"""A stand-in for torch + torch.distributed (NCCL) and a multiprocessing context, for gridready.probe.torch_allreduce:
the world's ranks run as threads of the test, each with its own simulated host clock, and meet in each collective.

Semantics as torch.distributed documents them (https://docs.pytorch.org/docs/stable/distributed.html):
- `all_reduce(t, op=SUM)` in place; `all_gather_into_tensor(out, inp)`: out is the ranks' inputs concatenated in
  rank order (out.numel() == world x inp.numel()); `reduce_scatter_tensor(out, inp)`: out is the sum over ranks of
  chunk `rank` of inp (inp.numel() == world x out.numel()); `all_to_all_single(out, inp)`: chunk j of out is chunk
  `rank` of rank j's inp; `batch_isend_irecv([P2POp(isend|irecv, tensor, peer)])` pairs each send with the peer's
  receive and returns requests to `wait()`; `barrier()`; NCCL wants every tensor on the rank's CUDA device;
- collectives are enqueued on the device stream (host time does not move) and complete `cost(call)` seconds after
  the last rank reached them; `torch.cuda.synchronize()` and `.item()` of a CUDA tensor wait for the stream;
  `barrier()` returns on each rank `skew[rank]` seconds after the last rank reached it (ranks never leave a
  barrier at the same instant);
- all_gather_into_tensor and reduce_scatter_tensor refuse an input and output of different dtypes, and shards of
  unequal size (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: TypeError / ValueError);
- a collective whose ranks disagree (another op, another element count) fails on every rank; a rank that dies
  aborts the others' pending collectives (the NCCL communicator is torn down), as a rank that never comes leaves
  them waiting until `timeout` (real) seconds.
`multiprocessing` (https://docs.python.org/3/library/multiprocessing.html#process-and-exceptions): `Process.join(t)`
waits at most t seconds (here: of the parent's simulated clock for a process that never ends), `exitcode` is 0 after
`run()` returned and 1 after it raised, `kill()` ends it.
bf16 data is held as float32 (exact for the small integers the checks use); byte counts use the real item sizes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    itemsize: int
    np: Any

    def __repr__(self) -> str:
        return f"torch.{self.name}"


bfloat16 = DType("bfloat16", 2, np.float32)
float32 = DType("float32", 4, np.float32)
float64 = DType("float64", 8, np.float64)
int64 = DType("int64", 8, np.int64)
boolean = DType("bool", 1, np.bool_)


@dataclass
class Call:
    """One collective as every rank made it: kind, bytes of the larger buffer (nccl-tests' `size`), its number
    among the collectives of that kind and size, from 0."""

    kind: str
    nbytes: int
    seq: int


class Tensor:
    def __init__(self, world: World, arr: np.ndarray, dtype: DType, device: int | None) -> None:
        self._world, self.arr, self.dtype, self.device = world, arr, dtype, device

    def __getitem__(self, key: slice) -> Tensor:
        return Tensor(self._world, self.arr[key], self.dtype, self.device)  # a view, as torch's basic slicing

    def numel(self) -> int:
        return int(self.arr.size)

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def item(self) -> Any:
        if self.numel() != 1:
            raise RuntimeError("a Tensor with more than one element cannot be converted to Scalar")
        if self.device is not None:
            self._world.sync(self.device)
        v = self.arr.reshape(-1)[0]
        return bool(v) if self.dtype is boolean else int(v) if self.dtype is int64 else float(v)

    def sum(self) -> Tensor:
        dtype = int64 if self.dtype in (boolean, int64) else self.dtype
        return Tensor(self._world, np.array([self.arr.sum()], dtype=dtype.np), dtype, self.device)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        assert isinstance(other, Tensor)
        if other.device != self.device:
            raise RuntimeError("Expected all tensors to be on the same device")
        return Tensor(self._world, self.arr != other.arr, boolean, self.device)

    def to(self, dtype: DType) -> Tensor:
        return Tensor(self._world, self.arr.astype(dtype.np), dtype, self.device)

    def repeat_interleave(self, repeats: int) -> Tensor:
        if not isinstance(repeats, int):  # torch: repeats (Tensor or int)
            raise TypeError(f"repeat_interleave(): argument 'repeats' must be int, not {type(repeats).__name__}")
        return Tensor(self._world, np.repeat(self.arr, repeats), self.dtype, self.device)


class Work:
    def wait(self) -> bool:
        return True


@dataclass
class P2POp:
    op: Callable[..., Any]
    tensor: Tensor
    peer: int


class ReduceOp:
    SUM, MAX = "sum", "max"


class World:
    """`world` ranks; `cost(call) -> seconds`; `fault(kind, rank, out_array)` may corrupt a rank's result."""

    def __init__(self, world: int, cost: Callable[[Call], float], skew: dict[int, float] | None = None,
                 fault: Callable[[str, int, np.ndarray], None] | None = None, timeout: float = 5.0,
                 fail_at: dict[int, str] | None = None, nccl: tuple[int, int, int] = (2, 21, 5)) -> None:
        self.world, self.cost, self.skew, self.fault, self.timeout = world, cost, skew or {}, fault, timeout
        self.fail_at = fail_at or {}  # rank -> the dist call at which it raises ("init", "destroy")
        self.nccl = nccl
        self.local = threading.local()
        self.cond = threading.Condition()
        self.slots: dict[int, dict[int, tuple[Any, ...]]] = {}
        self.done: dict[int, tuple[str | None, float]] = {}
        self.seqs: dict[tuple[str, int], int] = {}
        self.busy: dict[int, float] = {}
        self.aborted = False
        self.inits: list[dict[str, Any]] = []
        self.calls: list[tuple[int, str, int]] = []  # (rank, kind, nbytes) of every collective, rank 0's view
        self.destroyed: list[int] = []
        self.env: dict[str, str] = {}  # the ranks' os.environ (the module's `os` is swapped for self.os)
        self.os = SimpleNamespace(environ=self.env, path=os.path)
        self.torch = _torch(self)
        self.time = SimpleNamespace(perf_counter=self.now, monotonic=self.now)

    # the calling thread's simulated host clock
    def now(self) -> float:
        return float(getattr(self.local, "now", 0.0))

    def set_now(self, t: float) -> None:
        self.local.now = t

    def sync(self, device: int) -> None:
        self.set_now(max(self.now(), self.busy.get(device, 0.0)))

    def rank(self) -> int:
        r = getattr(self.local, "rank", None)
        if r is None:
            raise RuntimeError("Default process group has not been initialized, please make sure to call "
                               "init_process_group.")
        return int(r)

    def abort(self) -> None:
        with self.cond:
            self.aborted = True
            self.cond.notify_all()

    def meet(self, kind: str, key: tuple[Any, ...], payload: Any, nbytes: int,
             apply: Callable[[dict[int, Any]], None]) -> float:
        """Blocks until every rank made this call; the last one applies it. Returns its completion time."""
        rank = self.rank()
        k = self.local.calls = getattr(self.local, "calls", -1) + 1
        ready = max(self.now(), self.busy.get(rank, 0.0))
        with self.cond:
            if self.aborted:
                raise RuntimeError("NCCL communicator was aborted")
            slot = self.slots.setdefault(k, {})
            slot[rank] = (kind, key, payload, ready)
            if len(slot) == self.world:
                self._complete(k, slot, kind, nbytes, apply)
                self.cond.notify_all()
            elif not self.cond.wait_for(lambda: k in self.done or self.aborted, timeout=self.timeout):
                raise RuntimeError(f"{kind}: timed out waiting for the other ranks")
            if k not in self.done:
                raise RuntimeError("NCCL communicator was aborted")
        err, end = self.done[k]
        if err:
            raise RuntimeError(err)
        if rank == 0:
            self.calls.append((rank, kind, nbytes))
        return end

    def _complete(self, k: int, slot: dict[int, tuple[Any, ...]], kind: str, nbytes: int,
                  apply: Callable[[dict[int, Any]], None]) -> None:
        if len({(s[0], s[1]) for s in slot.values()}) != 1:
            self.done[k] = (f"ranks disagree on collective {k}: {sorted((r, s[0], s[1]) for r, s in slot.items())}",
                            0.0)
            return
        try:
            apply({r: s[2] for r, s in slot.items()})
        except Exception as exc:
            self.done[k] = (str(exc), 0.0)
            return
        seq = self.seqs.get((kind, nbytes), 0)
        self.seqs[(kind, nbytes)] = seq + 1
        self.done[k] = (None, max(s[3] for s in slot.values()) + self.cost(Call(kind, nbytes, seq)))

    def on_device(self, *tensors: Tensor) -> None:
        rank = self.rank()
        for t in tensors:
            if t.device != rank:
                raise RuntimeError(f"NCCL: tensor on device {t.device}, the process group's device is cuda:{rank}")


def _torch(w: World) -> SimpleNamespace:
    def tensor_of(arr: np.ndarray, dtype: DType, device: int | None) -> Tensor:
        if device is not None and not 0 <= device < w.world:
            raise RuntimeError("CUDA error: invalid device ordinal")
        return Tensor(w, arr.astype(dtype.np), dtype, device)

    def full(size: tuple[int, ...], value: float, dtype: DType | None = None, device: int | None = None) -> Tensor:
        return tensor_of(np.full(size, value), dtype or float32, device)

    def zeros(*size: int, dtype: DType | None = None, device: int | None = None) -> Tensor:
        return tensor_of(np.zeros(size), dtype or float32, device)

    def arange(start: int, end: int, device: int | None = None) -> Tensor:
        return tensor_of(np.arange(start, end), int64, device)

    def tensor(data: list[float], dtype: DType | None = None, device: int | None = None) -> Tensor:
        inferred = float32 if any(isinstance(x, float) for x in data) else int64
        return tensor_of(np.array(data), dtype or inferred, device)

    def synchronize(device: int | None = None) -> None:
        w.sync(w.local.device if device is None else device)

    def set_device(device: int) -> None:
        w.local.device = device

    cuda = SimpleNamespace(set_device=set_device, synchronize=synchronize,
                           nccl=SimpleNamespace(version=lambda: w.nccl))
    dist = _dist(w)
    return SimpleNamespace(
        bfloat16=bfloat16, float32=float32, float64=float64, cuda=cuda, distributed=dist, full=full, zeros=zeros,
        arange=arange, tensor=tensor,
        zeros_like=lambda t: Tensor(w, np.zeros_like(t.arr), t.dtype, t.device),
        full_like=lambda t, v: Tensor(w, np.full_like(t.arr, v), t.dtype, t.device),
        device=lambda kind, index: SimpleNamespace(type=kind, index=index))


def _dist(w: World) -> SimpleNamespace:
    def init_process_group(backend: str, init_method: str, rank: int, world_size: int, device_id: Any) -> None:
        if backend != "nccl" or world_size != w.world or not 0 <= rank < world_size:
            raise ValueError(f"bad process group: backend={backend} rank={rank} world_size={world_size}")
        scheme, _, where = init_method.partition("://")
        host, _, port = where.rpartition(":")
        if scheme != "tcp" or host != "127.0.0.1" or not port.isdigit():
            raise ValueError(f"bad init_method {init_method!r}")
        if (device_id.type, device_id.index) != ("cuda", getattr(w.local, "device", None)):
            raise ValueError(f"device_id {device_id} is not the current device")
        if w.fail_at.get(rank) == "init":
            raise RuntimeError("NCCL error: unhandled system error")
        w.local.rank = rank
        with w.cond:
            w.inits.append({"rank": rank, "init_method": init_method, "env": dict(w.env)})
            if len({i["init_method"] for i in w.inits}) > 1:  # ranks that meet at another store never meet
                raise RuntimeError("rendezvous at another address")

    def destroy_process_group() -> None:
        rank = w.rank()
        if w.fail_at.get(rank) == "destroy":
            raise RuntimeError("NCCL error: destroy failed")
        w.destroyed.append(rank)
        w.local.rank = None

    def all_reduce(t: Tensor, op: str = ReduceOp.SUM) -> Work:
        w.on_device(t)

        def apply(ts: dict[int, Tensor]) -> None:
            red = (np.max if op == ReduceOp.MAX else np.sum)(np.stack([x.arr for x in ts.values()]), axis=0)
            for r, x in ts.items():
                x.arr[...] = red
                if w.fault:
                    w.fault("all_reduce", r, x.arr)
        w.busy[w.rank()] = w.meet("all_reduce", (t.numel(), op), t, t.nbytes, apply)
        return Work()

    def all_gather_into_tensor(out: Tensor, inp: Tensor) -> Work:
        w.on_device(out, inp)
        if out.dtype != inp.dtype:
            raise TypeError("output tensor must have the same type as input tensor")
        if out.numel() != w.world * inp.numel():
            raise ValueError("output tensor size must be equal to world_size times input tensor size")

        def apply(ts: dict[int, tuple[Tensor, Tensor]]) -> None:
            whole = np.concatenate([ts[r][1].arr for r in range(w.world)])
            for r, (o, _) in ts.items():
                o.arr[...] = whole
                if w.fault:
                    w.fault("all_gather", r, o.arr)
        w.busy[w.rank()] = w.meet("all_gather", (inp.numel(),), (out, inp), out.nbytes, apply)
        return Work()

    def reduce_scatter_tensor(out: Tensor, inp: Tensor) -> Work:
        w.on_device(out, inp)
        if out.dtype != inp.dtype:
            raise TypeError("input tensor must be the same type as the output tensor.")
        if inp.numel() != w.world * out.numel():
            raise ValueError("input tensor must be the same size as output size times world size")

        def apply(ts: dict[int, tuple[Tensor, Tensor]]) -> None:
            total = np.sum(np.stack([ts[r][1].arr for r in range(w.world)]), axis=0)
            m = total.size // w.world
            for r, (o, _) in ts.items():
                o.arr[...] = total[r * m:(r + 1) * m]
                if w.fault:
                    w.fault("reduce_scatter", r, o.arr)
        w.busy[w.rank()] = w.meet("reduce_scatter", (inp.numel(),), (out, inp), inp.nbytes, apply)
        return Work()

    def all_to_all_single(out: Tensor, inp: Tensor) -> Work:
        w.on_device(out, inp)
        if out.numel() != inp.numel() or inp.numel() % w.world:
            raise ValueError("Split sizes doesn't match total dim 0 size")

        def apply(ts: dict[int, tuple[Tensor, Tensor]]) -> None:
            m = ts[0][1].numel() // w.world
            sent = {r: ts[r][1].arr.copy() for r in range(w.world)}
            for r, (o, _) in ts.items():
                o.arr[...] = np.concatenate([sent[j][r * m:(r + 1) * m] for j in range(w.world)])
                if w.fault:
                    w.fault("alltoall", r, o.arr)
        w.busy[w.rank()] = w.meet("alltoall", (inp.numel(),), (out, inp), inp.nbytes, apply)
        return Work()

    def isend(tensor: Tensor, dst: int) -> Work:
        raise NotImplementedError("the probe sends through batch_isend_irecv")

    def irecv(tensor: Tensor, src: int) -> Work:
        raise NotImplementedError("the probe receives through batch_isend_irecv")

    def batch_isend_irecv(ops: list[P2POp]) -> list[Work]:
        w.on_device(*(o.tensor for o in ops))
        rank = w.rank()

        def apply(ts: dict[int, list[P2POp]]) -> None:
            for r, mine in ts.items():
                for o in (o for o in mine if o.op is isend):
                    match = [x for x in ts[o.peer] if x.op is irecv and x.peer == r]
                    if len(match) != 1 or match[0].tensor.numel() != o.tensor.numel():
                        raise RuntimeError(f"rank {r}'s send to {o.peer} has no matching receive")
                    match[0].tensor.arr[...] = o.tensor.arr
            for r, mine in ts.items():
                recvs = [o for o in mine if o.op is irecv]
                if any(not any(x.op is isend and x.peer == r for x in ts[o.peer]) for o in recvs):
                    raise RuntimeError(f"rank {r} waits for a send that never comes")
                for o in recvs:
                    if w.fault:
                        w.fault("sendrecv", r, o.tensor.arr)
        nbytes = max((o.tensor.nbytes for o in ops), default=0)
        key = tuple(sorted(o.tensor.numel() for o in ops))
        w.busy[rank] = w.meet("sendrecv", key, list(ops), nbytes, apply)
        return [Work() for _ in ops]

    def barrier() -> None:
        end = w.meet("barrier", (), None, 0, lambda ts: None)
        rank = w.rank()
        w.busy[rank] = max(w.busy.get(rank, 0.0), end)
        w.set_now(end + w.skew.get(rank, 0.0))

    return SimpleNamespace(init_process_group=init_process_group, destroy_process_group=destroy_process_group,
                           all_reduce=all_reduce, all_gather_into_tensor=all_gather_into_tensor,
                           reduce_scatter_tensor=reduce_scatter_tensor, all_to_all_single=all_to_all_single,
                           isend=isend, irecv=irecv, batch_isend_irecv=batch_isend_irecv, P2POp=P2POp,
                           barrier=barrier, ReduceOp=ReduceOp, is_available=lambda: True)


@dataclass
class Process:
    world: World
    target: Callable[..., None]
    args: tuple[Any, ...]
    hang: bool = False
    exitcode: int | None = None
    joins: list[float] = field(default_factory=list)
    killed: bool = False
    _thread: threading.Thread | None = None
    _end: float = 0.0

    def start(self) -> None:
        start = self.world.now()
        if self.hang:  # started, never ends (a rank stuck in the driver)
            return

        def run() -> None:
            self.world.set_now(start)
            try:
                self.target(*self.args)
                self.exitcode = 0
            except BaseException:
                self.exitcode = 1
                self.world.abort()
            self._end = self.world.now()
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self.joins.append(-1.0 if timeout is None else timeout)
        if self._thread is None:  # never ends: the whole timeout passes
            self.world.set_now(self.world.now() + (timeout or 0.0))
            return
        self._thread.join(self.world.timeout + 5.0)
        self.world.set_now(max(self.world.now(), self._end))

    def is_alive(self) -> bool:
        return not self.killed and (self.hang or (self._thread is not None and self._thread.is_alive()))

    def kill(self) -> None:
        self.killed = True
        self.exitcode = -9  # SIGKILL


class Context:
    """What `multiprocessing.get_context(method)` returns; `hang`: ranks (first argument) that never end."""

    def __init__(self, world: World, hang: set[int] | None = None) -> None:
        self.world, self.hang = world, hang or set()
        self.procs: list[Process] = []

    def Process(self, target: Callable[..., None], args: tuple[Any, ...]) -> Process:  # noqa: N802
        p = Process(self.world, target, args, hang=args[0] in self.hang)
        self.procs.append(p)
        return p


class Mp:
    """The module's `mp`: get_context accepts the start methods multiprocessing knows."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.methods: list[str] = []

    def get_context(self, method: str | None = None) -> Context:
        if method not in (None, "fork", "spawn", "forkserver"):
            raise ValueError(f"cannot find context for {method!r}")
        self.methods.append(str(method))
        return self.ctx
