"""Write every report format of one certify run into the stage directory (atomic writes)."""

from __future__ import annotations

import os
from pathlib import Path

from gridready.artifacts import make_dirs, sync_all, write_atomic, write_json_atomic
from gridready.certify.fabric import FabricResult
from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.quarantine import write_outputs as write_quarantine
from gridready.report.ctrf import write_ctrf
from gridready.report.fabric_section import render_fabric_html, render_fabric_md
from gridready.report.fleet_json import certification_path, fleet_report
from gridready.report.junit import write_junit
from gridready.report.markdown import render_html, render_md
from gridready.report.metrics import write_prom
from gridready.report.plots import busbw_not_drawn, busbw_plot, per_gpu_not_drawn, per_gpu_plot


class Spill:
    """The full verdicts of a fleet's judged nodes, one JSON line each in a scratch file beside the reports, while
    the fleet decision and the reports hold slim copies (NodeVerdict.slim): memory grows by kilobytes per node,
    not by its every result. write_all writes each node's certification.json from here, with what the fleet phase
    added, then removes the file. One file appended to, not a file per node written twice: renaming over a
    file flushes it (ext4 auto_da_alloc), which cost more than judging at 10,000 nodes."""

    def __init__(self, out_dir: Path) -> None:
        make_dirs(out_dir)
        self.path = out_dir / ".verdicts.jsonl"
        # read back later, so not write_atomic: opened without following a link, in a folder make_dirs walked
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._file = os.fdopen(fd, "w+b")
        self._at: dict[str, tuple[int, int]] = {}

    def keep(self, verdict: NodeVerdict) -> NodeVerdict:
        """Store the full verdict, return its slim copy."""
        data = verdict.model_dump_json().encode()
        self._file.seek(0, 2)
        self._at[verdict.node] = (self._file.tell(), len(data))
        self._file.write(data + b"\n")
        return verdict.slim()

    def full(self, node: str) -> NodeVerdict:
        offset, size = self._at[node]
        self._file.seek(offset)
        return NodeVerdict.model_validate_json(self._file.read(size))

    def close(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


def write_certification(v: NodeVerdict, out_dir: Path, spill: Spill | None = None) -> Path:
    """nodes/<node>/certification.json: the verdict itself or, for a slim copy, its full verdict from the spill
    with the results added since. Not fsynced one by one: write_all syncs them at once."""
    if v.is_slim:
        if spill is None:
            raise ValueError(f"{v.node}: a slim verdict without the spill that holds its full verdict")
        v = v.merged_into(spill.full(v.node))
    return write_json_atomic(certification_path(out_dir, v.node), v, durable=False)


def write_all(fleet: FleetVerdict, out_dir: Path, *, command: str | None = None,
              fabric: FabricResult | None = None, spill: Spill | None = None) -> dict[str, Path]:
    """nodes/<node>/certification.json, report.json, junit.xml, ctrf.json (CTRF), report.md, report.html, plots (PNG),
    metrics.prom, quarantine.yml (+ k8s-node-patches.json, slurm-drain.sh). Returns name -> path."""
    make_dirs(out_dir)  # never through a link
    paths: dict[str, Path] = {}
    for node, v in fleet.nodes.items():
        paths[f"certification:{node}"] = write_certification(v, out_dir, spill)
    sync_all()  # every node's file durable before any report names it
    if spill is not None:
        spill.close()
    paths["report_json"] = write_json_atomic(out_dir / "report.json", fleet_report(fleet))
    paths["junit"] = write_junit(fleet, out_dir / "junit.xml")
    paths["ctrf"] = write_ctrf(fleet, out_dir / "ctrf.json")
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
