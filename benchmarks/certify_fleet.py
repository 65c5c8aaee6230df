"""Certification at fleet scale on the controller alone: judging, fleet outliers, the pairwise isolation plan and
every report format for fleets of simulated nodes (no hosts booted).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/certify_fleet.py [--sizes 1000 10000] [--probes DIR] [--json F]

Probe documents come from the simulator's own tools run in-process (sandbox.probe_docs: nvidia-smi, dmesg, dcgmi,
all_reduce_perf per hardware profile), one faulted node in every 50; they are written first as the certify stage
finds them (probes/<node>/probe.json; --probes keeps them for the next run; not timed). Then a fresh Python
process per size does what the stage does on the controller, as the stage does it: judge each probe.json in turn,
keeping its full verdict in a scratch file and a slim copy in memory (gridready.report.writer.Spill), then the fleet
decision (outliers, SDC consensus, policy), the isolation plan (a pair function that fails any pair holding a node
the judge quarantined) and every report format. Its peak resident memory (ru_maxrss, the whole process: Python,
pydantic, matplotlib and the fleet) is the controller's peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPORTS = ("report_json", "report_md", "report_html", "junit", "ctrf", "metrics")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _cpu_s() -> float:
    """CPU seconds of this process (user + system): on a busy shared machine they move far less than wall time."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write_probes(n: int, probes: Path) -> float:
    """probes/<host>/probe.json for the first n simulated nodes, skipping those already written; seconds."""
    from sandbox.probe_docs import fleet_docs

    t0 = time.perf_counter()
    missing = [i for i in range(n) if not (probes / f"gpu{i:04d}" / "probe.json").is_file()]
    if missing:
        for host, doc in fleet_docs(max(missing) + 1):
            path = probes / host / "probe.json"
            if not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc))
    return time.perf_counter() - t0


def measure(n: int, probes: Path, out: Path) -> dict[str, Any]:
    """Judge and report n nodes in this process, as the certify stage does (run in a fresh process per size)."""
    from gridready import inventory
    from gridready.certify.isolation import isolate
    from gridready.certify.judge import judge_fleet, judge_node
    from gridready.report.writer import Spill, write_all

    inv = inventory.load("sandbox")
    spec, group = inv.spec.certification, inv.spec.node_groups[0]
    start_mib = _peak_mib()
    t0, c0 = time.perf_counter(), _cpu_s()
    verdicts, spill = [], Spill(out)
    for i in range(n):
        host = f"gpu{i:04d}"
        doc = json.loads((probes / host / "probe.json").read_bytes())
        v = judge_node(spec, group, doc, node=host, node_group=group.name,
                       driver_branch=inv.spec.software.driver_branch, evidence=f"probes/{host}/probe.json")
        del doc
        verdicts.append(spill.keep(v))
    judge_s, judge_cpu = time.perf_counter() - t0, _cpu_s() - c0
    judge_mib = _peak_mib()
    t0 = time.perf_counter()
    fleet = judge_fleet(spec, verdicts, customer="bench", run_id=f"fleet-{n}")
    fleet_s = time.perf_counter() - t0
    bad = set(fleet.quarantined)
    t0 = time.perf_counter()
    iso = isolate(sorted(fleet.nodes), lambda a, b: not ({a, b} & bad))
    iso_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), _cpu_s()
    paths = write_all(fleet, out, command=f"benchmarks/certify_fleet.py --sizes {n}", spill=spill)
    reports_s, reports_cpu = time.perf_counter() - t0, _cpu_s() - c0
    sizes = {k: paths[k].stat().st_size for k in REPORTS}
    return {"nodes": n, "faulted": len(bad), "judge_s": round(judge_s, 1), "judge_cpu_s": round(judge_cpu, 1),
            "fleet_s": round(fleet_s, 2), "isolation_s": round(iso_s, 2), "isolation_runs": iso.run_count,
            "reports_s": round(reports_s, 1), "reports_cpu_s": round(reports_cpu, 1),
            "total_s": round(judge_s + fleet_s + iso_s + reports_s, 1), "start_mib": round(start_mib),
            "judge_peak_mib": round(judge_mib), "peak_mib": round(_peak_mib()),
            "report_json_bytes_per_node": round(sizes["report_json"] / n),
            "sizes_kib": {k: round(v / 1024) for k, v in sizes.items()}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--probes", type=Path, help="probe documents, kept between runs (default: a temporary folder)")
    ap.add_argument("--out", type=Path, help="keep the reports here, one folder per size (default: temporary)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the child process of one size
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(a.measure, a.probes, a.out)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as td:
        probes = a.probes or Path(td) / "probes"
        gen_s = write_probes(max(a.sizes), probes)
        print(f"probe documents written in {gen_s:.0f} s", file=sys.stderr)
        for n in a.sizes:
            out = (a.out or Path(td)) / f"fleet-{n}"
            load = os.getloadavg()[0]
            child = subprocess.run([sys.executable, __file__, "--measure", str(n), "--probes", str(probes),
                                    "--out", str(out)], check=True, capture_output=True, text=True)
            rows.append({**json.loads(child.stdout), "load_before": round(load, 2)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"rows": rows}, indent=1))
    print("| nodes (not certified) | judge s (CPU s) | fleet + isolation s | reports s (CPU s) | total s | "
          "peak MiB (after judge) | report.json per node | report.html / .md / .json / junit KiB | load before |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        kb = r["sizes_kib"]
        print(f"| {r['nodes']} ({r['faulted']}) | {r['judge_s']} ({r['judge_cpu_s']}) | {r['fleet_s']} + "
              f"{r['isolation_s']} | {r['reports_s']} ({r['reports_cpu_s']}) | {r['total_s']} | "
              f"{r['peak_mib']} ({r['judge_peak_mib']}) | "
              f"{r['report_json_bytes_per_node']} B | {kb['report_html']} / {kb['report_md']} / {kb['report_json']} / "
              f"{kb['junit']} | {r['load_before']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
