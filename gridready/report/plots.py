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


LINES_MAX = 12  # beyond this many nodes a plot draws the fleet's band and median, plus the nodes that failed


def _best_curves(fleet: FleetVerdict) -> dict[str, dict[int, float]]:
    """node -> {bytes: best busbw of its runs at that size} (best of N, never an average)."""
    curves: dict[str, dict[int, float]] = {}
    for node, v in sorted(fleet.nodes.items()):
        best: dict[int, float] = {}
        for p in v.figures.get("allreduce", {}).get("points", []):
            if p.get("busbw_gbps") is not None:
                best[p["bytes"]] = max(p["busbw_gbps"], best.get(p["bytes"], 0.0))
        if best and max(best.values()) > 0:  # one rank moves nothing across a bus: busbw 0 at every size, no curve
            curves[node] = dict(sorted(best.items()))
    return curves


def _median(vals: list[float]) -> float:
    s = sorted(vals)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def busbw_plot(fleet: FleetVerdict, path: Path) -> Path | None:
    curves = _best_curves(fleet)
    if not curves:
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    failed = [n for n in curves if not fleet.nodes[n].certified]
    if len(curves) <= LINES_MAX:
        drawn = list(curves)
    else:  # a fleet: min..max band and median per size, then the failing nodes on top
        sizes = sorted({b for c in curves.values() for b in c})
        per = [[c[b] for c in curves.values() if b in c] for b in sizes]
        ax.fill_between(sizes, [min(x) for x in per], [max(x) for x in per], color="tab:blue", alpha=0.2,
                        label=f"{len(curves)} nodes: min to max")
        ax.plot(sizes, [_median(x) for x in per], color="tab:blue", label="fleet median")
        drawn = failed[:LINES_MAX]
    for node in drawn:
        c = curves[node]
        ax.plot(list(c), list(c.values()), marker="o", ms=3,
                label=f"{node} ({'ok' if fleet.nodes[node].certified else 'FAIL'})")
    min_bytes = None
    for v in fleet.nodes.values():
        nr = next((r for r in v.gates if r.gate == "nccl_allreduce" and isinstance(r.measured, dict)), None)
        if nr and (nr.measured or {}).get("min_bytes"):
            min_bytes = nr.measured["min_bytes"]
            break
    floor = _floor(fleet)
    top = max(max(c.values()) for c in curves.values())
    if floor:
        ax.axhline(floor, color="red", ls="--", label=f"floor {floor:g} GB/s")
        top = max(top, floor)
    ax.set_ylim(0, top * 1.12)  # the floor is always on the axis, with room above it
    if min_bytes:
        ax.axvline(min_bytes, color="grey", ls=":", label="gated sizes start")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("all-reduce busbw (GB/s)")
    more = f" ({len(failed) - LINES_MAX} more failing nodes not drawn)" if len(failed) > LINES_MAX else ""
    ax.set_title("single-node all-reduce bus bandwidth vs message size" + more, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
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
    if len(labels) > 8 * LINES_MAX:  # a fleet: the distribution per figure, not thousands of bars
        fig = Figure(figsize=(12, 4))
        axes = fig.subplots(1, 3)
        for a, (title, series) in zip(axes, (("dense GEMM bf16 / fp8 (TFLOP/s)", {"bf16": bf16, "fp8": fp8}),
                                              ("HBM copy, read+write (TB/s)", {"HBM": hbm}),
                                              ("pinned host<->device (GB/s)", {"H2D": h2d, "D2H": d2h})),
                                  strict=True):
            for name, vals in series.items():
                if any(vals):
                    a.hist([v for v in vals if v], bins=40, alpha=0.6, label=name)
            a.set_title(f"{title}, {len(labels)} GPUs", fontsize=9)
            a.set_ylabel("GPUs")
            a.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        return path
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
