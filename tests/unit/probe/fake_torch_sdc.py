"""A recording stand-in for the few torch calls the probe's GPU modules make (gridready/probe/sdc.py), on numpy.

It behaves as torch documents these calls (https://pytorch.org/docs/stable/): `torch.Generator(device=...)`
with `manual_seed(seed)` returning the generator; `torch.randn(*size, device=, generator=, dtype=)` drawing from it
(the same seed gives the same values, two draws differ); `Tensor.to(dtype)` rounding to nearest-even (bfloat16, and
float8_e4m3fn, 3 mantissa bits, bias 7, largest 448: the OCP FP8 formats); `Tensor.view(dtype)` reinterpreting the
bytes (a different item size changes the last dimension) and `Tensor.view(-1)` refusing a non-contiguous tensor
(and any size below -1); operands on two devices (a CPU tensor with a GPU one) refused;
`Tensor.numpy()` refusing bfloat16/float8 (numpy has no such dtype); `torch.mm` refusing float8 ('addmm_cuda' not
implemented for 'Float8_e4m3fn') and using TF32 for float32 while `torch.backends.cuda.matmul.allow_tf32` is set;
`torch._scaled_mm(a, b, scale_a=, scale_b=, out_dtype=)` wanting float8 inputs with `b` column-major; int64
arithmetic wrapping modulo 2^64. `torch.cuda.synchronize` is where the host waits for the GPU: the fake clock
advances there by `sync_s`.

Tensors are lazy: a value is computed when read, so an 8192 x 8192 warm-up GEMM that nobody reads costs nothing."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


class DType:
    def __init__(self, name: str, storage: Any, itemsize: int, floating: bool) -> None:
        self.name, self.storage, self.itemsize, self.is_floating_point = name, np.dtype(storage), itemsize, floating

    def __repr__(self) -> str:
        return f"torch.{self.name}"


float32 = DType("float32", np.float32, 4, True)
bfloat16 = DType("bfloat16", np.uint16, 2, True)  # stored as its bit pattern
float8_e4m3fn = DType("float8_e4m3fn", np.uint8, 1, True)  # stored as its bit pattern
int16, int32, int64, uint8 = (DType(n, getattr(np, n), np.dtype(n).itemsize, False)
                              for n in ("int16", "int32", "int64", "uint8"))
long = int64


def _e4m3_values() -> np.ndarray:
    """The 127 non-negative finite float8_e4m3fn values by code 0..126 (code 127 is NaN), increasing."""
    out = []
    for code in range(127):
        e, m = code >> 3, code & 7
        out.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(out, dtype=np.float64)


E4M3 = _e4m3_values()


def encode(values: np.ndarray, dtype: DType) -> np.ndarray:
    """float values -> the storage of `dtype` (round to nearest, ties to even)."""
    v = np.asarray(values, dtype=np.float32)
    if dtype is float32:
        return v.copy()
    if dtype is bfloat16:
        bits = v.view(np.uint32).astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if dtype is float8_e4m3fn:
        mag = np.abs(v.astype(np.float64))
        hi = np.clip(np.searchsorted(E4M3, mag), 1, 126)
        lo = hi - 1
        d_lo, d_hi = mag - E4M3[lo], E4M3[hi] - mag
        code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi)
        code = np.where(mag >= E4M3[126], 126, code)
        return (code | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)
    return v.astype(dtype.storage)


def decode(data: np.ndarray, dtype: DType) -> np.ndarray:
    """The storage of `dtype` -> float32 values (ints as they are)."""
    if dtype is bfloat16:
        return (data.astype(np.uint32) << 16).view(np.float32)
    if dtype is float8_e4m3fn:
        mag = E4M3[np.minimum(data & 0x7F, 126)].astype(np.float32)
        return np.where(data & 0x80, -mag, mag).astype(np.float32)
    return data


def tf32(values: np.ndarray) -> np.ndarray:
    """float32 rounded to TF32's 10 mantissa bits (what the tensor cores read while allow_tf32 is set)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


