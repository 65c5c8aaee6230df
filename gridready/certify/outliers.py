"""Fleet-relative outliers: a node far below its SKU group's median for a figure is flagged (median + MAD).

Leave-one-out robust statistics: each node is held against the median and the median absolute deviation (MAD) of
the OTHER nodes of its group, so one bad node cannot drag its own bar down. The MAD is scaled by 1.4826 (the
normal-consistency constant: then it estimates one standard deviation) and never taken below `rel_floor` x median,
the probe's own repeatability: every probe figure lands within 3% of a best-of-10 reference on a real H200
(benchmarks/probe_vs_best.py, docs/certification.md). A node is flagged when
`value < median - k x max(1.4826 x MAD, rel_floor x median)`: with the default k = 4 at least 12% below its peers, so
run-to-run noise of a healthy node never flags it, however few and alike its peers are. Groups with fewer than
`min_group` nodes are not judged (a median of one peer says nothing).

What an outlier can do: with `outlier_action: warn` (default) it is a warning; with `fail` it blocks certification
even when the node is above every absolute floor (the catalog's and the spec's). Gate name: `outlier_<figure>`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping
from statistics import median
from typing import Any

from gridready.certify.result import Expected, GateResult, GateStatus

FIGURES = {  # figure -> unit; higher is better for all of them
    "bf16_gemm_tflops": "TFLOP/s",
    "hbm_copy_tbps": "TB/s",
    "nccl_busbw_gbps": "GB/s",
    "pair_busbw_gbps": "GB/s",
    "hca_write_bw_gbits": "Gb/s",
}


REL_FLOOR = 0.03  # the probe's repeatability (benchmarks/probe_vs_best.py): a smaller spread is noise
MAD_SCALE = 1.4826  # MAD x this estimates sigma for normally distributed noise


def mad(values: list[float]) -> tuple[float, float]:
    """(median, median absolute deviation)."""
    med = median(values)
    return med, median(abs(v - med) for v in values)


def _median_without(ordered: list[float], i: int) -> float:
    """statistics.median of `ordered` (sorted) without its element at index i, in O(1)."""
    m = len(ordered) - 1

    def at(k: int) -> float:
        return ordered[k if k < i else k + 1]

    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2


def leave_one_out_mad(members: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """node -> mad() of the other nodes' values, for every node in O(n log n) rather than a sort per node: the
    median without one value is read off the sorted values, it takes at most three distinct values across the
    nodes, and for each the sorted deviations give every node's MAD the same way. Equal to mad(peers) exactly."""
    ordered = sorted(members.values())
    position = {node: bisect_left(ordered, v) for node, v in members.items()}
    deviations: dict[float, list[float]] = {}
    out = {}
    for node, v in members.items():
        med = _median_without(ordered, position[node])
        if med not in deviations:
            deviations[med] = sorted(abs(x - med) for x in ordered)
        devs = deviations[med]
        out[node] = (med, _median_without(devs, bisect_left(devs, abs(v - med))))
    return out


def flag_outliers(
    figure: str,
    values: Mapping[str, float | None],
    group_of: Mapping[str, str],
    *,
    threshold: float = 4.0,
    action: str = "warn",
    rel_floor: float = REL_FLOOR,
    min_group: int = 3,
    unit: str | None = None,
) -> list[GateResult]:
    """One GateResult per node with a value: pass, or warn/fail when far below its group's median."""
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for node, v in values.items():
        if v is not None:
            groups[group_of.get(node, "?")][node] = float(v)
    bad_status = GateStatus.FAIL if action == "fail" else GateStatus.WARN
    out: list[GateResult] = []
    for group, members in sorted(groups.items()):
        if len(members) < min_group:  # fewer than two peers per node
            for node, v in sorted(members.items()):
                out.append(GateResult(
                    gate=f"outlier_{figure}", node=node, status=GateStatus.SKIPPED, required=False, measured=v,
                    unit=unit or FIGURES.get(figure), reason=f"group {group} has {len(members)} nodes "
                    f"(< {min_group}): no fleet comparison",
                ))
            continue
        stats = leave_one_out_mad(members)
        for node, v in sorted(members.items()):
            med, dev = stats[node]
            peers = len(members) - 1
            spread = max(MAD_SCALE * dev, rel_floor * med)
            bar = med - threshold * spread
            low = v < bar
            out.append(GateResult(
                gate=f"outlier_{figure}", node=node, status=bad_status if low else GateStatus.PASS,
                measured=round(v, 3), unit=unit or FIGURES.get(figure),
                expected=Expected(floor=round(bar, 3), source=f"fleet: median {med:.4g} of the {peers} other "
                                  f"nodes of group {group} - {threshold:g} x spread {spread:.3g} (1.4826 x MAD, at "
                                  f"least {rel_floor:.0%} of the median)"),
                reason=(f"{figure} {v:.4g} is {(med - v) / spread:.1f} spreads below the {group} median {med:.4g} "
                        f"(of the {peers} other nodes)" if low else
                        f"{figure} {v:.4g} within the {group} fleet (median of the others {med:.4g})"),
                required=action == "fail",
            ))
    return out


def judge_fleet_outliers(
    figures: Mapping[str, Mapping[str, float | None]],
    group_of: Mapping[str, str],
    spec: Any = None,
) -> list[GateResult]:
    """All figures at once; `spec` is a CertificationSpec (threshold and action) or None for the defaults."""
    threshold = getattr(spec, "outlier_mad_threshold", 4.0)
    action = getattr(spec, "outlier_action", "warn")
    out: list[GateResult] = []
    for figure, values in figures.items():
        out += flag_outliers(figure, values, group_of, threshold=threshold, action=action)
    return out


def hca_bw_per_node(probe_hca: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """The slowest HCA's ib_write_bw per node (the figure that bounds the node's fabric share)."""
    out: dict[str, float | None] = {}
    for node, data in probe_hca.items():
        bws = [
            r["parsed"]["avg_gbits"]
            for r in (data.get("ib_write_bw") or {}).values()
            if (r.get("parsed") or {}).get("avg_gbits") is not None
        ]
        out[node] = min(bws) if bws else None
    return out
