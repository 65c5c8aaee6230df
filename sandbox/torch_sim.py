"""SIMULATED torch CUDA runtime (gridready sandbox): shipped as `torch/_sim.py` in the stand-in torch wheel
(sandbox/pypi.py). Stdlib only. No tensor holds data: a tensor carries shape, strides, dtype and device, and every
CUDA operation "takes" a modeled time on its device's timeline (wall-clock seconds: the op starts when the device is
free, as on a stream), which CUDA events read and synchronize() waits for (it sleeps), so both the event timings and
the wall clock of the probe (gridready/probe/torch_bench.py) see the modeled speed.

Devices come from the host's simulated hardware profile (/etc/gridready-sim/profile.json, $GRIDREADY_SIM_PROFILE),
read by the simulator's own reader `gridready_sim.simcore` as installed on the sandbox hosts (/usr/lib/gridready-sim,
package gridready-sim-common; $GRIDREADY_SIM_LIB names another folder holding simcore.py). Without that reader or
profile, or with a loaded driver that differs from the user-space one, torch sees no CUDA device.

Modeled rates: the REAL H200 measurements recorded in this repository (see RATES). Faults of the profile
(sandbox/profile.py): a throttled GPU (hw_slowdown, power_brake, thermal_throttle) computes GEMMs at its reduced SM
clock (simcore.Gpu.sm_clock) over the SKU's max clock; pcie_downtrained scales host<->device copies by the lane
bandwidth of the trained link over the SKU's; nvlink_inactive scales peer copies by the active links.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

MARKER = "gridready-sim"  # the simulator's marker (gridready/certify/judge.py SIM_MARKER)
SIM_LIB = "/usr/lib/gridready-sim/gridready_sim"  # sandbox/packages.py LIB

# Recorded on real H200 SXM 141 GB GPUs by gridready's probe (torch 2.11, CUDA 13.0):
# - docs/examples/h200x1/probe.json (quick profile, best of 3): bf16 GEMM 782.95 TFLOP/s at n=8192 and 690.49 at
#   n=16384, fp8 (e4m3 _scaled_mm) 1370.73 TFLOP/s at n=16384, HBM copy 4.2799 TB/s (read + written, 8 GiB),
#   pinned H2D 55.285 GB/s and D2H 55.238 GB/s (1 GiB); probe_vs_best.md: the same figures within 3% of the best
#   method's;
# - tests/fixtures/h200x2/probe_quick.json (2 x H200 over NVLink 4): peer copy 391.96 GB/s GPU0->GPU1.
# A GEMM size not recorded takes the rate of the nearest recorded size.
RATES: dict[str, Any] = {
    "bf16_tflops": {8192: 782.95, 16384: 690.49},
    "fp8_tflops": {16384: 1370.73},
    "hbm_copy_tbps": 4.2799,
    "h2d_gbps": 55.285,
    "d2h_gbps": 55.238,
    "peer_gbps": 391.96,
}
THROTTLES = ("hw_slowdown", "power_brake", "thermal_throttle")


class dtype:  # noqa: N801 - torch's name
    def __init__(self, name: str, itemsize: int, is_floating_point: bool = True) -> None:
        self.name, self.itemsize, self.is_floating_point = name, itemsize, is_floating_point

    def __repr__(self) -> str:
        return f"torch.{self.name}"


float32 = dtype("float32", 4)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)
float8_e4m3fn = dtype("float8_e4m3fn", 1)
float8_e5m2 = dtype("float8_e5m2", 1)
uint8 = dtype("uint8", 1, is_floating_point=False)
int64 = dtype("int64", 8, is_floating_point=False)
FP8 = (float8_e4m3fn, float8_e5m2)
# c10's ScalarType names in torch's error messages (c10/core/ScalarType.h)
C10_NAMES = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "uint8": "unsigned char",
             "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2", "int64": "long"}


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (torch.cuda.OutOfMemoryError): https://docs.pytorch.org/docs/stable/generated/torch.cuda.OutOfMemoryError.html"""