class Device:
    def __init__(self, spec: Any) -> None:
        self.type, self.index = ("cuda", int(spec)) if isinstance(spec, int) else (
            str(spec).split(":")[0], int(str(spec).split(":")[1]) if ":" in str(spec) else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __repr__(self) -> str:
        return f"device(type='{self.type}', index={self.index})"


class Tensor:
    def __init__(self, dtype: DType, device: Device, make: Callable[[], np.ndarray], shape: tuple[int, ...]) -> None:
        self.dtype, self.device, self._make, self._data, self._shape = dtype, device, make, None, shape

    @classmethod
    def of(cls, data: np.ndarray, dtype: DType, device: Device) -> Tensor:
        return cls(dtype, device, lambda: data, tuple(data.shape))

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            self._data = self._make()
        return self._data

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def values(self) -> np.ndarray:
        return decode(self.data, self.dtype)

    def numel(self) -> int:
        return int(np.prod(self._shape))

    def dim(self) -> int:
        return len(self._shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return bool(self.data.flags.c_contiguous)

    def contiguous(self) -> Tensor:
        return Tensor.of(np.ascontiguousarray(self.data), self.dtype, self.device)

    def t(self) -> Tensor:
        if self.dim() != 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
        return Tensor.of(self.data.T, self.dtype, self.device)

    def to(self, dtype: DType) -> Tensor:
        if not dtype.is_floating_point and not self.dtype.is_floating_point:
            return Tensor.of(self.data.astype(dtype.storage), dtype, self.device)
        return Tensor.of(encode(self.values(), dtype), dtype, self.device)

    def view(self, *arg: Any) -> Tensor:
        if not self.is_contiguous():
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        if len(arg) == 1 and isinstance(arg[0], DType):
            return Tensor.of(self.data.view(arg[0].storage), arg[0], self.device)
        if any(s < -1 for s in arg):
            raise RuntimeError(f"invalid shape dimension {min(arg)}")
        return Tensor.of(self.data.reshape(*arg), self.dtype, self.device)

    def _int_op(self, other: Any, op: Callable[[Any, Any], Any]) -> Tensor:
        if isinstance(other, Tensor) and other.device != self.device:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                               f"{self.device} and {other.device}!")
        rhs = other.data if isinstance(other, Tensor) else np.int64(other)
        return Tensor.of(op(self.data, rhs), self.dtype, self.device)

    def __mul__(self, other: Any) -> Tensor:
        return self._int_op(other, np.multiply)

    __rmul__ = __mul__

    def __add__(self, other: Any) -> Tensor:
        return self._int_op(other, np.add)

    __radd__ = __add__

    def __xor__(self, other: Any) -> Tensor:
        return self._int_op(other, np.bitwise_xor)

    def sum(self) -> Tensor:
        if self.dtype.is_floating_point:
            return Tensor.of(np.array(self.values().sum(dtype=np.float32)), float32, self.device)
        return Tensor.of(np.array(self.data.sum(dtype=np.int64)), int64, self.device)

    def item(self) -> Any:
        return self.values().item() if self.dtype.is_floating_point else self.data.item()

    def cpu(self) -> Tensor:
        return Tensor.of(self.data, self.dtype, Device("cpu"))

    def numpy(self) -> np.ndarray:
        if self.dtype in (bfloat16, float8_e4m3fn):
            raise TypeError(f"Got unsupported ScalarType {self.dtype.name}")
        if self.device.type != "cpu":
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first.")
        return self.data


class Generator:
    def __init__(self, device: Any = "cpu") -> None:
        self.device = Device(device)
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed: int) -> Generator:
        self.rng = np.random.default_rng(seed)
        return self


