"""PyTorch micro-benchmarks on each local GPU: bf16/fp8 GEMM, HBM copy, pinned H2D/D2H, peer copies.

Imported only when torch imports. Bandwidths in GB/s (1e9 B/s) and TB/s (1e12 B/s), compute in TFLOP/s (1e12).
Each figure is the best of `trials` timed runs (a run = `iters` calls between two CUDA events): a single run reads
a transient clock or allocator state (one H200 read 4.02-4.14 TB/s HBM copy in single 2 GiB runs and 4.29 TB/s
as the best of 5 on 8 GiB, issue 17); benchmarks/probe_vs_best.py measures the gap on the GPU machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch


def _timed(fn: Callable[[], Any], iters: int, warmup: int = 3) -> float:
    """Seconds per call, measured with CUDA events on the current device."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / iters


def _best_time(fn: Callable[[], Any], iters: int, trials: int) -> float:
    """The fastest of `trials` timed runs, seconds per call (the first run also warms up)."""
    return min(_timed(fn, iters, warmup=3 if i == 0 else 1) for i in range(max(1, trials)))


def gemm_bf16(dev: int, n: int, iters: int, trials: int = 1) -> float:
    with torch.cuda.device(dev):
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        t = _best_time(lambda: torch.mm(a, b, out=out), iters, trials)
    return 2 * n**3 / t / 1e12


def gemm_fp8(dev: int, n: int, iters: int, trials: int = 1) -> float:
    """e4m3 x e4m3 -> bf16 with torch._scaled_mm (B column-major, unit scales)."""
    with torch.cuda.device(dev):
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        t = _best_time(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), iters,
                       trials)
    return 2 * n**3 / t / 1e12


def hbm_copy(dev: int, nbytes: int, iters: int, trials: int = 1) -> float:
    """Device-to-device copy, TB/s counting bytes read AND written (2 x size)."""
    with torch.cuda.device(dev):
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        t = _best_time(lambda: dst.copy_(src), iters, trials)
    return 2 * nbytes / t / 1e12


def host_copies(dev: int, nbytes: int, iters: int,
                sample: Callable[[int], dict[str, Any]] | None = None, trials: int = 1) -> dict[str, Any]:
    """Pinned host->device and device->host GB/s; `sample(dev)` reads the PCIe link while the copies run."""
    out: dict[str, Any] = {}
    with torch.cuda.device(dev):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        devbuf = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        out["h2d_gbps"] = nbytes / _best_time(lambda: devbuf.copy_(host, non_blocking=True), iters, trials) / 1e9
        out["d2h_gbps"] = nbytes / _best_time(lambda: host.copy_(devbuf, non_blocking=True), iters, trials) / 1e9
        if sample is not None:  # keep the link busy, then read its current speed/width under load
            for _ in range(max(iters, 8)):
                devbuf.copy_(host, non_blocking=True)
            time.sleep(0.02)
            out["pcie_under_load"] = sample(dev)
            torch.cuda.synchronize()
    return out


def peer_copy(src: int, dst: int, nbytes: int, iters: int, trials: int = 1) -> float:
    """GPU src -> GPU dst copy GB/s (one direction), wall-clocked across both devices, best of `trials`."""
    a = torch.empty(nbytes, dtype=torch.uint8, device=src)
    b = torch.empty(nbytes, dtype=torch.uint8, device=dst)
    for _ in range(2):
        b.copy_(a, non_blocking=True)
    best = float("inf")
    for _ in range(max(1, trials)):
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        t0 = time.perf_counter()
        for _ in range(iters):
            b.copy_(a, non_blocking=True)
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        best = min(best, (time.perf_counter() - t0) / iters)
    return nbytes / best / 1e9


def gemm_burn(dev: int, seconds: float, n: int = 8192) -> dict[str, Any]:
    """bf16 GEMM for `seconds`; TFLOP/s per ~1 s window (a sagging minimum shows throttling)."""
    windows: list[float] = []
    with torch.cuda.device(dev):
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            windows.append(2 * n**3 / _timed(lambda: torch.mm(a, b), 200, warmup=0) / 1e12)
    windows.sort()
    return {"seconds": seconds, "windows": len(windows), "min_tflops": windows[0] if windows else None,
            "median_tflops": windows[len(windows) // 2] if windows else None}


def _put(d: dict[str, Any], key: str, fn: Callable[..., Any], *args: Any) -> None:
    d[key] = fn(*args)


def _merge(d: dict[str, Any], fn: Callable[..., dict[str, Any]], *args: Any) -> None:
    d.update(fn(*args))


def run_all(prof: dict[str, Any], sample: Callable[[int], dict[str, Any]] | None,
            errors: list[dict[str, str]]) -> dict[str, Any]:
    """Every single-GPU benchmark on every GPU, then peer copies for every ordered pair."""
    n = torch.cuda.device_count()
    gpus: list[dict[str, Any]] = []
    for d in range(n):
        g: dict[str, Any] = {"index": d, "name": torch.cuda.get_device_name(d), "bf16_gemm_tflops": {},
                             "fp8_gemm_tflops": {}}
        it, cit, tr = prof["gemm_iters"], prof["copy_iters"], prof.get("trials", 1)
        steps: list[tuple[str, Callable[[], None]]] = []
        for size in prof["gemm_sizes"]:
            steps.append((f"bf16_gemm_{size}", partial(_put, g["bf16_gemm_tflops"], str(size), gemm_bf16, d, size, it,
                                                           tr)))
        for size in prof["fp8_sizes"]:
            steps.append((f"fp8_gemm_{size}", partial(_put, g["fp8_gemm_tflops"], str(size), gemm_fp8, d, size, it,
                                                          tr)))
        steps.append(("hbm_copy", partial(_put, g, "hbm_copy_tbps", hbm_copy, d, prof["hbm_bytes"], cit, tr)))
        steps.append(("host_copies", partial(_merge, g, host_copies, d, prof["h2d_bytes"], cit, sample, tr)))
        if prof.get("gemm_burn_s"):
            steps.append(("gemm_burn", partial(_put, g, "gemm_burn", gemm_burn, d, prof["gemm_burn_s"])))
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # one failed benchmark must not lose the others
                errors.append({"collector": f"torch.{name}", "gpu": str(d), "error": f"{type(exc).__name__}: {exc}"})
        torch.cuda.empty_cache()
        gpus.append(g)
    peers: list[dict[str, Any]] = []
    for s in range(n):
        for t in range(n):
            if s == t:
                continue
            row: dict[str, Any] = {"src": s, "dst": t, "access": torch.cuda.can_device_access_peer(s, t), "gbps": None}
            try:
                row["gbps"] = peer_copy(s, t, prof["peer_bytes"], prof["copy_iters"], prof.get("trials", 1))
            except Exception as exc:
                errors.append({"collector": "torch.peer_copy", "gpu": f"{s}->{t}",
                               "error": f"{type(exc).__name__}: {exc}"})
            peers.append(row)
    return {"gpus": gpus, "peer": peers}
