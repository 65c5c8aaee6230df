"""The fabric part of report.md / report.html: pairwise and whole-set busbw against the floor, with the plots."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

GIB = 1 << 30


def _rows(result: Any) -> list[tuple[str, str, str, str, str, str, str]]:
    rows = []
    for run in [*result.pair_runs, *result.set_runs]:
        points = sorted(run.curve.items(), key=lambda kv: int(kv[0]))
        curve = ", ".join(f"{int(b) // GIB} GiB {v:.1f}" for b, v in points)
        rows.append((run.phase, "+".join(run.hosts), run.status.value,
                     f"{run.busbw_gbps:.1f}" if run.busbw_gbps is not None else "-",
                     f"{run.pct_of_nic:.1f}%" if run.pct_of_nic is not None else "-",
                     f"{run.floor_gbps:.0f}", f"{run.transport}; {curve}"))
    return rows


def _plots(result: Any, out_dir: Path) -> list[str]:
    return [os.path.relpath(p, out_dir) for p in result.plots if Path(p).exists()]


def render_fabric_md(result: Any, out_dir: Path) -> list[str]:
    out = ["", "## Fabric (multi-node)", "",
           f"- {result.status}: {result.reason}",
           f"- floor {result.floor_gbps or 0:.0f} GB/s ({result.floor_source}); per-node NIC {result.nic_gbytes} GB/s",
           f"- pairwise runs: {result.pairwise_run_count} in {result.isolation_rounds} round(s), "
           f"{result.isolation_wall_s:.1f} s",
           f"- quarantined by the fabric: {', '.join(f'{n} ({r})' for n, r in result.quarantined.items()) or 'none'}"]
    if result.unresolved:
        out.append(f"- unresolved (failed once, no known-good partner left): {', '.join(result.unresolved)}")
    out += ["", "| run | hosts | status | peak busbw GB/s | % of NIC | floor GB/s | transport; curve (size GB/s) |",
            "|---|---|---|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in _rows(result)]
    out += [""] + [f"![{Path(p).stem}]({p})" for p in _plots(result, out_dir)]
    return out


def render_fabric_html(result: Any, out_dir: Path) -> str:
    e = html.escape
    rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in _rows(result))
    imgs = "".join(f'<p><img src="{e(p)}" alt="{e(Path(p).stem)}"></p>' for p in _plots(result, out_dir))
    return (f"<h2>Fabric (multi-node)</h2><p>{e(result.status)}: {e(result.reason)}; floor "
            f"{result.floor_gbps or 0:.0f} GB/s ({e(str(result.floor_source))}); pairwise runs "
            f"{result.pairwise_run_count} in {result.isolation_rounds} round(s)</p>"
            "<table><tr><th>run</th><th>hosts</th><th>status</th><th>peak busbw GB/s</th><th>% of NIC</th>"
            f"<th>floor GB/s</th><th>transport; curve</th></tr>{rows}</table>{imgs}")
