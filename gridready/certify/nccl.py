"""Single-node collective bus bandwidth, one gate per nccl-tests collective the spec chooses (ANCH 3.2).

`certification.nccl.collectives` picks among all_reduce (gate `nccl_allreduce`), all_gather, reduce_scatter,
alltoall and sendrecv (gates `nccl_<collective>`); a collective not chosen has no gate. The floor applies to the
MAXIMUM busbw at sizes >= the spec's min_bytes, for the algorithm the spec names (ring with NVLS off by default);
never to nccl-tests' "Avg bus bandwidth" (it depends on the size range). Best of N runs. Only columns nccl-tests
validated count (the in-place sendrecv column is never validated: src/sendrecv.cu); every run must have exited 0,
not timed out and printed no `Test NCCL failure` line (rows printed before a crash do not count); `#wrong` must be
0 and "Out of bounds values" 0; the header's `validation: 0` (run with `-c 0`) warns. Floors: the spec's, else the
catalog's per SKU x GPU count x algorithm x collective; for alltoall and sendrecv on a shape no published figure fits
(a 4-GPU HGX board: 6 NVLinks per pair) a floor derived from the board's own figures (Sku.derived_nccl_floor), never
an error that blocks a healthy node. The share of the raw NVLink peak is reported as information.
Source: nccl-tests when installed (text or -J JSON), else the probe's torch.distributed sweep of that collective.
One GPU: n/a (a collective needs a peer; nccl-tests prints busbw 0 for one rank).
"""

from __future__ import annotations

from typing import Any

from gridready.catalog import P2P_COLLECTIVES
from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.probe.nccl_tests import validated_busbw

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def gate_name(collective: str) -> str:
    return "nccl_allreduce" if collective == "all_reduce" else f"nccl_{collective}"


def runs_of(doc: dict[str, Any], collective: str = "all_reduce") -> list[dict[str, Any]]:
    """The nccl-tests runs of one collective (`nccl_tests.collectives.<c>.runs`; all_reduce also at `runs`)."""
    nt = doc.get("nccl_tests") or {}
    per = ((nt.get("collectives") or {}).get(collective) or {}).get("runs")
    if per is not None:
        return list(per)
    return list(nt.get("runs") or []) if collective == "all_reduce" else []


def sweep_points(doc: dict[str, Any], collective: str = "all_reduce") -> tuple[str | None, list[dict[str, Any]]]:
    """(source, [{bytes, busbw, wrong, run}]) from nccl-tests runs, else (all_reduce) the torch sweep."""
    pts: list[dict[str, Any]] = []
    for i, run in enumerate(runs_of(doc, collective)):
        parsed = run.get("parsed") or {}
        for r in parsed.get("rows", []):
            parts = [p for p in (r.get("oop"), r.get("ip")) if p]
            checked = [p.get("wrong") for p in parts if p.get("wrong") is not None]
            unchecked = parsed.get("validation") == 0 or not checked
            pts.append({"bytes": r["bytes"], "busbw": validated_busbw(r), "run": i,
                        "wrong": None if unchecked else sum(checked)})
    if pts:
        return "nccl-tests", pts
    t = doc.get("torch") or {}
    ar = (t.get("allreduce") if collective == "all_reduce" else (t.get("collectives") or {}).get(collective)) or {}
    for r in ar.get("sizes", []):
        pts.append({"bytes": r["bytes"], "busbw": r["busbw_gbps"], "run": 0, "wrong": ar.get("wrong")})
    return ("torch.distributed" if pts else None), pts


def _expected(exp: Expectations, collective: str) -> Expected | None:
    ns, floors = exp.spec.nccl, exp.spec.floors
    spec_floor = floors.nccl_busbw_gbps if collective == "all_reduce" else floors.nccl_collectives_gbps.get(collective)
    if spec_floor is not None:
        return Expected(floor=spec_floor, source="spec")
    shape = exp.shape
    cat = exp.sku.nccl_floor(exp.gpus, ns.algo, collective, nvswitch=bool(shape and shape.nvswitch))
    if collective in P2P_COLLECTIVES and (cat is None or (shape is not None and shape.peer_links)):
        # no published figure for this shape, or one measured with more links per peer than it has: the board's own
        derived = exp.sku.derived_nccl_floor(exp.gpus, collective, shape)
        if derived is not None:
            where = shape.label if shape is not None else f"{exp.gpus} GPUs"
            return Expected(floor=derived.floor_gbps, source=f"catalog: {exp.sku.name} {where} p2p {collective}, "
                            f"{derived.source}")
    if cat is None:
        return None
    algo = "p2p" if collective in P2P_COLLECTIVES else cat.algo
    return Expected(floor=cat.floor_gbps, source=f"catalog: {exp.sku.name} {cat.gpus} GPUs {algo} {collective}"
                    + (f" {shape.platform}" if shape and shape.platform == "slice" else "")
                    + (f" ({cat.source}, {cat.reference_gbps:g} GB/s measured)" if cat.source else ""))


