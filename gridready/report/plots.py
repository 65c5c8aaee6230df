"""matplotlib plots (Agg backend, PNG): busbw vs message size against the floor; per-GPU TFLOP/s and bandwidth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure  # the OO API renders with Agg, no pyplot state and no display needed

from gridready.certify.judge import FleetVerdict
from gridready.certify.result import GateStatus
from gridready.report.humanize import number


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


def _allreduce_verdict(fleet: FleetVerdict, node: str) -> str:
    """What the all-reduce gate said of this curve (not the node's verdict: a node failed for its PCIe link has a
    healthy curve)."""
    got = {r.status for r in fleet.nodes[node].gates if r.gate == "nccl_allreduce"}
    if GateStatus.ERROR in got:
        return "all-reduce not judged (error)"
    if GateStatus.FAIL in got:
        return "all-reduce below the floor"
    return "all-reduce at or above the floor" if GateStatus.PASS in got or GateStatus.WARN in got else \
        "all-reduce not judged"


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
        ax.plot(list(c), list(c.values()), marker="o", ms=3, label=f"{node}: {_allreduce_verdict(fleet, node)}")
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


# per-GPU panels: (title, [(series label, figures key, gate whose floor applies, colour)])
_PANELS: tuple[tuple[str, list[tuple[str, str, str, str]]], ...] = (
    ("dense GEMM (TFLOP/s)", [("bf16", "bf16_gemm_tflops", "gemm_bf16", "tab:blue"),
                              ("fp8", "fp8_gemm_tflops", "gemm_fp8", "tab:orange")]),
    ("HBM copy, read+write (TB/s)", [("HBM", "hbm_copy_tbps", "hbm_bandwidth", "tab:green")]),
    ("pinned host<->device (GB/s)", [("host->device", "h2d_gbps", "h2d_bandwidth", "tab:blue"),
                                     ("device->host", "d2h_gbps", "h2d_bandwidth", "tab:orange")]),
)


def gate_floors(fleet: FleetVerdict, gate: str) -> list[tuple[float, str]]:
    """Distinct (floor, unit) the gate's per-GPU results were held against, lowest first (one per SKU or spec)."""
    seen = {(r.expected.floor, r.unit or "") for v in fleet.nodes.values() for r in v.gates
            if r.gate == gate and r.gpu is not None and r.expected and r.expected.floor is not None}
    return sorted(seen)


_FLOOR_STYLES = ("--", "-.", ":")  # black over any bar colour; the style tells one panel's floors apart


def _floor_lines(ax: Any, fleet: FleetVerdict, series: list[tuple[str, str, str, str]], vertical: bool) -> float:
    """A black, labelled line at each floor of the panel's gates, over the bars; named after its series where the
    panel has several gates (bf16, fp8). Returns the highest floor drawn (0 without any)."""
    draw = ax.axvline if vertical else ax.axhline
    gates = list(dict.fromkeys(g for _, _, g, _ in series))
    top, n = 0.0, 0
    for gate in gates:
        name = next(name for name, _, g, _ in series if g == gate) if len(gates) > 1 else ""
        for floor, unit in gate_floors(fleet, gate):
            draw(floor, color="black", ls=_FLOOR_STYLES[n % len(_FLOOR_STYLES)], lw=1.3, zorder=3,
                 label=f"{name + ' ' if name else ''}floor {number(floor, unit)}")
            top, n = max(top, floor), n + 1
    return top


def _per_gpu_values(fleet: FleetVerdict) -> tuple[list[str], dict[str, list[float]]]:
    """GPU labels (node:index) and, per figures key, one value per GPU (0 where the figure is missing)."""
    keys = [key for _, series in _PANELS for _, key, _, _ in series]
    labels: list[str] = []
    values: dict[str, list[float]] = {k: [] for k in keys}
    for node, v in sorted(fleet.nodes.items()):
        for g in v.figures.get("gpus", []):
            labels.append(f"{node}:{g['gpu']}")
            for k in keys:
                values[k].append(g.get(k) or 0)
    return labels, values


def _bars(ax: Any, fleet: FleetVerdict, title: str, series: list[tuple[str, str, str, str]], labels: list[str],
          values: dict[str, list[float]]) -> None:
    w = 0.8 / len(series)
    for i, (name, key, _, color) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * w
        ax.bar([x + offset for x in range(len(labels))], values[key], w, label=name, color=color)
    floor = _floor_lines(ax, fleet, series, vertical=False)
    top = max([floor, *(x for _, key, _, _ in series for x in values[key])])
    ax.set_ylim(0, (top or 1) * 1.3)  # the floors on the axis, with room above the bars for the legend
    ax.set_title(title)
    ax.set_xticks(list(range(len(labels))))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right", ncol=2)


def _histogram(ax: Any, fleet: FleetVerdict, title: str, series: list[tuple[str, str, str, str]], gpus: int,
               values: dict[str, list[float]]) -> None:
    for name, key, _, color in series:
        if any(values[key]):
            ax.hist([x for x in values[key] if x], bins=40, alpha=0.6, label=name, color=color)
    _floor_lines(ax, fleet, series, vertical=True)
    ax.set_title(f"{title}, {gpus} GPUs", fontsize=9)
    ax.set_ylabel("GPUs")
    ax.legend(fontsize=7)


def per_gpu_plot(fleet: FleetVerdict, path: Path) -> Path | None:
    """Three panels per GPU: bf16/fp8 TFLOP/s, HBM copy TB/s, pinned H2D/D2H GB/s, each with its gates' floors;
    beyond 8 x LINES_MAX GPUs each panel is a histogram (the floors as vertical lines)."""
    labels, values = _per_gpu_values(fleet)
    if not labels:
        return None
    fig = Figure(figsize=(12, 4))
    for ax, (title, series) in zip(fig.subplots(1, 3), _PANELS, strict=True):
        if len(labels) > 8 * LINES_MAX:  # a fleet: the distribution per figure, not thousands of bars
            _histogram(ax, fleet, title, series, len(labels), values)
        else:
            _bars(ax, fleet, title, series, labels, values)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def per_gpu_not_drawn(fleet: FleetVerdict) -> str:
    """Why per_gpu_plot drew nothing (one line in the report in place of the chart)."""
    gates = {gate for _, series in _PANELS for _, _, gate, _ in series}
    ran = any(r.gate in gates and r.status is not GateStatus.SKIPPED for v in fleet.nodes.values() for r in v.gates)
    if not ran:
        return "not drawn: the compute and bandwidth gates did not run on these nodes (n/a)"
    return "not drawn: no node recorded per-GPU compute or bandwidth figures"


def busbw_not_drawn(fleet: FleetVerdict) -> str:
    """Why busbw_plot drew nothing: a one-GPU node's all-reduce crosses no bus, so the chart would be empty."""
    gpus = {len(v.figures.get("gpus", [])) for v in fleet.nodes.values()}
    if gpus == {1}:
        return ("not drawn: one GPU per node, and an all-reduce over one rank crosses no bus "
                "(nccl-tests reports busbw 0 at every size)")
    if not any(v.figures.get("allreduce", {}).get("points") for v in fleet.nodes.values()):
        return "not drawn: no node recorded an all-reduce sweep"
    return "not drawn: every all-reduce point recorded has busbw 0"
