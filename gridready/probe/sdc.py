"""Silent data corruption: seeded GEMMs on every GPU, their outputs digested on the GPU, repeated.

Each workload (bf16, fp8 e4m3 and fp32 GEMMs at a few sizes) draws its inputs from a seeded generator on the GPU, so
every GPU of the same SKU and software computes the same bytes; the output's digest must repeat bit-identically on
one GPU (`repeat_ok`) and, across the fleet, equal the majority's (gridready.certify.sdc). The GPU is heated first
by a short GEMM load (`warm_s`), so the digests come from a hot part.

The digest is two position-weighted 64-bit sums of the output's bit patterns (int64 arithmetic wraps modulo 2^64 on
the GPU): with odd weights, any change of one element by +-2^k (k < 32, one flipped bit) changes both sums, so one bit
flip anywhere is always caught; the two weight streams make two different outputs colliding unlikely. It costs one
elementwise product and a sum on the GPU instead of a copy to the host for sha256 (0.27 s per 8192 bf16 check on
one H200, issue 30). `host_sha256=True` also records the sha256 of the bytes on the host, to cross-check.

fp32 runs with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False): a true fp32 GEMM. Cross-GPU equality
holds for one SKU, driver, CUDA and torch (the gate groups by them; torch's wheel pins its cuBLAS): cuBLAS picks the
same kernel for the same problem on the same part, which the repeat check on one GPU also shows.

Imported only when torch imports. `parse` reads the JSON text this module writes (`raw.sdc`).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

SCHEMA = "gridready.sdc/1"
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # 2^64 / golden ratio, as a signed int64
_MIX = 0xBF58476D1CE4E5B9 - (1 << 64)

# (name, dtype, n): the quick profile runs the first three, the others all of them
WORKLOADS: tuple[tuple[str, str, int], ...] = (
    ("bf16_gemm_8192", "bf16", 8192), ("fp8_gemm_8192", "fp8", 8192), ("fp32_gemm_4096", "fp32", 4096),
    ("bf16_gemm_4096", "bf16", 4096), ("bf16_gemm_16384", "bf16", 16384), ("fp8_gemm_16384", "fp8", 16384),
)


def _inputs(torch: Any, dev: int, dtype: str, n: int, seed: int) -> tuple[Any, Any]:
    g = torch.Generator(device=f"cuda:{dev}")
    g.manual_seed(seed)
    a = torch.randn(n, n, device=dev, generator=g, dtype=torch.float32)
    b = torch.randn(n, n, device=dev, generator=g, dtype=torch.float32)
    if dtype == "bf16":
        return a.to(torch.bfloat16), b.to(torch.bfloat16)
    if dtype == "fp8":
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    return a, b


def _gemm(torch: Any, dtype: str, a: Any, b: Any) -> Any:
    if dtype == "fp8":
        one = torch.tensor(1.0, device=a.device)
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return torch.mm(a, b)


def digest(torch: Any, out: Any) -> str:
    """32 hex digits: two position-weighted wrap-around int64 sums of the output's bit patterns."""
    flat = out.contiguous().view(-1)
    bits = flat.view(torch.int16 if flat.element_size() == 2 else torch.int32).to(torch.int64)
    idx = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64)
    w1 = idx * _GOLDEN + 0x2545F491
    w1 = w1 * 2 + 1  # odd: a change of +-2^k (k < 32) never vanishes modulo 2^64
    s1 = int((bits * w1).sum().item())
    w2 = (idx ^ 0x5DEECE66D) * _MIX
    w2 = w2 * 2 + 1
    s2 = int((bits * w2).sum().item())
    return f"{s1 & (2**64 - 1):016x}{s2 & (2**64 - 1):016x}"


def _warm(torch: Any, dev: int, seconds: float) -> float:
    """bf16 GEMMs for `seconds` so the digests come from a hot GPU; returns the seconds spent."""
    t0 = time.monotonic()
    if seconds <= 0:
        return 0.0
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            torch.mm(a, a)
        torch.cuda.synchronize(dev)
    return round(time.monotonic() - t0, 2)


def run_gpu(dev: int, workloads: list[str], repeats: int, warm_s: float, seed: int = 30,
            host_sha256: bool = False) -> dict[str, Any]:
    import torch

    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with torch.cuda.device(dev):
            row: dict[str, Any] = {"index": dev, "name": torch.cuda.get_device_name(dev),
                                   "warm_s": _warm(torch, dev, warm_s), "workloads": {}}
            for name, dtype, n in WORKLOADS:
                if name not in workloads:
                    continue
                a, b = _inputs(torch, dev, dtype, n, seed)
                digests, shas = [], []
                t0 = time.monotonic()
                for _ in range(max(1, repeats)):
                    out = _gemm(torch, dtype, a, b)
                    digests.append(digest(torch, out))
                    if host_sha256:
                        shas.append(hashlib.sha256(out.contiguous().view(torch.uint8).cpu().numpy().tobytes())
                                    .hexdigest())
                    del out
                torch.cuda.synchronize(dev)
                w: dict[str, Any] = {"dtype": dtype, "n": n, "seed": seed, "repeats": len(digests),
                                     "digest": max(set(digests), key=digests.count), "digests": digests,
                                     "repeat_ok": len(set(digests)) == 1,
                                     "seconds_per_check": round((time.monotonic() - t0) / len(digests), 4)}
                if host_sha256:
                    w["host_sha256"] = shas[0]
                    w["host_sha256_repeat_ok"] = len(set(shas)) == 1
                row["workloads"][name] = w
                del a, b
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return row


def run_all(prof: dict[str, Any], errors: list[dict[str, str]]) -> str:
    """Every local GPU; returns the JSON text the probe keeps as `raw.sdc` (parse() reads it back)."""
    import torch

    workloads = list(prof.get("sdc_workloads") or [w[0] for w in WORKLOADS[:3]])
    gpus = []
    for d in range(torch.cuda.device_count()):
        try:
            gpus.append(run_gpu(d, workloads, int(prof.get("sdc_repeats", 4)), float(prof.get("sdc_warm_s", 1.0))))
        except Exception as exc:  # one GPU's failure must not lose the others
            errors.append({"collector": "torch.sdc", "gpu": str(d), "error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"schema": SCHEMA, "tool": "gridready.probe.sdc", "torch": torch.__version__,
                       "cuda": torch.version.cuda, "workloads": workloads, "gpus": gpus})


def parse(text: str) -> dict[str, Any]:
    """The JSON text of run_all -> the `sdc` section of the probe document."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document")
    for g in doc.get("gpus") or []:
        for w in (g.get("workloads") or {}).values():
            w["repeat_ok"] = len(set(w.get("digests") or [])) == 1
    return doc
