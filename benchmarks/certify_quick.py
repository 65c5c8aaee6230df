"""Wall time of the node probe per profile on this machine, and its figures against the h200x2 README.

Runs ON the GPU node with the stdlib only (plus whatever the probe uses: torch, pynvml):

    NCCL_NVLS_ENABLE=0 python3 benchmarks/certify_quick.py --runs 2 --out /tmp/bench.json

Each run is `python3 -m gridready.probe --profile <p>` in a fresh process (what the role runs); the result records
the probe's wall time, its per-collector timings and the headline figures, and the relative difference of each
figure from tests/fixtures/h200x2/README.md (goal: within 5%; quick profile under 120 s on 2 GPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared/fixtures/h200x2/README.md, per GPU (bf16 at 8192^3, fp8 at 16384^3, HBM read+write, all-reduce 8 GiB)
README = {"bf16_8192_tflops": 801.4, "fp8_16384_tflops": 1361.0, "hbm_tbps": 4.11, "h2d_gbps": 55.49,
          "d2h_gbps": 55.32, "peer_gbps": 395.4, "allreduce_8gib_gbps": 351.65}


def figures(doc: dict) -> dict[str, float | None]:
    t = doc.get("torch") or {}
    gpus = t.get("gpus") or []

    def mean(vals: list[float]) -> float | None:
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    sweep = {r["bytes"]: r["busbw_gbps"] for r in (t.get("allreduce") or {}).get("sizes", [])}
    return {
        "bf16_8192_tflops": mean([g.get("bf16_gemm_tflops", {}).get("8192") for g in gpus]),
        "fp8_16384_tflops": mean([g.get("fp8_gemm_tflops", {}).get("16384") for g in gpus]),
        "hbm_tbps": mean([g.get("hbm_copy_tbps") for g in gpus]),
        "h2d_gbps": mean([g.get("h2d_gbps") for g in gpus]),
        "d2h_gbps": mean([g.get("d2h_gbps") for g in gpus]),
        "peer_gbps": mean([p.get("gbps") for p in t.get("peer") or []]),
        "allreduce_8gib_gbps": sweep.get(8 << 30),
    }


def run_once(profile: str, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.json"
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "gridready.probe", "--profile", profile, "--out", str(out),
                               *extra], cwd=REPO, capture_output=True, text=True, check=False)
        wall = time.monotonic() - t0
        doc = json.loads(out.read_text()) if out.exists() else {}
    figs = figures(doc)
    diff = {k: round(100 * (v - README[k]) / README[k], 2) for k, v in figs.items() if v is not None}
    return {"profile": profile, "rc": proc.returncode, "process_wall_s": round(wall, 2),
            "probe_wall_s": doc.get("wall_s"),
            "timings_s": doc.get("timings_s"), "errors": doc.get("errors"), "figures": figs,
            "pct_vs_readme": diff, "within_5pct": all(abs(d) <= 5 for d in diff.values()),
            "gpus": (doc.get("torch") or {}).get("device_count"), "stderr_tail": proc.stderr[-800:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="quick", help="comma-separated, e.g. quick,standard")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("probe_args", nargs="*", help="extra probe arguments after --")
    a = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    results = [run_once(p, a.probe_args) for p in a.profiles.split(",") for _ in range(a.runs)]
    text = json.dumps({"host": os.uname().nodename, "results": results}, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n")
    for r in results:
        print(f"{r['profile']:9s} rc={r['rc']} process {r['process_wall_s']:.1f} s, probe {r['probe_wall_s']} s, "
              f"within 5% of README: {r['within_5pct']} {r['pct_vs_readme']}")
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
