"""Write every report format of one certify run into the stage directory (atomic writes)."""

from __future__ import annotations

from pathlib import Path

from gridready.artifacts import make_dirs, write_atomic, write_json_atomic
from gridready.certify.fabric import FabricResult
from gridready.certify.judge import FleetVerdict
from gridready.certify.quarantine import write_outputs as write_quarantine
from gridready.report.ctrf import ctrf_report
from gridready.report.fabric_section import render_fabric_html, render_fabric_md
from gridready.report.junit import junit_xml
from gridready.report.markdown import render_html, render_md
from gridready.report.metrics import write_prom
from gridready.report.plots import busbw_not_drawn, busbw_plot, per_gpu_not_drawn, per_gpu_plot


def write_all(fleet: FleetVerdict, out_dir: Path, *, command: str | None = None,
              fabric: FabricResult | None = None) -> dict[str, Path]:
    """nodes/<node>/certification.json, report.json, junit.xml, ctrf.json (CTRF), report.md, report.html, plots (PNG),
    metrics.prom, quarantine.yml (+ k8s-node-patches.json, slurm-drain.sh). Returns name -> path."""
    make_dirs(out_dir)  # never through a link
    paths: dict[str, Path] = {}
    for node, v in fleet.nodes.items():
        paths[f"certification:{node}"] = write_json_atomic(out_dir / "nodes" / node / "certification.json", v)
    paths["report_json"] = write_json_atomic(out_dir / "report.json", fleet)
    paths["junit"] = write_atomic(out_dir / "junit.xml", junit_xml(fleet))
    paths["ctrf"] = write_json_atomic(out_dir / "ctrf.json", ctrf_report(fleet))
    plots = {"all-reduce busbw vs size": busbw_plot(fleet, out_dir / "busbw.png"),
             "per-GPU compute and bandwidth": per_gpu_plot(fleet, out_dir / "per_gpu.png")}
    paths.update({f"plot:{p.stem}": p for p in plots.values() if p})
    why = {"all-reduce busbw vs size": busbw_not_drawn, "per-GPU compute and bandwidth": per_gpu_not_drawn}
    notes = {name: why[name](fleet) for name, p in plots.items() if p is None}  # a line instead of an empty chart
    md, page = render_md(fleet, plots, command, notes=notes), render_html(fleet, plots, command, notes=notes)
    if fabric is not None:
        md += "\n".join(render_fabric_md(fabric, out_dir)) + "\n"
        page = page.replace("</body>", render_fabric_html(fabric, out_dir) + "\n</body>")
    paths["report_md"] = write_atomic(out_dir / "report.md", md)
    paths["report_html"] = write_atomic(out_dir / "report.html", page)
    paths["metrics"] = write_prom(fleet, out_dir / "metrics.prom")
    paths.update(write_quarantine(out_dir, fleet.certified, fleet.quarantined, fleet.run_id))
    return paths
