"""matplotlib plots (Agg backend, PNG): busbw vs message size against the floor; per-GPU TFLOP/s and bandwidth."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure  # the OO API renders with Agg, no pyplot state and no display needed

from gridready.certify.judge import FleetVerdict


def _floor(fleet: FleetVerdict) -> float | None:
    for v in fleet.nodes.values():
        r = next((r for r in v.gates if r.gate == "nccl_allreduce" and r.expected), None)
        if r and r.expected and r.expected.floor:
            return r.expected.floor
    return None


def busbw_plot(fleet: FleetVerdict, path: Path) -> Path | None:
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    drawn = False
    min_bytes = None
    for node, v in sorted(fleet.nodes.items()):
        pts = sorted((p["bytes"], p["busbw_gbps"]) for p in v.figures.get("allreduce", {}).get("points", [])
                     if p.get("busbw_gbps") is not None)
        if not pts:
            continue
        best: dict[int, float] = {}
        for b, bw in pts:  # best of N runs per size
            best[b] = max(bw, best.get(b, 0.0))
        ax.plot(list(best), list(best.values()), marker="o", ms=3, label=f"{node} ({'ok' if v.certified else 'FAIL'})")
        drawn = True
        nr = next((r for r in v.gates if r.gate == "nccl_allreduce" and isinstance(r.measured, dict)), None)
        min_bytes = (nr.measured or {}).get("min_bytes") if nr else min_bytes
    if not drawn:
        return None
    floor = _floor(fleet)
    if floor:
        ax.axhline(floor, color="red", ls="--", label=f"floor {floor:g} GB/s")
    if min_bytes:
        ax.axvline(min_bytes, color="grey", ls=":", label="gated sizes start")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("all-reduce busbw (GB/s)")
    ax.set_title("single-node all-reduce bus bandwidth vs message size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def per_gpu_plot(fleet: FleetVerdict, path: Path) -> Path | None:
    """Three panels per GPU: bf16/fp8 TFLOP/s, HBM copy TB/s, pinned H2D/D2H GB/s."""
    labels, bf16, fp8, h2d, d2h, hbm = [], [], [], [], [], []
    for node, v in sorted(fleet.nodes.items()):
        for g in v.figures.get("gpus", []):
            labels.append(f"{node}:{g['gpu']}")
            bf16.append(g.get("bf16_gemm_tflops") or 0)
            fp8.append(g.get("fp8_gemm_tflops") or 0)
            h2d.append(g.get("h2d_gbps") or 0)
            d2h.append(g.get("d2h_gbps") or 0)
            hbm.append(g.get("hbm_copy_tbps") or 0)
    if not labels:
        return None
    x = range(len(labels))
    fig = Figure(figsize=(12, 4))
    a1, a2, a3 = fig.subplots(1, 3)
    w = 0.4
    a1.bar([i - w / 2 for i in x], bf16, w, label="bf16")
    a1.bar([i + w / 2 for i in x], fp8, w, label="fp8")
    a1.set_title("dense GEMM (TFLOP/s)")
    a1.legend(fontsize=8)
    a2.bar(list(x), hbm, color="tab:green")
    a2.set_title("HBM copy, read+write (TB/s)")
    a3.bar([i - w / 2 for i in x], h2d, w, label="host->device")
    a3.bar([i + w / 2 for i in x], d2h, w, label="device->host")
    a3.set_title("pinned host<->device (GB/s)")
    a3.legend(fontsize=8)
    for a in (a1, a2, a3):
        a.set_xticks(list(x))
        a.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        a.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