# --- the host's simulated GPUs ---------------------------------------------------------------------------------


class _State:
    host: Any = None
    loaded = False
    current = 0
    busy_until: ClassVar[dict[int, float]] = {}  # device -> monotonic time its queued work ends


def _simcore() -> Any:
    lib = Path(os.environ.get("GRIDREADY_SIM_LIB") or SIM_LIB) / "simcore.py"
    if not lib.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_gridready_sim_simcore", lib)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _host() -> Any:
    """The simcore Host of the profile, or None where torch would find no CUDA device."""
    if not _State.loaded:
        _State.loaded = True
        core = _simcore()
        if core is not None and core.profile_path().is_file():
            host = core.load()
            # a loaded kernel module that differs from the user-space driver: cuInit fails, as on a host whose
            # driver was upgraded without a reboot, so torch.cuda.is_available() is False
            # (https://docs.pytorch.org/docs/stable/generated/torch.cuda.is_available.html)
            _State.host = None if host.nvml_mismatch() else (core, host)
    return _State.host


def _count() -> int:
    h = _host()
    return len(h[1].gpus) if h else 0


def _check(index: int) -> int:
    """A valid device ordinal, else CUDA's invalid device ordinal (cudaErrorInvalidDevice,
    https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html)."""
    if _count() == 0:
        # torch.cuda._lazy_init's error on a host without a driver (torch/cuda/__init__.py, torch._C._cuda_init)
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                           "installed a driver from http://www.nvidia.com/Download/index.aspx")
    if not 0 <= index < _count():
        raise RuntimeError("CUDA error: invalid device ordinal")
    return index


def _gpu(index: int) -> Any:
    return _host()[1].gpus[_check(index)]


def _nearest(table: dict[int, float], n: int) -> float:
    return table[min(table, key=lambda k: (abs(math.log2(k) - math.log2(max(n, 1))), k))]


def _clock_factor(index: int) -> float:
    g = _gpu(index)
    if not any(g.has(k) for k in THROTTLES):
        return 1.0
    return min(1.0, g.sm_clock / float(g.sku.get("max_sm_clock_mhz") or 1980))


def _pcie_factor(index: int) -> float:
    core, _ = _host()
    g = _gpu(index)
    gen, width = g.pcie
    lanes = core.GEN_GBPS_PER_LANE
    full = lanes.get(int(g.sku["pcie_gen"]), lanes[5]) * int(g.sku["pcie_width"])
    return min(1.0, lanes.get(gen, lanes[3]) * width / full)


def _peer_factor(index: int) -> float:
    g = _gpu(index)
    links = int(g.sku.get("nvlink_links") or 0)
    if links == 0:
        return RATES["h2d_gbps"] / RATES["peer_gbps"]  # no NVLink: peer copies cross PCIe
    return max(g.nvlinks_active, 0) / links or RATES["h2d_gbps"] / RATES["peer_gbps"]


def _stream(index: int) -> float:
    """Where the device's stream stands: the end of its queued work (the wall clock at first use)."""
    return _State.busy_until.setdefault(index, time.monotonic())


def _run(devices: tuple[int, ...], seconds: float) -> None:
    """Queue `seconds` of work on the devices' streams, after what is queued there: between two synchronizations
    the work runs back to back, as kernels the host launches ahead of a busy GPU do (the host's own Python time,
    slow on a shared sandbox host, is not the GPU's)."""
    start = max(_stream(d) for d in devices)
    for d in devices:
        _State.busy_until[d] = start + seconds


def _wait(index: int) -> None:
    """Block until the device's queued work is done (sleeping); the stream is then idle."""
    left = _stream(index) - time.monotonic()
    if left > 0:
        time.sleep(left)
    _settle(index)


def _settle(index: int) -> None:
    """Forget a stream whose queued work is done: an idle stream restarts at the wall clock of its next use, as a
    GPU starts a kernel no earlier than its launch (cudaLaunchKernel queues it; an idle stream runs it at once), so
    work queued after an idle gap never counts as begun before it was launched."""
    if _State.busy_until.get(index, 0.0) <= time.monotonic():
        _State.busy_until.pop(index, None)


