"""The SDC probe (gridready/probe/sdc.py) on a real GPU: every workload repeated, the on-GPU digest cross-checked
with the sha256 of the bytes on the host, and one flipped bit in an output shown to change the digest.

    python3 benchmarks/sdc_on_gpu.py --out sdc_on_gpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridready.probe import sdc
from gridready.probe.profiles import PROFILES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=8)
    args = ap.parse_args()
    import torch

    doc: dict = {"schema": "gridready.sdc-on-gpu/1", "device": torch.cuda.get_device_name(0),
                 "torch": torch.__version__, "cuda": torch.version.cuda}
    t0 = time.monotonic()
    doc["all_workloads"] = sdc.run_gpu(0, [w[0] for w in sdc.WORKLOADS], args.repeats, warm_s=3.0)
    doc["all_workloads_s"] = round(time.monotonic() - t0, 2)
    t0 = time.monotonic()
    doc["host_sha256_crosscheck"] = sdc.run_gpu(0, ["bf16_gemm_8192"], 16, warm_s=0.0, host_sha256=True)
    doc["host_sha256_crosscheck_s"] = round(time.monotonic() - t0, 2)
    for prof in ("quick", "standard"):  # what the probe step costs per GPU in each profile
        t0 = time.monotonic()
        errors: list = []
        sdc.run_all(PROFILES[prof], errors)
        doc[f"probe_step_{prof}_s"] = round(time.monotonic() - t0, 2)
        doc[f"probe_step_{prof}_errors"] = errors
    # one flipped bit anywhere changes the digest
    g = torch.Generator(device="cuda:0")
    g.manual_seed(30)
    a = torch.randn(8192, 8192, device=0, generator=g).to(torch.bfloat16)
    out = torch.mm(a, a)
    base = sdc.digest(torch, out)
    flips = []
    for pos, bit in ((0, 0), (12345678, 7), (8192 * 8192 - 1, 15), (33554432, 3)):
        bad = out.clone()
        v = bad.view(-1).view(torch.int16)
        v[pos] ^= (1 << bit) if bit < 15 else -(1 << 15)
        flips.append({"element": pos, "bit": bit, "digest": sdc.digest(torch, bad), "differs": sdc.digest(torch, bad)
                      != base})
    doc["bit_flip"] = {"digest": base, "flips": flips, "all_detected": all(f["differs"] for f in flips)}
    text = json.dumps(doc, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    ok = doc["bit_flip"]["all_detected"] and all(w["repeat_ok"] for w in doc["all_workloads"]["workloads"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
