"""A recording stand-in for the torch calls of the goodput probe (gridready/probe/goodput.py), eager on numpy float64.

The calls behave as the PyTorch reference documents them (https://pytorch.org/docs/stable/): `nn.Module`
registers submodules and parameters on assignment (assigning one before `Module.__init__()` raises) and lists
`parameters()` own first, then submodules in order; `nn.Linear(in, out, bias=True)` holds `weight` (out, in) and
`bias` (out); `nn.Embedding(n, d).weight` is (n, d); `nn.RMSNorm(d, eps=None)` scales by a weight of ones with
eps = `torch.finfo(x.dtype).eps` (bfloat16: 2^-7); `F.scaled_dot_product_attention(q, k, v, is_causal=)` is
softmax(q k^T / sqrt(E) + causal mask) v over (..., L, E); `F.gelu(x, approximate='none'|'tanh')` refuses other
values; `F.linear(x, w)` is x w^T; `F.cross_entropy(input (N, C), target (N,))` is the mean negative log-softmax;
`Tensor.view` wants int sizes (none below -1) with the same number of elements; `torch.randperm`,
`torch.randint(low, high, size)` draw from the `generator` given, on its device (a CUDA generator for a CPU
tensor is refused), device None being the CPU; iterating a tensor yields its slices along dim 0;
`torch.multiprocessing.start_processes(fn, args, nprocs, join, start_method)` calls `fn(i, *args)` for each i
(here one after the other, in this process); NCCL writes its debug log to `NCCL_DEBUG_FILE` with `%h` the host
and `%p` the pid. There are no gradients: `backward` and the optimizer step are recorded, the weights stay as
initialised; a parameter over GPU_ELEMENTS is torch's out-of-memory error (the real model does not fit the double).
`torch.cuda.synchronize` is where the host waits for the GPU: the fake clock advances by `sync_s`."""

from __future__ import annotations

import contextlib
import math
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

EPS = {"bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}


class T:
    """A tensor: a numpy array, a dtype name and a device string."""

    def __init__(self, a: Any, dtype: str = "float32", device: str = "cpu") -> None:
        self.a, self.dtype, self.device = np.asarray(a), dtype, device

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.a.shape)

    def dim(self) -> int:
        return self.a.ndim

    def numel(self) -> int:
        return int(self.a.size)

    def view(self, *shape: Any) -> T:
        if not all(isinstance(s, int) for s in shape):
            raise TypeError(f"view(): argument 'size' must be tuple of ints, but found {shape}")
        if any(s < -1 for s in shape):
            raise RuntimeError(f"invalid shape dimension {min(shape)}")
        try:
            return T(self.a.reshape(shape), self.dtype, self.device)
        except ValueError:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {self.numel()}") from None

    reshape = view

    def permute(self, *dims: int) -> T:
        if sorted(dims) != list(range(self.dim())):
            raise RuntimeError("permute(): number of dims don't match or a dim is repeated")
        return T(np.transpose(self.a, dims), self.dtype, self.device)

    def transpose(self, i: int, j: int) -> T:
        return T(np.swapaxes(self.a, i, j), self.dtype, self.device)

    def float(self) -> T:
        return T(self.a.astype(np.float64), "float32", self.device)

    def detach(self) -> T:
        return T(self.a, self.dtype, self.device)

    def backward(self) -> None:
        self.backwards = getattr(self, "backwards", 0) + 1

    def __float__(self) -> float:
        return float(self.a.reshape(-1)[0]) if self.a.size == 1 else float(self.a)

    def __iter__(self) -> Iterator[T]:
        return (T(x, self.dtype, self.device) for x in self.a)

    def __getitem__(self, idx: Any) -> T:
        return T(self.a[_np(idx)], self.dtype, self.device)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self.a[_np(idx)] = value.a if isinstance(value, T) else value

    def __add__(self, other: Any) -> T:
        return T(self.a + (other.a if isinstance(other, T) else other), self.dtype, self.device)


def where(device: Any) -> str:
    """torch's device argument as a string: None is the CPU, an int the CUDA device of that index."""
    return "cpu" if device is None else f"cuda:{device}" if isinstance(device, int) else str(device)


def drawn_on(device: Any, generator: Generator | None) -> str:
    """A tensor drawn from a generator must be on the generator's device (torch refuses otherwise)."""
    dev = where(device)
    if generator is not None and generator.device != dev:
        raise RuntimeError(f"Expected a '{dev.split(':')[0]}' device type for generator but found "
                           f"'{generator.device.split(':')[0]}'")
    return dev


def _np(idx: Any) -> Any:
    if isinstance(idx, tuple):
        return tuple(_np(i) for i in idx)
    return idx.a if isinstance(idx, T) else idx


class Parameter(T):
    pass


GPU_ELEMENTS = 1 << 22  # the double's GPU holds 4 Mi parameters: a 1B model there is torch's out-of-memory error


def allocate(shape: tuple[int, ...], draw: Callable[[tuple[int, ...]], np.ndarray]) -> Parameter:
    if int(np.prod(shape)) > GPU_ELEMENTS:
        raise RuntimeError(f"CUDA out of memory. Tried to allocate a {shape} tensor on the double's GPU")
    return Parameter(draw(shape))


