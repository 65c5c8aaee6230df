"""A stand-in for the few torch calls gridready.probe.torch_bench makes, on a simulated clock.

It behaves as the documented API does (https://docs.pytorch.org/docs/stable/cuda.html, .../generated/torch.cuda.Event
.html, .../generated/torch.Tensor.copy_.html), with the CUDA stream model underneath:
- every GPU op is enqueued on the current stream of its device and returns at once (host time does not move); it
  runs when the stream is free and takes `cost(op)` seconds;
- `torch.cuda.synchronize(device=None)` waits for the stream of `device` (None: the current device);
- an `Event(enable_timing=True)` records the time its stream reaches it; `end.synchronize()` waits for it;
  `start.elapsed_time(end)` is in milliseconds and raises RuntimeError when an event was created without
  `enable_timing=True`, was not recorded, or `end` has not completed yet (cudaErrorNotReady);
- `torch.cuda.device(d)` selects the current device inside the block (a no-op for None, as documented);
- `copy_(src, non_blocking=True)` between pinned host memory and a GPU is asynchronous; without it (or from pageable
  memory) the host waits for the copy. A copy between two GPUs runs on the source device's stream and both streams
  wait for it (aten/src/ATen/native/cuda/Copy.cu, copy_device_to_device: "a two-way barrier between both devices'
  streams").
Tensors carry shape, dtype, device and layout only (no data), so an 8 GiB buffer costs nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DType:
    name: str
    itemsize: int

    def __repr__(self) -> str:
        return f"torch.{self.name}"


bfloat16, float8_e4m3fn, uint8, float32 = DType("bfloat16", 2), DType("float8_e4m3fn", 1), DType("uint8", 1), \
    DType("float32", 4)


@dataclass
class Op:
    """One GPU operation as enqueued: its kind ("mm", "scaled_mm", "copy"), operands and options."""

    kind: str
    device: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    seq: int = 0  # its number among the ops of its kind, from 0


class Tensor:
    def __init__(self, torch: FakeTorch, shape: tuple[int, ...], dtype: DType, device: int | None,
                 pinned: bool = False, column_major: bool = False, value: float | None = None) -> None:
        self._torch, self.shape, self.dtype, self.device = torch, shape, dtype, device
        self.pinned, self.column_major, self.value = pinned, column_major, value

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        return self.device is not None

    def t(self) -> Tensor:
        """The transpose: a view with the other memory order (row-major in, column-major out)."""
        return Tensor(self._torch, tuple(reversed(self.shape)), self.dtype, self.device, self.pinned,
                      not self.column_major, self.value)

    def to(self, dtype: DType) -> Tensor:
        return Tensor(self._torch, self.shape, dtype, self.device, self.pinned, self.column_major, self.value)

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        if src.shape != self.shape:
            raise RuntimeError(f"The size of tensor a {self.shape} must match the size of tensor b {src.shape}")
        self._torch._copy(self, src, non_blocking)
        return self


class Event:
    def __init__(self, torch: FakeTorch, enable_timing: bool = False) -> None:
        self._torch, self.enable_timing = torch, enable_timing
        self.at: float | None = None
        self.device: int | None = None

    def record(self) -> None:
        t = self._torch
        self.device = t.current
        self.at = max(t.now, t.busy.get(t.current, 0.0))

    def synchronize(self) -> None:
        if self.at is not None:
            self._torch.now = max(self._torch.now, self.at)

    def elapsed_time(self, end: Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if self._torch.now < end.at:
            raise RuntimeError("CUDA error: device not ready")
        return (end.at - self.at) * 1000.0


class Cuda:
    def __init__(self, torch: FakeTorch) -> None:
        self._torch = torch

    def Event(self, enable_timing: bool = False) -> Event:  # noqa: N802 (torch's name)
        return Event(self._torch, enable_timing=enable_timing)

    @contextlib.contextmanager
    def device(self, dev: int | None) -> Iterator[None]:
        t = self._torch
        before = t.current
        if dev is not None:
            t.current = dev
        try:
            yield
        finally:
            t.current = before

    def synchronize(self, device: int | None = None) -> None:
        t = self._torch
        d = t.current if device is None else device
        t.syncs.append(d)
        t.now = max(t.now, t.busy.get(d, 0.0))

    def device_count(self) -> int:
        return len(self._torch.names)

    def get_device_name(self, device: int | None = None) -> str:
        return self._torch.names[self._torch.current if device is None else device]

    def can_device_access_peer(self, device: int, peer_device: int) -> bool:
        return (device, peer_device) in self._torch.peer_access

    def empty_cache(self) -> None:
        self._torch.empty_cache_calls += 1


class Time:
    """The module's `time`: perf_counter and monotonic read the simulated host clock; sleep moves it. A monotonic
    read takes about a microsecond (2^-20 s, exact in binary) of host time, as a real clock moves on between reads
    (a loop that polls it ends)."""

    TICK = 2.0**-20

    def __init__(self, torch: FakeTorch) -> None:
        self._torch = torch
        self.sleeps: list[float] = []

    def perf_counter(self) -> float:
        return self._torch.now

    def monotonic(self) -> float:
        self._torch.now += self.TICK
        return self._torch.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._torch.now += seconds


@dataclass
class FakeTorch:
    """`names`: one GPU name per device; `cost(op) -> seconds` on the GPU; `fail(op) -> exception or None`."""

    names: list[str]
    cost: Callable[[Op], float]
    fail: Callable[[Op], Exception | None] = lambda op: None
    peer_access: set[tuple[int, int]] = field(default_factory=set)
    now: float = 0.0
    current: int = 0
    busy: dict[int, float] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    syncs: list[int] = field(default_factory=list)
    empty_cache_calls: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cuda = Cuda(self)
        self.time = Time(self)
        self.bfloat16, self.float8_e4m3fn, self.uint8, self.float32 = bfloat16, float8_e4m3fn, uint8, float32

    def _dev(self, device: int | None) -> int | None:
        if device is not None and not 0 <= device < len(self.names):
            raise RuntimeError("CUDA error: invalid device ordinal")
        return device

    def _enqueue(self, op: Op, streams: tuple[int, ...], host_waits: bool = False) -> None:
        op.seq = self.counts.get(op.kind, 0)
        err = self.fail(op)
        if err is not None:
            raise err
        self.ops.append(op)
        self.counts[op.kind] = op.seq + 1
        done = max([self.now, *(self.busy.get(s, 0.0) for s in streams)]) + self.cost(op)
        for s in streams:
            self.busy[s] = done
        if host_waits:
            self.now = done

    # tensor factories (torch.randn / torch.empty / torch.empty_like / torch.tensor)
    @staticmethod
    def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
        if not all(isinstance(s, int) and s >= 0 for s in size):
            raise TypeError(f"randn(): argument 'size' must be tuple of ints, but found {size}")
        return tuple(size)

    def randn(self, *size: int, device: int | None = None, dtype: DType = float32) -> Tensor:
        return Tensor(self, self._size(size), dtype, self._dev(device))

    def empty(self, *size: int, dtype: DType = float32, device: int | None = None, pin_memory: bool = False) -> Tensor:
        return Tensor(self, self._size(size), dtype, self._dev(device), pinned=pin_memory)

    def empty_like(self, t: Tensor) -> Tensor:
        return Tensor(self, t.shape, t.dtype, t.device, t.pinned)

    def tensor(self, value: float, device: int | None = None, dtype: DType = float32) -> Tensor:
        return Tensor(self, (), dtype, self._dev(device), value=value)

    def mm(self, a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
        if a.dtype != b.dtype or a.device != b.device or a.shape[1] != b.shape[0]:
            raise RuntimeError("mm: expected mat1 and mat2 of one dtype and device, and mat1.size(1) == mat2.size(0)")
        assert a.device is not None
        self._enqueue(Op("mm", a.device, (a, b), {"out": out}), (a.device,))
        return out if out is not None else Tensor(self, (a.shape[0], b.shape[1]), a.dtype, a.device)

    def _scaled_mm(self, a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: DType | None = None) -> (
            Tensor):
        """fp8 GEMM; like the CUDA kernel it wants mat2 column-major (RuntimeError "mat2 must be col_major")."""
        if not b.column_major:
            raise RuntimeError("mat2 must be col_major")
        if a.shape[1] != b.shape[0]:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        if len({a.device, b.device, scale_a.device, scale_b.device}) != 1:
            raise RuntimeError("Expected all tensors to be on the same device")
        assert a.device is not None
        self._enqueue(Op("scaled_mm", a.device, (a, b), {"scale_a": scale_a, "scale_b": scale_b,
                                                        "out_dtype": out_dtype}), (a.device,))
        return Tensor(self, (a.shape[0], b.shape[1]), out_dtype or a.dtype, a.device)

    def _copy(self, dst: Tensor, src: Tensor, non_blocking: bool) -> None:
        gpus = tuple(d for d in (src.device, dst.device) if d is not None)
        if not gpus:
            return
        host = next((t for t in (src, dst) if t.device is None), None)
        streams = (src.device, dst.device) if len(set(gpus)) == 2 else (gpus[0],)
        op = Op("copy", gpus[0], (dst, src), {"non_blocking": non_blocking})
        self._enqueue(op, tuple(s for s in streams if s is not None),
                      host_waits=host is not None and not (non_blocking and host.pinned))

    def in_flight(self, device: int) -> float:
        """Seconds of work the device's stream still has queued at the host's now."""
        return max(0.0, self.busy.get(device, 0.0) - self.now)