# --- devices ---------------------------------------------------------------------------------------------------


def _device_index(device: Any) -> int | None:
    """None for the CPU, else the CUDA ordinal of int / 'cuda' / 'cuda:N' / torch.device
    (https://docs.pytorch.org/docs/stable/tensor_attributes.html#torch.device)."""
    if device is None:
        return None
    if isinstance(device, Device):
        return device.index if device.type == "cuda" else None
    if isinstance(device, int):
        return _check(device)
    text = str(device)
    if text == "cpu":
        return None
    if text == "cuda":
        return _check(_State.current)
    if text.startswith("cuda:") and text[5:].isdigit():
        return _check(int(text[5:]))
    raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {text}")


class Device:
    def __init__(self, kind: str, index: int | None = None) -> None:
        self.type = kind
        self.index = index

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


def device(kind: Any, index: int | None = None) -> Device:
    if isinstance(kind, int):
        return Device("cuda", _check(kind))
    if index is not None:
        return Device(str(kind), index)
    idx = _device_index(kind)
    return Device("cpu") if idx is None else Device("cuda", idx)


# --- tensors ---------------------------------------------------------------------------------------------------


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class Tensor:
    """Shape, strides, dtype and device; no data (SIMULATED)."""

    def __init__(self, shape: tuple[int, ...], dt: dtype, dev: int | None, pinned: bool = False,
                 strides: tuple[int, ...] | None = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dt
        self._dev = dev
        self._pinned = pinned
        self._strides = strides or _contiguous_strides(self.shape)

    @property
    def device(self) -> Device:
        return Device("cpu") if self._dev is None else Device("cuda", self._dev)

    @property
    def is_cuda(self) -> bool:
        return self._dev is not None

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def stride(self, dim: int | None = None) -> Any:
        return self._strides if dim is None else self._strides[dim]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def is_pinned(self) -> bool:
        return self._pinned

    def is_contiguous(self) -> bool:
        return self._strides == _contiguous_strides(self.shape)

    def t(self) -> Tensor:
        """A view with the two dimensions swapped; 2-D at most (https://docs.pytorch.org/docs/stable/generated/torch.t.html)."""
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
        return Tensor(self.shape[::-1], self.dtype, self._dev, self._pinned, self._strides[::-1])

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """Tensor.to(dtype) / to(device) / to(device, dtype) (https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html):
        a new contiguous tensor; a conversion on the GPU reads and writes it through HBM."""
        dt, dev = kwargs.get("dtype", self.dtype), self._dev
        for a in args:
            if isinstance(a, dtype):
                dt = a
            else:
                dev = _device_index(a)
        if "device" in kwargs:
            dev = _device_index(kwargs["device"])
        out = Tensor(self.shape, dt, dev)
        out.copy_(self)
        return out

    def cuda(self, index: int | None = None) -> Tensor:
        return self.to(_State.current if index is None else index)

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        """Tensor.copy_ (https://docs.pytorch.org/docs/stable/generated/torch.Tensor.copy_.html): the shapes must be
        broadcastable (equal here); the time is the copy's on the GPU(s) it involves."""
        if src.numel() != self.numel():
            raise RuntimeError(f"The size of tensor a ({self.numel()}) must match the size of tensor b ({src.numel()})")
        nbytes = max(self.nbytes, src.nbytes)
        if self._dev is not None and src._dev is not None:
            if self._dev == src._dev:  # on-device copy: read + write through HBM (the recorded TB/s counts both)
                _run((self._dev,), 2 * nbytes / (RATES["hbm_copy_tbps"] * 1e12))
            else:
                _run((src._dev, self._dev), nbytes / (RATES["peer_gbps"] * 1e9 * min(
                    _peer_factor(src._dev), _peer_factor(self._dev))))
        elif self._dev is not None or src._dev is not None:
            dev = self._dev if self._dev is not None else src._dev
            host = src if self._dev is not None else self
            rate = RATES["h2d_gbps"] if self._dev is not None else RATES["d2h_gbps"]
            # pageable host memory is staged through a pinned buffer: half the pinned rate (a model, not recorded)
            _run((dev,), nbytes / (rate * 1e9 * _pcie_factor(dev) * (1.0 if host._pinned else 0.5)))
            if not (non_blocking and host._pinned):
                _wait(dev)  # a copy to or from pageable memory returns once done (CUDA memcpy semantics)
        return self

    def __repr__(self) -> str:
        dev = "" if self._dev is None else f", device='cuda:{self._dev}'"
        return f"tensor(<SIMULATED {list(self.shape)}>{dev}, dtype={self.dtype!r})"


def _factory(shape: tuple[Any, ...], dt: dtype | None, device: Any, pin_memory: bool) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dev = _device_index(device)
    t = Tensor(tuple(shape), dt or float32, dev, pinned=pin_memory and dev is None)
    if dev is not None:
        mem = int(_gpu(dev).display["mem_mib"]) << 20
        if t.nbytes > mem:
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {t.nbytes / (1 << 30):.2f} GiB. GPU {dev} "
                                   f"has a total capacity of {mem / (1 << 30):.2f} GiB")
    return t


