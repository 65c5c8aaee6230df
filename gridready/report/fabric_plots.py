"""busbw curves of the fabric phase against the floor (matplotlib, headless): one figure per pair kind and one for
the whole certified set. The report links the PNGs listed in FabricResult.plots."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from gridready.artifacts import write_atomic

COLORS = {"pass": "tab:green", "warn": "tab:olive", "fail": "tab:red", "error": "tab:gray"}


def _draw(ax: Any, records: list[Any], floor: float | None, title: str) -> None:
    for rec in records:
        if not rec.curve:
            continue
        xs = sorted(rec.curve)
        label = f"{'+'.join(rec.hosts) if len(rec.hosts) <= 2 else f'{len(rec.hosts)} nodes'} ({rec.status})"
        ax.plot([x / 2**20 for x in xs], [rec.curve[x] for x in xs], marker="o", ms=3,
                color=COLORS.get(str(rec.status), "tab:blue"), label=label, alpha=0.8)
    if floor is not None:
        ax.axhline(floor, color="black", ls="--", lw=1, label=f"floor {floor:g} GB/s")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1024:g} GiB" if x >= 1024 else f"{x:g} MiB"))
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def plot_fabric(result: Any, out_dir: Path) -> list[Path]:
    """fabric-pairs.png (every pairwise run) and fabric-set.png (each collective over the set)."""
    paths = []
    for name, records, title in (
        ("fabric-pairs.png", result.pair_runs, "pairwise all-reduce busbw"),
        ("fabric-set.png", result.set_runs, "certified set busbw"),
    ):
        if not any(r.curve for r in records):
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5))
        _draw(ax, records, result.floor_gbps, f"{title} (floor: {result.floor_source})")
        fig.tight_layout()
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=110)
        plt.close(fig)
        paths.append(write_atomic(out_dir / name, image.getvalue(), mode=0o644))  # never through a link
    return paths
