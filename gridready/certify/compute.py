"""Compute and HBM: bf16 and fp8 dense GEMM TFLOP/s and HBM copy TB/s per GPU against the floors (best size)."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import left_out
from gridready.certify.result import GateResult, GateStatus

P, F, E = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR


def torch_missing(doc: dict[str, Any]) -> str | None:
    """Why the torch benchmarks did not run, or None when they did."""
    t = doc.get("torch") or {}
    if not t.get("present"):
        return (f"PyTorch not importable on the node ({t.get('import_error', 'not collected')}); provision installs "
                "it (software.probe_torch, role gridready_probe_runtime)")
    if not t.get("cuda_available") or not t.get("gpus"):
        return "PyTorch found no CUDA device"
    return None


def _per_gpu(doc: dict[str, Any], exp: Expectations, gate: str, floor_name: str, key: str, unit: str,
             what: str) -> list[GateResult]:
    why = torch_missing(doc)
    expected = exp.floor(floor_name)
    if why:
        return [exp.result(gate, E, why, expected=expected, unit=unit, evidence="torch")]
    out = []
    errs = {e.get("gpu") for e in doc.get("errors", []) if str(e.get("collector", "")).startswith("torch.")}
    for g in doc["torch"]["gpus"]:
        raw = g.get(key)
        best = max(raw.values()) if isinstance(raw, dict) and raw else raw if isinstance(raw, (int, float)) else None
        kw: dict[str, Any] = {"gpu": g["index"], "measured": round(best, 3) if best is not None else None,
                              "expected": expected, "unit": unit, "evidence": f"torch.gpus[{g['index']}].{key}"}
        if best is None:
            note = " (benchmark raised, see errors)" if str(g["index"]) in errs else ""
            out.append(exp.result(gate, E, f"GPU {g['index']}: no {what} measurement{note}", **kw))
        elif best < (expected.floor or 0):
            out.append(exp.result(gate, F, f"GPU {g['index']}: {what} {best:.3g} {unit} below the floor "
                                  f"{expected.floor:g} {unit}", **kw))
        else:
            out.append(exp.result(gate, P, f"GPU {g['index']}: {what} {best:.4g} {unit}", **kw))
        burn = g.get("gemm_burn")
        if gate == "gemm_bf16" and burn and burn.get("min_tflops") is not None and burn["min_tflops"] < (
                expected.floor or 0):
            out.append(exp.result(gate, F, f"GPU {g['index']}: bf16 GEMM sagged to {burn['min_tflops']:.3g} TFLOP/s "
                                  f"during a {burn['seconds']:g} s burn", **{**kw, "measured": burn}))
    return out + not_enumerated(doc, exp, gate, {g["index"] for g in doc["torch"]["gpus"]}, what, expected=expected,
                                unit=unit)


def not_enumerated(doc: dict[str, Any], exp: Expectations, gate: str, measured: set[int], what: str,
                   **kw: Any) -> list[GateResult]:
    """A failure per GPU nvidia-smi or the inventory lists that the torch measurement did not enumerate."""
    return [exp.result(gate, F, f"{label}: listed by nvidia-smi or the inventory but not enumerated by PyTorch/CUDA: "
                       f"no {what} measurement", gpu=i, evidence="torch.gpus", **kw)
            for i, label in left_out(doc, measured, exp.gpus)]


def gemm_bf16(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return _per_gpu(doc, exp, "gemm_bf16", "bf16_gemm_tflops", "bf16_gemm_tflops", "TFLOP/s", "bf16 dense GEMM")


def gemm_fp8(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return _per_gpu(doc, exp, "gemm_fp8", "fp8_gemm_tflops", "fp8_gemm_tflops", "TFLOP/s", "fp8 GEMM")


def hbm_bandwidth(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return _per_gpu(doc, exp, "hbm_bandwidth", "hbm_copy_tbps", "hbm_copy_tbps", "TB/s",
                    "HBM copy (read+write)")


def gpu_burn(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    """Only when the probe ran gpu_burn (burn-in): every GPU must read OK; its exit code is ignored (gpu-burn#12)."""
    gb = doc.get("gpu_burn")
    if not gb:
        return []
    parsed = gb.get("parsed") or {}
    faulty = sorted((int(g) for g, s in parsed.get("gpus", {}).items() if s != "OK"))
    kw: dict[str, Any] = {"measured": parsed.get("gpus"), "evidence": "raw.gpu_burn"}
    if gb.get("timed_out") or not parsed.get("gpus"):
        return [exp.result("gpu_burn", E, "gpu_burn printed no per-GPU verdict"
                           + (" (timed out)" if gb.get("timed_out") else ""), **kw)]
    if faulty:
        return [exp.result("gpu_burn", F, f"gpu_burn: GPU {', '.join(map(str, faulty))} FAULTY "
                           f"(exit code {gb.get('rc')} ignored)", **kw)]
    if parsed.get("tested") is not None and parsed["tested"] != exp.gpus:
        return [exp.result("gpu_burn", F, f"gpu_burn tested {parsed['tested']} GPUs, the node has {exp.gpus}", **kw)]
    return [exp.result("gpu_burn", P, f"gpu_burn: all {len(parsed['gpus'])} GPUs OK", **kw)]