def empty(*shape: Any, dtype: dtype | None = None, device: Any = None, pin_memory: bool = False) -> Tensor:
    return _factory(shape, dtype, device, pin_memory)


def zeros(*shape: Any, dtype: dtype | None = None, device: Any = None, pin_memory: bool = False) -> Tensor:
    return _factory(shape, dtype, device, pin_memory)


def randn(*shape: Any, dtype: dtype | None = None, device: Any = None, pin_memory: bool = False) -> Tensor:
    """torch.randn samples floating point types only; fp8 has no normal kernel (aten/src/ATen/native/cuda/
    DistributionNormal.cu dispatches floating types with Half and BFloat16:
    https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/DistributionNormal.cu)."""
    dt = dtype or float32
    if dt in FP8 or not dt.is_floating_point:
        kernel = "normal_kernel_cuda" if _device_index(device) is not None else "normal_kernel_cpu"
        raise RuntimeError(f'"{kernel}" not implemented for \'{dt.name.capitalize()}\'')
    return _factory(shape, dt, device, pin_memory)


def empty_like(t: Tensor, dtype: dtype | None = None, device: Any = None) -> Tensor:
    return Tensor(t.shape, dtype or t.dtype, t._dev if device is None else _device_index(device), t._pinned)


def tensor(data: Any, dtype: dtype | None = None, device: Any = None) -> Tensor:
    """torch.tensor: a Python float gives float32, an int int64 (https://docs.pytorch.org/docs/stable/generated/torch.tensor.html)."""
    shape: tuple[int, ...] = () if isinstance(data, (int, float)) else (len(data),)
    dt = dtype or (int64 if isinstance(data, int) and not isinstance(data, bool) else float32)
    return _factory(shape, dt, device, False)


def _same_device(*ts: Tensor) -> int:
    devs = {t._dev for t in ts}
    if len(devs) > 1 or None in devs:
        names = sorted("cpu" if d is None else f"cuda:{d}" for d in devs)
        if len(devs) > 1:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{names[0]} and {names[1]}!")
        raise NotImplementedError("SIMULATED torch models CUDA tensors only (no CPU compute)")
    return devs.pop()


def _matrices(a: Tensor, b: Tensor, op: str) -> None:
    """aten's checks of mm (aten/src/ATen/native/LinearAlgebra.cpp, TORCH_CHECK in meta mm):
    https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/LinearAlgebra.cpp"""
    if a.dim() != 2:
        raise RuntimeError(f"{'self' if op == 'mm' else 'mat1'} must be a matrix")
    if b.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")