def nccl_collective(doc: dict[str, Any], exp: Expectations, collective: str) -> list[GateResult]:
    gate, ns = gate_name(collective), exp.spec.nccl
    if collective not in ns.collectives:
        return []
    if exp.gpus < 2:
        return [exp.not_applicable(gate, f"one GPU: {collective} has no peer (nccl-tests prints busbw 0 for one "
                                   "rank by definition)")]
    expected = _expected(exp, collective)
    if expected is None:
        key = "nccl_busbw_gbps" if collective == "all_reduce" else f"nccl_collectives_gbps.{collective}"
        return [exp.result(gate, E, f"no {collective} floor for {exp.gpus} x {exp.sku.name} ({ns.algo}); "
                           f"set certification.floors.{key}", unit="GB/s")]
    source, pts = sweep_points(doc, collective)
    torch_key = "torch.allreduce" if collective == "all_reduce" else f"torch.collectives.{collective}"
    kw: dict[str, Any] = {"expected": expected, "unit": "GB/s",
                          "evidence": torch_key if source == "torch.distributed" else f"raw.{collective}_perf"}
    runs = runs_of(doc, collective)
    if source is None:
        why = (f"nccl-tests {collective}_perf ran but printed no result rows" if runs else
               f"neither nccl-tests {collective}_perf nor a torch.distributed {collective} sweep produced results")
        return [exp.result(gate, E, why, **kw)]
    parsed = [r.get("parsed") or {} for r in runs]
    big = [p for p in pts if p["bytes"] >= ns.min_bytes and p["busbw"] is not None]
    wrong = sum(p["wrong"] or 0 for p in pts)
    unchecked = any(p["wrong"] is None for p in pts)
    oob = sum(p.get("out_of_bounds") or 0 for p in parsed)
    if next((p.get("wrong_kind") for p in parsed), "count") == "error":  # old builds: a float max error, not a count
        wrong = 0
    best = max(big, key=lambda p: p["busbw"]) if big else None
    peak = exp.sku.nvlink_peak_gbps
    m = {"source": source, "collective": collective, "max_busbw_gbps": best["busbw"] if best else None,
         "at_bytes": best["bytes"] if best else None, "min_bytes": ns.min_bytes, "algo": ns.algo, "wrong": wrong,
         "out_of_bounds": oob, "validation": next((p.get("validation") for p in parsed), None),
         "check_iters": ns.check_iters,
         "pct_of_nvlink_peak": round(100 * best["busbw"] / peak, 1) if best and peak else None,
         "avg_bus_bandwidth_not_gated": next((p.get("avg_busbw") for p in parsed), None),
         "sweep": [{"bytes": p["bytes"], "busbw": p["busbw"], "run": p["run"]} for p in pts]}
    kw["measured"] = m
    ranks = next((p.get("ranks") for p in parsed), 0)
    if wrong > 0 or oob > 0:
        first = next((p for p in pts if (p["wrong"] or 0) > 0), None)
        at = f" (first at {first['bytes']} B)" if first else ""
        return [exp.result(gate, F, f"{collective} results wrong: #wrong={wrong:g}{at}, out of bounds {oob}: data "
                           "corruption on the node's GPUs or links", **kw)]
    if crashed := _crashed(runs):
        return [exp.result(gate, E, f"{collective}_perf did not complete: {crashed}; rows printed before a "
                           "crash do not certify", **kw)]
    if not big:
        return [exp.result(gate, E, f"the {collective} sweep has no size >= {ns.min_bytes} B "
                           f"(largest {max(p['bytes'] for p in pts)} B)", **kw)]
    if source == "nccl-tests" and ranks and ranks != exp.gpus:
        return [exp.result(gate, E, f"nccl-tests ran on {ranks} ranks; the node has {exp.gpus} GPUs", **kw)]
    assert best is not None
    pct = f" ({m['pct_of_nvlink_peak']}% of raw NVLink peak)" if m["pct_of_nvlink_peak"] else ""
    if best["busbw"] < (expected.floor or 0):
        return [exp.result(gate, F, f"{collective} busbw max {best['busbw']:.1f} GB/s at >= {ns.min_bytes >> 20} MiB "
                           f"across {exp.gpus} GPUs is below {expected.floor:g} GB/s{pct}", **kw)]
    note = "; validation off (#wrong N/A)" if unchecked else ""
    return [exp.result(gate, W if unchecked else P, f"{collective} busbw {best['busbw']:.1f} GB/s at "
                       f"{best['bytes'] >> 20} MiB ({source}, {ns.algo}){pct}{note}", **kw)]


def _crashed(runs: list[dict[str, Any]]) -> str | None:
    """Why a run did not complete (exit code, timeout, nccl-tests' `Test NCCL failure` lines), or None: rows a run
    printed before it died do not certify (the multi-node path checks the same, multinode.judge_run)."""
    for i, run in enumerate(runs):
        errors = (run.get("parsed") or {}).get("errors") or []
        if run.get("timed_out"):
            return f"run {i + 1} timed out"
        if run.get("rc") not in (0, None):
            return f"run {i + 1} exited {run.get('rc')}" + (f" ({errors[0]})" if errors else "")
        if errors:
            return f"run {i + 1}: {errors[0]}"
    return None


def nccl_allreduce(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return nccl_collective(doc, exp, "all_reduce")


def nccl_all_gather(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return nccl_collective(doc, exp, "all_gather")


def nccl_reduce_scatter(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return nccl_collective(doc, exp, "reduce_scatter")


def nccl_alltoall(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return nccl_collective(doc, exp, "alltoall")


def nccl_sendrecv(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return nccl_collective(doc, exp, "sendrecv")
