"""`python3 -m gridready.probe --profile quick > probe.json` (stdlib only; torch/pynvml when importable)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .profiles import PROFILES, GiB


def parse_args(argv: list[str]) -> dict[str, object]:
    p = argparse.ArgumentParser(prog="gridready.probe", description="Measure this GPU node; print one JSON document.")
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    p.add_argument("--dcgm-level", type=int, default=None, help="default from the profile")
    p.add_argument("--dcgm-precision", default="h", help="diagnostic plugin precisions (h, s, d), level 3+")
    p.add_argument("--dcgm-outlier-pcnt", type=float, default=0.0,
                   help="level 3+, DCGM 4.5+: diagnostic plugin cross-GPU clocks/power tolerance in %% (0: not passed)")
    p.add_argument("--algo", choices=["ring", "nvls", "tree"], default="ring")
    p.add_argument("--nccl-min-bytes", type=int, default=1 * GiB, help="smallest size of the gated range")
    p.add_argument("--nccl-max-bytes", type=int, default=8 * GiB)
    p.add_argument("--best-of", type=int, default=2)
    p.add_argument("--nccl-check-iters", type=int, default=1, help="nccl-tests -c N (checks counted in #wrong)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per long step (dcgmi, sweeps)")
    p.add_argument("--skip", default="", help="comma-separated collectors to skip, e.g. torch,dcgm")
    p.add_argument("--nccl-tests-dir", default=None, help="directory of all_reduce_perf when not on PATH")
    p.add_argument("--collectives", default="all_reduce",
                   help="comma-separated: all_reduce,all_gather,reduce_scatter,alltoall,sendrecv")
    p.add_argument("--out", default="-", help="file to write (default stdout)")
    a = p.parse_args(argv)
    for flag, size in (("--nccl-min-bytes", a.nccl_min_bytes), ("--nccl-max-bytes", a.nccl_max_bytes)):
        if size < 1:  # the sweep from a size of 0 or less never grows to its end (profiles.sweep_sizes)
            p.error(f"argument {flag}: must be a size of at least 1 byte, got {size}")
    return {"profile": a.profile, "dcgm_level": a.dcgm_level, "algo": a.algo, "nccl_min_bytes": a.nccl_min_bytes,
            "nccl_max_bytes": a.nccl_max_bytes, "best_of": a.best_of, "timeout": a.timeout,
            "skip": [s for s in a.skip.split(",") if s], "nccl_tests_dir": a.nccl_tests_dir, "out": a.out,
            "collectives": [c for c in a.collectives.split(",") if c], "dcgm_precision": a.dcgm_precision,
            "dcgm_outlier_pcnt": a.dcgm_outlier_pcnt, "nccl_check_iters": a.nccl_check_iters}


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # torch index == nvidia-smi/NVML index
    from .collect import Probe

    doc = Probe(opts).run()
    text = json.dumps(doc, indent=1, default=str)
    if opts["out"] == "-":
        sys.stdout.write(text + "\n")
    else:
        tmp = f"{opts['out']}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        os.replace(tmp, str(opts["out"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
