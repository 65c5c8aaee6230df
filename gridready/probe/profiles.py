"""Sizes and repeats of each certification profile (the node-side mirror of CertificationSpec.profile)."""

from __future__ import annotations

from typing import Any

GiB = 1 << 30
MiB = 1 << 20

# trials: each torch figure is the best of this many timed runs; HBM copies use 8 GiB buffers (several times any
# L2, and the size at which the best-of-5 reference read 4.29 TB/s on one H200: shared/fixtures/h200x1/README.md).
# SDC (probe/sdc.py): seeded GEMM workloads digested `sdc_repeats` times after `sdc_warm_s` of load; training
# goodput (probe/goodput.py): `goodput_steps` steps of the ~1B decoder per GPU (0: not run, the quick profile)
_SDC_QUICK = ["bf16_gemm_8192", "fp8_gemm_8192", "fp32_gemm_4096"]
_SDC_ALL = [*_SDC_QUICK, "bf16_gemm_4096", "bf16_gemm_16384", "fp8_gemm_16384"]
PROFILES: dict[str, dict[str, Any]] = {
    # quick: < 2 min on 2 GPUs; DCGM at most level 1
    "quick": {"dcgm_level": 1, "gemm_sizes": [8192, 16384], "fp8_sizes": [16384], "gemm_iters": 10,
              "hbm_bytes": 8 * GiB, "copy_iters": 10, "trials": 3, "h2d_bytes": 1 * GiB, "peer_bytes": 1 * GiB,
              "ar_min_bytes": 1 * MiB, "ar_factor": 4, "ar_iters": 10, "ar_warmup": 3, "gemm_burn_s": 0,
              "sdc_workloads": _SDC_QUICK, "sdc_repeats": 4, "sdc_warm_s": 1.0, "goodput_steps": 0},
    "standard": {"dcgm_level": 3, "gemm_sizes": [8192, 16384], "fp8_sizes": [8192, 16384], "gemm_iters": 30,
                 "hbm_bytes": 8 * GiB, "copy_iters": 20, "trials": 5, "h2d_bytes": 2 * GiB, "peer_bytes": 2 * GiB,
                 "ar_min_bytes": 1 * MiB, "ar_factor": 2, "ar_iters": 20, "ar_warmup": 5, "gemm_burn_s": 0,
                 "sdc_workloads": _SDC_ALL, "sdc_repeats": 8, "sdc_warm_s": 3.0, "goodput_steps": 35},
    "burn-in": {"dcgm_level": 4, "gemm_sizes": [8192, 16384], "fp8_sizes": [8192, 16384], "gemm_iters": 50,
                "hbm_bytes": 8 * GiB, "copy_iters": 50, "trials": 5, "h2d_bytes": 2 * GiB, "peer_bytes": 2 * GiB,
                "ar_min_bytes": 1 * MiB, "ar_factor": 2, "ar_iters": 50, "ar_warmup": 5, "gemm_burn_s": 600,
                "sdc_workloads": _SDC_ALL, "sdc_repeats": 16, "sdc_warm_s": 3.0, "goodput_steps": 35},
}


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int, floor_from: int) -> list[int]:
    """Geometric sizes from min_bytes to max_bytes; every power of two >= floor_from is kept (the gated range)."""
    sizes, s = set(), min_bytes
    while s <= max_bytes:
        sizes.add(s)
        s *= factor
    s = floor_from
    while s <= max_bytes:
        sizes.add(s)
        s *= 2
    sizes.add(max_bytes)
    return sorted(sizes)
