"""Simulated output of the probe's SDC step (gridready/probe/sdc.py): the `gridready.sdc/1` JSON the probe keeps as
`raw.sdc`, for a host without torch or GPU. SIMULATED: no GEMM runs; a healthy GPU's digest of a workload is a hash
of the SKU, workload and software versions, so every healthy GPU of one SKU and software reads the same digest, as
the real GPUs do (docs/examples/h200x1/issue30: the same seeded GEMM repeats bit-identically).

Faults (sandbox/profile.py):
  sdc_bitflip         the GPU's bf16_gemm_8192 output differs in one bit, so its digest differs from every healthy
                      GPU's while repeating: what a GPU that silently corrupts a GEMM result looks like to the
                      consensus (issue 30: the minority GPU of the fleet)
  sdc_nondeterministic  the GPU's bf16_gemm_8192 digest changes between repeats (a GPU that does not repeat)
Marker: the `tool` field reads `gridready-sim: simulated SDC digests (profile <host>)`.
"""

from __future__ import annotations

import hashlib
import json
import sys

from . import simcore

SCHEMA = "gridready.sdc/1"
WORKLOADS = ("bf16_gemm_8192", "fp8_gemm_8192", "fp32_gemm_4096")
FLIPPED = "bf16_gemm_8192"
REPEATS = 4


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def render(host: simcore.Host) -> str:
    v = simcore.versions()
    gpus = []
    for g in host.gpus:
        work = {}
        for w in WORKLOADS:
            good = _digest(g.sku.get("device_id"), w, v["driver"], v["cuda"], "sim-torch")
            digests = [good] * REPEATS
            if w == FLIPPED and g.has("sdc_bitflip"):
                digests = [_digest(good, "one bit flipped in element 12345678")] * REPEATS
            if w == FLIPPED and g.has("sdc_nondeterministic"):
                digests = [good, good, _digest(good, "repeat 3"), good]
            work[w] = {"dtype": w.split("_")[0], "n": int(w.rsplit("_", 1)[1]), "seed": 30, "repeats": REPEATS,
                       "digest": max(set(digests), key=digests.count), "digests": digests,
                       "repeat_ok": len(set(digests)) == 1, "seconds_per_check": 0.0}
        gpus.append({"index": g.index, "name": g.display.get("name", "simulated GPU"), "warm_s": 0.0,
                     "workloads": work})
    return json.dumps({"schema": SCHEMA, "tool": f"gridready-sim: simulated SDC digests (profile {host.name})",
                       "torch": "sim-torch", "cuda": v["cuda"], "workloads": list(WORKLOADS), "gpus": gpus}) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.stdout.write(render(simcore.load()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