class FakeTorch(types.ModuleType):
    """`torch` for one test: `gpus` names, `sync_s` per synchronize, `flip`: the mm calls (1-based) whose output
    has its first element's lowest bit flipped (a silent data corruption), `fail_on`: GPUs whose name query
    raises."""

    def __init__(self, gpus: tuple[str, ...] = ("NVIDIA H200",), sync_s: float = 0.25,
                 flip: frozenset[int] = frozenset(), fail_on: frozenset[int] = frozenset()) -> None:
        super().__init__("torch")
        self.__version__, self.version = "2.9.0+cu130", types.SimpleNamespace(cuda="13.0")
        for d in (float32, bfloat16, float8_e4m3fn, int16, int32, int64, uint8):
            setattr(self, d.name, d)
        self.long = int64
        self.Generator, self.Tensor = Generator, Tensor
        self.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(
            allow_tf32=True)))
        self.now, self.sync_s, self.flip, self.fail_on, self.gpus = 100.0, sync_s, flip, fail_on, gpus
        self.calls: list[tuple[Any, ...]] = []  # (name, details): mm, _scaled_mm, synchronize, device, empty_cache
        self.current: int | None = None
        self._global = np.random.default_rng(0)
        self.cuda = types.SimpleNamespace(
            device_count=lambda: len(self.gpus), get_device_name=self._name, synchronize=self._sync,
            device=self._device, empty_cache=lambda: self.calls.append(("empty_cache", self.current)))

    # the clock the module under test reads (time.monotonic / time.perf_counter)
    def monotonic(self) -> float:
        return self.now

    def _name(self, dev: int) -> str:
        if dev in self.fail_on:
            raise RuntimeError(f"CUDA error: uncorrectable ECC error encountered (device {dev})")
        return self.gpus[dev]

    def _sync(self, dev: Any = None) -> None:
        self.now += self.sync_s
        self.calls.append(("synchronize", dev))

    @contextlib.contextmanager
    def _device(self, dev: int) -> Iterator[None]:
        prev, self.current = self.current, dev
        self.calls.append(("device", dev))
        try:
            yield
        finally:
            self.current = prev

    def manual_seed(self, seed: int) -> None:
        self._global = np.random.default_rng(seed)

    def randn(self, *size: int, device: Any = None, generator: Generator | None = None,
              dtype: DType = float32) -> Tensor:
        child = int((generator.rng if generator else self._global).integers(2**63))
        shape = tuple(size)
        self.calls.append(("randn", shape, device, generator.device if generator else None, dtype))
        return Tensor(dtype, Device(device if device is not None else "cpu"),
                      lambda: encode(np.random.default_rng(child).standard_normal(shape, dtype=np.float32), dtype),
                      shape)

    def tensor(self, value: float, device: Any = None) -> Tensor:
        return Tensor.of(np.array(value, dtype=np.float32), float32, device if isinstance(device, Device)
                         else Device(device if device is not None else "cpu"))

    def arange(self, n: int, device: Any = None, dtype: DType = int64) -> Tensor:
        return Tensor.of(np.arange(n, dtype=dtype.storage), dtype, device if isinstance(device, Device)
                         else Device(device if device is not None else "cpu"))

    def _product(self, name: str, a: Tensor, b: Tensor, out: DType, scale: float, tf: bool) -> Tensor:
        self.calls.append((name, a.dtype, tuple(a.shape), self.backends.cuda.matmul.allow_tf32, self.current))
        corrupt = len([c for c in self.calls if c[0] in ("mm", "_scaled_mm")]) in self.flip

        def make() -> np.ndarray:
            x, y = a.values(), b.values()
            if tf:
                x, y = tf32(x), tf32(y)
            data = encode((x.astype(np.float64) @ y.astype(np.float64) * scale).astype(np.float32), out)
            if corrupt:
                data.reshape(-1)[:1] ^= np.ones(1, dtype=data.dtype)
            return data

        return Tensor(out, a.device, make, (a.shape[0], b.shape[1]))

    def mm(self, a: Tensor, b: Tensor) -> Tensor:
        if a.dtype is not b.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
        if a.dtype is float8_e4m3fn:
            raise RuntimeError("\"addmm_cuda\" not implemented for 'Float8_e4m3fn'")
        tf = a.dtype is float32 and self.backends.cuda.matmul.allow_tf32
        return self._product("mm", a, b, a.dtype, 1.0, tf)

    def _scaled_mm(self, a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: DType = float32,
                   **_: Any) -> Tensor:
        if a.dtype is not float8_e4m3fn or b.dtype is not float8_e4m3fn:
            raise RuntimeError("Expected both inputs to be fp8 types")
        if any(t.device != a.device for t in (b, scale_a, scale_b)):
            raise RuntimeError("Expected all tensors to be on the same device")
        if not a.data.flags.c_contiguous or not b.data.flags.f_contiguous:
            raise RuntimeError("mat1 must be row_major and mat2 must be col_major")
        return self._product("_scaled_mm", a, b, out_dtype, scale_a.item() * scale_b.item(), False)

    def count(self, name: str) -> int:
        return sum(1 for c in self.calls if c[0] == name)