class Module:
    def __init__(self) -> None:
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_params", {})

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, (Module, Parameter)) and "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Parameter):
            self._params[name] = value
        object.__setattr__(self, name, value)

    def parameters(self) -> Iterator[Parameter]:
        yield from self._params.values()
        for m in self._modules.values():
            yield from m.parameters()

    def to(self, device: Any = None, dtype: str | None = None) -> Module:
        self.moved = (device, dtype)
        for p in self.parameters():
            p.dtype, p.device = dtype or p.dtype, where(device)
        return self

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)  # type: ignore[attr-defined]


class Linear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        bound = 1 / math.sqrt(in_features)
        self.weight = allocate((out_features, in_features), lambda shape: np.random.default_rng(
            in_features * 7919 + out_features).uniform(-bound, bound, shape))
        if bias:
            self.bias = Parameter(np.zeros(out_features))

    def forward(self, x: T) -> T:
        y = x.a @ self.weight.a.T + (self.bias.a if "bias" in self._params else 0)
        return T(y, self.weight.dtype, x.device)


class Embedding(Module):
    def __init__(self, num: int, dim: int) -> None:
        super().__init__()
        self.weight = allocate((num, dim), np.random.default_rng(num * 31 + dim).standard_normal)

    def forward(self, idx: T) -> T:
        return T(self.weight.a[idx.a], self.weight.dtype, idx.device)


