"""Fleet-relative outliers: a node far below its SKU group's median for a figure is flagged (median + MAD).

Robust statistics: the median and the median absolute deviation (MAD) ignore the very node being judged, so one
bad node cannot drag the bar down. A node is flagged when `value < median - k x max(MAD, rel_floor x median)`;
the relative floor keeps near-identical fleets (MAD ~ 0) from flagging noise. Groups smaller than `min_group`
are not judged (a median of two says nothing). Action `warn` or `fail` comes from the spec
(CertificationSpec.outlier_mad_threshold / outlier_action). Gate name: `outlier_<figure>`.
"""

from __future__ import annotations

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


def mad(values: list[float]) -> tuple[float, float]:
    """(median, median absolute deviation)."""
    med = median(values)
    return med, median(abs(v - med) for v in values)


def flag_outliers(
    figure: str,
    values: Mapping[str, float | None],
    group_of: Mapping[str, str],
    *,
    threshold: float = 4.0,
    action: str = "warn",
    rel_floor: float = 0.01,
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
        if len(members) < min_group:
            for node, v in sorted(members.items()):
                out.append(GateResult(
                    gate=f"outlier_{figure}", node=node, status=GateStatus.SKIPPED, required=False, measured=v,
                    unit=unit or FIGURES.get(figure), reason=f"group {group} has {len(members)} nodes "
                    f"(< {min_group}): no fleet comparison",
                ))
            continue
        med, dev = mad(list(members.values()))
        spread = max(dev, rel_floor * med)
        bar = med - threshold * spread
        for node, v in sorted(members.items()):
            low = v < bar
            out.append(GateResult(
                gate=f"outlier_{figure}", node=node, status=bad_status if low else GateStatus.PASS,
                measured=round(v, 3), unit=unit or FIGURES.get(figure),
                expected=Expected(floor=round(bar, 3), source=f"fleet: median {med:.4g} - {threshold:g} x MAD "
                                  f"{spread:.3g} of group {group} ({len(members)} nodes)"),
                reason=(f"{figure} {v:.4g} is {(med - v) / spread:.1f} MADs below the {group} median {med:.4g}"
                        if low else f"{figure} {v:.4g} within the {group} fleet (median {med:.4g})"),
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