def _gemm_seconds(dev: int, m: int, k: int, n: int, table: dict[int, float]) -> float:
    return 2.0 * m * k * n / (_nearest(table, round((m * k * n) ** (1 / 3))) * 1e12 * _clock_factor(dev))


def mm(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """torch.mm (https://docs.pytorch.org/docs/stable/generated/torch.mm.html): same dtype, same device, (m x k) @
    (k x n). Modeled: bf16 and fp16 (the same tensor-core rate on Hopper) at the recorded bf16 rate."""
    _matrices(a, b, "mm")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {C10_NAMES[a.dtype.name]} != "
                           f"{C10_NAMES[b.dtype.name]}")
    if a.dtype in FP8:  # fp8 needs _scaled_mm (aten mm has no Float8 kernel)
        raise RuntimeError(f'"addmm_cuda" not implemented for \'{a.dtype.name.capitalize()}\'')
    if a.dtype not in (bfloat16, float16):
        raise NotImplementedError(f"SIMULATED torch models bf16/fp16 mm only, not {a.dtype!r}")
    dev = _same_device(a, b, *([out] if out is not None else []))
    if out is not None and out.shape != (a.shape[0], b.shape[1]):
        raise RuntimeError(f"Expected out tensor to have shape {[a.shape[0], b.shape[1]]}, got {list(out.shape)}")
    _run((dev,), _gemm_seconds(dev, a.shape[0], a.shape[1], b.shape[1], RATES["bf16_tflops"]))
    return out if out is not None else Tensor((a.shape[0], b.shape[1]), a.dtype, dev)


matmul = mm


def _scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, bias: Tensor | None = None,
               scale_result: Tensor | None = None, out_dtype: dtype | None = None,
               use_fast_accum: bool = False) -> Tensor:
    """torch._scaled_mm, as aten's _scaled_mm_out_cuda checks it (aten/src/ATen/native/cuda/Blas.cpp,
    https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Blas.cpp): scale_a and scale_b are
    required (no default in native_functions.yaml), fp32 tensors; mat1 row-major and mat2 column-major fp8; the
    dimensions multiples of 16; out_dtype defaults to mat1's dtype."""
    _matrices(a, b, "_scaled_mm")
    if scale_a is None or scale_b is None or not isinstance(scale_a, Tensor) or not isinstance(scale_b, Tensor):
        raise TypeError("_scaled_mm(): argument 'scale_a' and 'scale_b' (position 3 and 4) must be Tensor")
    if scale_a.dtype is not float32 or scale_b.dtype is not float32:
        raise RuntimeError("Both scale_a and scale_b must be float (fp32) tensors.")
    if a.dtype not in FP8 or b.dtype not in FP8:
        raise RuntimeError(f"Expected both inputs to be fp8 types but got self.dtype={C10_NAMES[a.dtype.name]} and "
                           f"mat2.dtype={C10_NAMES[b.dtype.name]}")
    if a.shape[1] % 16:
        raise RuntimeError(f"Expected trailing dimension of mat1 to be divisible by 16 but got mat1 shape: "
                           f"({a.shape[0]}x{a.shape[1]}).")
    if b.shape[0] % 16 or b.shape[1] % 16:
        raise RuntimeError(f"mat2 shape ({b.shape[0]}x{b.shape[1]}) must be divisible by 16")
    if a.stride() != (a.shape[1], 1):
        raise RuntimeError("mat1 must be row_major")
    if b.stride() != (1, b.shape[0]):
        raise RuntimeError("mat2 must be col_major")
    dev = _same_device(a, b, scale_a, scale_b)
    _run((dev,), _gemm_seconds(dev, a.shape[0], a.shape[1], b.shape[1], RATES["fp8_tflops"]))
    return Tensor((a.shape[0], b.shape[1]), out_dtype or a.dtype, dev)


# --- torch.cuda ------------------------------------------------------------------------------------------------


def is_available() -> bool:
    """https://docs.pytorch.org/docs/stable/generated/torch.cuda.is_available.html"""
    return _count() > 0


