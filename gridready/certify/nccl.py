"""Single-node all-reduce bus bandwidth (ANCH 3.2).

The floor applies to the MAXIMUM busbw at sizes >= the spec's min_bytes, for the algorithm the spec names (ring
with NVLS off by default); never to nccl-tests' "Avg bus bandwidth" (it depends on the size range). Best of N runs.
`#wrong` must be 0 and "Out of bounds values" 0. The share of the raw NVLink peak is reported as information.
Source: nccl-tests when installed (text or -J JSON), else the probe's torch.distributed sweep.
"""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def sweep_points(doc: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """(source, [{bytes, busbw, wrong, run}]) from nccl-tests runs, else the torch sweep."""
    nt = doc.get("nccl_tests") or {}
    pts: list[dict[str, Any]] = []
    for i, run in enumerate(nt.get("runs") or []):
        for r in (run.get("parsed") or {}).get("rows", []):
            parts = [p for p in (r.get("oop"), r.get("ip")) if p]
            bws = [p["busbw"] for p in parts if isinstance(p.get("busbw"), (int, float))]
            wrongs = [p.get("wrong") for p in parts]
            pts.append({"bytes": r["bytes"], "busbw": max(bws) if bws else None, "run": i,
                        "wrong": None if any(w is None for w in wrongs) else sum(wrongs)})
    if pts:
        return "nccl-tests", pts
    ar = (doc.get("torch") or {}).get("allreduce") or {}
    for r in ar.get("sizes", []):
        pts.append({"bytes": r["bytes"], "busbw": r["busbw_gbps"], "run": 0, "wrong": ar.get("wrong")})
    return ("torch.distributed" if pts else None), pts


def nccl_allreduce(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    ns = exp.spec.nccl
    if exp.gpus < 2:
        return [exp.not_applicable("nccl_allreduce", "one GPU: an all-reduce has no peer (nccl-tests prints busbw 0 "
                                   "for one rank by definition)")]
    spec_floor = exp.spec.floors.nccl_busbw_gbps
    cat = exp.sku.nccl_floor(exp.gpus, ns.algo)
    if spec_floor is not None:
        expected = Expected(floor=spec_floor, source="spec")
    elif cat is not None:
        expected = Expected(floor=cat.floor_gbps, source=f"catalog: {exp.sku.name} {cat.gpus} GPUs {cat.algo}")
    else:
        return [exp.result("nccl_allreduce", E, f"no all-reduce floor for {exp.gpus} x {exp.sku.name} ({ns.algo}); "
                           "set certification.floors.nccl_busbw_gbps", unit="GB/s")]
    source, pts = sweep_points(doc)
    kw: dict[str, Any] = {"expected": expected, "unit": "GB/s",
                          "evidence": "raw.all_reduce_perf" if source == "nccl-tests" else "torch.allreduce"}
    if source is None:
        runs = (doc.get("nccl_tests") or {}).get("runs") or []
        why = ("nccl-tests ran but printed no result rows" if runs else
               "neither nccl-tests nor a torch.distributed sweep produced results")
        return [exp.result("nccl_allreduce", E, why, **kw)]
    big = [p for p in pts if p["bytes"] >= ns.min_bytes and p["busbw"] is not None]
    wrong = sum(p["wrong"] or 0 for p in pts)
    unchecked = any(p["wrong"] is None for p in pts)
    nt = doc.get("nccl_tests") or {}
    oob = sum((r.get("parsed") or {}).get("out_of_bounds") or 0 for r in nt.get("runs") or [])
    wrong_kind = next(((r.get("parsed") or {}).get("wrong_kind") for r in nt.get("runs") or []), "count")
    if wrong_kind == "error":  # old builds print a float max error, not a count: only out-of-bounds counts
        wrong = 0
    best = max(big, key=lambda p: p["busbw"]) if big else None
    peak = exp.sku.nvlink_peak_gbps
    m = {"source": source, "max_busbw_gbps": best["busbw"] if best else None,
         "at_bytes": best["bytes"] if best else None,
         "min_bytes": ns.min_bytes, "algo": ns.algo, "wrong": wrong, "out_of_bounds": oob,
         "pct_of_nvlink_peak": round(100 * best["busbw"] / peak, 1) if best and peak else None,
         "avg_bus_bandwidth_not_gated": next(((r.get("parsed") or {}).get("avg_busbw") for r in nt.get("runs") or []),
                                             None),
         "sweep": [{"bytes": p["bytes"], "busbw": p["busbw"], "run": p["run"]} for p in pts]}
    kw["measured"] = m
    ranks = next(((r.get("parsed") or {}).get("ranks") for r in nt.get("runs") or []), 0)
    if wrong > 0 or oob > 0:
        first = next((p for p in pts if (p["wrong"] or 0) > 0), None)
        at = f" (first at {first['bytes']} B)" if first else ""
        return [exp.result("nccl_allreduce", F, f"all-reduce results wrong: #wrong={wrong:g}{at}, out of bounds "
                           f"{oob}: data corruption on the node's GPUs or links", **kw)]
    if not big:
        return [exp.result("nccl_allreduce", E, f"the sweep has no size >= {ns.min_bytes} B "
                           f"(largest {max(p['bytes'] for p in pts)} B)", **kw)]
    if source == "nccl-tests" and ranks and ranks != exp.gpus:
        return [exp.result("nccl_allreduce", E, f"nccl-tests ran on {ranks} ranks; the node has {exp.gpus} GPUs", **kw)]
    assert best is not None
    pct = f" ({m['pct_of_nvlink_peak']}% of raw NVLink peak)" if m["pct_of_nvlink_peak"] else ""
    if best["busbw"] < (expected.floor or 0):
        return [exp.result("nccl_allreduce", F, f"all-reduce busbw max {best['busbw']:.1f} GB/s at >= "
                           f"{ns.min_bytes >> 20} MiB across {exp.gpus} GPUs is below {expected.floor:g} GB/s{pct}",
                           **kw)]
    status = W if unchecked else P
    note = "; validation off (#wrong N/A)" if unchecked else ""
    return [exp.result("nccl_allreduce", status, f"all-reduce busbw {best['busbw']:.1f} GB/s at "
                       f"{best['bytes'] >> 20} MiB ({source}, {ns.algo}){pct}{note}", **kw)]