class RMSNorm(Module):
    def __init__(self, dim: int, eps: float | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = Parameter(np.ones(dim))

    def forward(self, x: T) -> T:
        eps = self.eps if self.eps is not None else EPS[x.dtype]
        return T(x.a / np.sqrt((x.a ** 2).mean(-1, keepdims=True) + eps) * self.weight.a, x.dtype, x.device)


class ModuleList(Module):
    def __init__(self, mods: Any = ()) -> None:
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


def sdpa(q: T, k: T, v: T, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False) -> T:
    scores = q.a @ np.swapaxes(k.a, -1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = scores.shape[-1]
        scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return T(w / w.sum(-1, keepdims=True) @ v.a, q.dtype, q.device)


def gelu(x: T, approximate: str = "none") -> T:
    if approximate == "tanh":
        return T(0.5 * x.a * (1 + np.tanh(math.sqrt(2 / math.pi) * (x.a + 0.044715 * x.a ** 3))), x.dtype, x.device)
    if approximate == "none":
        return T(0.5 * x.a * (1 + np.vectorize(math.erf)(x.a / math.sqrt(2))), x.dtype, x.device)
    raise RuntimeError(f"approximate argument must be either none or tanh, not {approximate}")


def linear(x: T, w: T, bias: T | None = None) -> T:
    return T(x.a @ w.a.T + (bias.a if bias is not None else 0), w.dtype, x.device)


def cross_entropy(logits: T, target: T) -> T:
    if logits.dim() != 2 or target.dim() != 1 or logits.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({logits.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    x = logits.a
    lse = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)
    return T((lse - x[np.arange(len(target.a)), target.a]).mean(), "float32", logits.device)


class Generator:
    def __init__(self, device: str = "cpu") -> None:
        self.device, self.rng, self.seeds = device, np.random.default_rng(0), []

    def manual_seed(self, seed: int) -> Generator:
        self.rng = np.random.default_rng(seed)
        self.seeds.append(seed)
        return self


class FakeTorch(types.ModuleType):
    """`torch` for one test, with torch.nn, torch.distributed, torch.multiprocessing and torch.nn.parallel beside
    it (`modules()` for sys.modules). `calls` records what the module asked of it, in order."""

    def __init__(self, gpus: int = 1, sync_s: float = 0.5, peak_bytes: int = 39_000_000_000,
                 nccl_lines: tuple[str, ...] = (), fail_rank: int | None = None) -> None:
        super().__init__("torch")
        self.__version__, self.bfloat16, self.float32, self.long = "2.9.0+cu130", "bfloat16", "float32", "int64"
        self.now, self.sync_s, self.peak, self.gpus, self.lines, self.fail_rank = 0.0, sync_s, peak_bytes, gpus, \
            nccl_lines, fail_rank
        self.calls: list[tuple[Any, ...]] = []
        self.generators: list[Generator] = []
        self._global = np.random.default_rng(0)
        self.cuda = types.SimpleNamespace(
            device=self._device, synchronize=self._sync, get_device_name=lambda d: f"NVIDIA H200 #{d}",
            reset_peak_memory_stats=lambda d: self.calls.append(("reset_peak", d)),
            max_memory_allocated=lambda d: self.peak, empty_cache=lambda: self.calls.append(("empty_cache",)),
            set_device=lambda d: self.calls.append(("set_device", d)), device_count=lambda: self.gpus)
        nn = types.ModuleType("torch.nn")
        nn.Module, nn.Linear, nn.Embedding, nn.RMSNorm, nn.ModuleList = Module, Linear, Embedding, RMSNorm, \
            ModuleList
        nn.init = types.SimpleNamespace(normal_=self._normal)
        nn.functional = types.SimpleNamespace(scaled_dot_product_attention=self._sdpa, gelu=self._gelu,
                                              linear=linear, cross_entropy=cross_entropy)
        self.nn = nn
        self.parallel = types.ModuleType("torch.nn.parallel")
        self.parallel.DistributedDataParallel = self._ddp
        nn.parallel = self.parallel
        self.optim = types.SimpleNamespace(AdamW=self._adamw)
        self.distributed = types.ModuleType("torch.distributed")
        self.distributed.init_process_group = self._init_pg
        self.distributed.destroy_process_group = lambda: self.calls.append(("destroy_process_group",))
        self.multiprocessing = types.ModuleType("torch.multiprocessing")
        self.multiprocessing.start_processes = self._start

    def modules(self) -> dict[str, types.ModuleType]:
        return {"torch": self, "torch.nn": self.nn, "torch.nn.parallel": self.parallel,
                "torch.distributed": self.distributed, "torch.multiprocessing": self.multiprocessing}

    def clock(self) -> float:
        return self.now

    def count(self, name: str) -> int:
        return sum(1 for c in self.calls if c[0] == name)

    def _sync(self, dev: Any = None) -> None:
        self.now += self.sync_s
        self.calls.append(("synchronize", dev))

    @contextlib.contextmanager
    def _device(self, dev: int) -> Iterator[None]:
        self.calls.append(("device", dev))
        yield

    def device(self, spec: str) -> str:
        return spec

    def manual_seed(self, seed: int) -> None:
        self.calls.append(("manual_seed", seed))
        self._global = np.random.default_rng(seed)

    def Generator(self, device: str = "cpu") -> Generator:  # noqa: N802 (torch's name)
        g = Generator(device)
        self.generators.append(g)
        return g

    def randperm(self, n: int, device: Any = None, generator: Generator | None = None) -> T:
        dev = drawn_on(device, generator)
        return T((generator.rng if generator else self._global).permutation(n), "int64", dev)

    def randint(self, low: int, high: int, size: tuple[int, ...], device: Any = None,
                generator: Generator | None = None) -> T:
        dev = drawn_on(device, generator)
        return T((generator.rng if generator else self._global).integers(low, high, size), "int64", dev)

    def empty(self, *size: int, dtype: str = "float32", device: Any = None) -> T:
        return T(np.full(size, -1, dtype=np.int64 if dtype == "int64" else np.float64), dtype, where(device))

    def _normal(self, p: Parameter, mean: float = 0.0, std: float = 1.0) -> Parameter:
        self.calls.append(("normal_", p.shape, mean, std))
        p.a = self._global.normal(mean, std, p.shape)
        return p

    def _sdpa(self, q: T, k: T, v: T, **kw: Any) -> T:
        self.calls.append(("sdpa", q.shape, k.shape, v.shape, kw))
        return sdpa(q, k, v, **kw)

    def _gelu(self, x: T, approximate: str = "none") -> T:
        self.calls.append(("gelu", approximate))
        return gelu(x, approximate)

    def _adamw(self, params: Any, **kw: Any) -> Any:
        params = list(params)
        self.calls.append(("AdamW", len(params), kw))
        return types.SimpleNamespace(step=lambda: self.calls.append(("step",)),
                                     zero_grad=lambda **k: self.calls.append(("zero_grad", k)))

    def _ddp(self, module: Module, device_ids: list[int] | None = None) -> Module:
        self.calls.append(("DDP", device_ids, getattr(module, "moved", None)))
        return module

    def _init_pg(self, backend: str, rank: int, world_size: int, device_id: Any = None) -> None:
        env = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS")}
        self.calls.append(("init_process_group", backend, rank, world_size, device_id, env))
        if os.environ.get("NCCL_DEBUG") == "INFO" and os.environ.get("NCCL_DEBUG_FILE") and self.lines:
            path = os.environ["NCCL_DEBUG_FILE"].replace("%h", "node1").replace("%p", str(1000 + rank))
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("".join(ln.replace("{rank}", str(rank)) + "\n" for ln in self.lines))
        if rank == self.fail_rank:
            raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error")

    def _start(self, fn: Callable[..., None], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
               start_method: str = "spawn") -> Ranks | None:
        """torch.multiprocessing.start_processes: with join=False a ProcessContext whose join() raises what a
        rank raised (here the ranks run at once, in this process)."""
        self.calls.append(("start_processes", fn.__name__, args, nprocs, join, start_method))
        failure = None
        for i in range(nprocs):
            try:
                fn(i, *args)
            except Exception as exc:
                failure = failure or exc
        if join:
            if failure:
                raise failure
            return None
        return Ranks(failure)


class Ranks:
    """torch.multiprocessing.ProcessContext of ranks that have all exited: `join(timeout)` is True, or raises
    the first rank's exception; `processes` the multiprocessing.Process objects (none alive)."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure, self.processes, self.joins = failure, [], []

    def join(self, timeout: float | None = None) -> bool:
        self.joins.append(timeout)
        if self.failure:
            raise self.failure
        return True