def device_count() -> int:
    """https://docs.pytorch.org/docs/stable/generated/torch.cuda.device_count.html"""
    return _count()


def current_device() -> int:
    _check(_State.current)
    return _State.current


def set_device(dev: Any) -> None:
    idx = _device_index(dev)
    if idx is not None:
        _State.current = idx


def get_device_name(dev: Any = None) -> str:
    """https://docs.pytorch.org/docs/stable/generated/torch.cuda.get_device_name.html: the name nvidia-smi shows;
    an ordinal out of range fails torch.cuda.get_device_properties' check, AssertionError('Invalid device id')."""
    idx = dev if isinstance(dev, int) else _State.current if dev is None else _device_index(dev)
    if idx is None or not 0 <= idx < _count():
        raise AssertionError("Invalid device id")
    return str(_gpu(idx).display["name"])


def can_device_access_peer(dev: Any, peer: Any) -> bool:
    """https://docs.pytorch.org/docs/stable/generated/torch.cuda.can_device_access_peer.html: both ordinals must be
    valid (AssertionError 'Invalid device id' / 'Invalid peer device id'); HGX GPUs reach each other over NVLink or
    PCIe P2P, a GPU is not its own peer (cudaDeviceCanAccessPeer)."""
    d, p = (x if isinstance(x, int) else _device_index(x) for x in (dev, peer))
    if d is None or not 0 <= d < _count():
        raise AssertionError("Invalid device id")
    if p is None or not 0 <= p < _count():
        raise AssertionError("Invalid peer device id")
    return d != p


def synchronize(dev: Any = None) -> None:
    """Waits for all work queued on the device (https://docs.pytorch.org/docs/stable/generated/torch.cuda.synchronize.html)."""
    idx = _State.current if dev is None else _device_index(dev)
    _wait(_check(idx if idx is not None else _State.current))


def empty_cache() -> None:
    """https://docs.pytorch.org/docs/stable/generated/torch.cuda.empty_cache.html (no cached blocks here)."""


class device_context:  # noqa: N801 - torch.cuda.device
    """torch.cuda.device(i): a context manager that makes i the current device
    (https://docs.pytorch.org/docs/stable/generated/torch.cuda.device.html)."""

    def __init__(self, dev: Any) -> None:
        idx = _device_index(dev)
        self.idx = _State.current if idx is None else idx
        self.prev = _State.current

    def __enter__(self) -> None:
        self.prev, _State.current = _State.current, self.idx

    def __exit__(self, *exc: object) -> None:
        _State.current = self.prev


class Event:
    """torch.cuda.Event (https://docs.pytorch.org/docs/stable/generated/torch.cuda.Event.html): record() marks the
    point of the current device's stream after the work queued so far; elapsed_time() is milliseconds between two
    recorded timing events; synchronize() waits until the event's point is reached."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._at: float | None = None
        self._dev: int | None = None

    def record(self, stream: Any = None) -> None:
        self._dev = current_device()
        self._at = _stream(self._dev)

    def query(self) -> bool:
        return self._at is None or time.monotonic() >= self._at

    def synchronize(self) -> None:
        if self._at is not None and self._dev is not None:
            time.sleep(max(0.0, self._at - time.monotonic()))
            _settle(self._dev)

    def elapsed_time(self, end: Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._at is None or end._at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        end.synchronize()  # cudaEventElapsedTime needs the end event completed
        return (end._at - self._at) * 1000.0


def config_show(version: str, cuda: str) -> str:
    """torch.__config__.show(): the build description, here saying SIMULATED with the simulator's marker so that the
    probe keeps it among its raw outputs (gridready/probe/collect.py) and the judge lists it as simulated."""
    return (f"PyTorch built with:\n  - {MARKER}: SIMULATED torch {version} (gridready sandbox stand-in, no GPU "
            f"compute; modeled on recorded H200 figures, sandbox/torch_sim.py)\n  - CUDA Runtime {cuda}\n")
