"""Certification at fleet scale on the controller alone: judging, fleet outliers, the pairwise isolation plan and
every report format for 100, 300 and 1,000 simulated nodes (no hosts booted).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/certify_fleet.py [--sizes 100 300 1000] [--out DIR] [--json F]

Probe documents come from the simulator's own tools run in-process (sandbox.probe_docs: nvidia-smi,
dmesg, dcgmi, all_reduce_perf per hardware profile), one faulted node in every 50. Each phase is timed once with
tracemalloc off, then its peak Python memory is measured in a second run with tracemalloc on. The isolation plan
runs `isolate()` with a pair function that fails a pair holding a node the judge quarantined (what a bad node
does to its partner's all-reduce). Time per node should stay flat as the fleet grows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridready import inventory
from gridready.certify.isolation import isolate
from gridready.certify.judge import FleetVerdict, NodeVerdict, judge_fleet, judge_node
from gridready.report.writer import write_all
from sandbox.probe_docs import fleet_docs


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, peak MiB): timed untraced, then run again under tracemalloc for the peak."""
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, seconds, peak


def row(n: int, out_dir: Path) -> dict[str, Any]:
    inv = inventory.load("sandbox")
    spec, group = inv.spec.certification, inv.spec.node_groups[0]
    t0 = time.perf_counter()
    docs = list(fleet_docs(n))
    gen_s = time.perf_counter() - t0

    def judge_all() -> list[NodeVerdict]:
        return [judge_node(spec, group, d, node=h, node_group=group.name, driver_branch=inv.spec.software.driver_branch,
                           evidence=f"probes/{h}/probe.json") for h, d in docs]

    verdicts, judge_s, judge_mb = measure(judge_all)

    def fleet() -> FleetVerdict:
        return judge_fleet(spec, [v.model_copy(deep=True) for v in verdicts], customer="bench", run_id=f"fleet-{n}")

    fv, fleet_s, fleet_mb = measure(fleet)
    bad = set(fv.quarantined)

    def plan() -> Any:
        return isolate(sorted(fv.nodes), lambda a, b: not ({a, b} & bad))

    iso, iso_s, iso_mb = measure(plan)
    target = out_dir / f"fleet-{n}"
    paths, report_s, report_mb = measure(lambda: write_all(fv, target, command=f"benchmarks/certify_fleet.py {n}"))
    sizes = {k: paths[k].stat().st_size for k in ("report_json", "report_md", "report_html", "junit", "metrics")}
    return {"nodes": n, "faulted": len(bad), "generate_s": round(gen_s, 1),
            "judge_s": round(judge_s, 2), "judge_mb": round(judge_mb, 1),
            "fleet_s": round(fleet_s, 3), "fleet_mb": round(fleet_mb, 1),
            "isolation_s": round(iso_s, 4), "isolation_mb": round(iso_mb, 2), "isolation_runs": iso.run_count,
            "isolation_rounds": iso.rounds, "isolation_bad": len(iso.bad),
            "reports_s": round(report_s, 2), "reports_mb": round(report_mb, 1),
            "sizes_kb": {k: round(v / 1024) for k, v in sizes.items()}, "report_html": str(paths["report_html"])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--out", type=Path, help="keep the reports here (default: a temporary directory)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        out = a.out or Path(td)
        rows = [row(n, out) for n in a.sizes]
    if a.json:
        a.json.write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=1))
    print(f"loadavg: {os.getloadavg()[0]:.2f}")
    print("| nodes (faulted) | judge: s (ms/node), peak MiB | fleet outliers + policy | isolation: runs, rounds, s | "
          "all reports: s (ms/node), peak MiB | report.html / .md / .json KiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        n, kb = r["nodes"], r["sizes_kb"]
        print(f"| {n} ({r['faulted']}) | {r['judge_s']} s ({1000 * r['judge_s'] / n:.1f}), {r['judge_mb']} | "
              f"{r['fleet_s']} s, {r['fleet_mb']} MiB | {r['isolation_runs']}, {r['isolation_rounds']}, "
              f"{r['isolation_s']} s ({r['isolation_bad']} quarantined) | {r['reports_s']} s "
              f"({1000 * r['reports_s'] / n:.1f}), {r['reports_mb']} | {kb['report_html']} / {kb['report_md']} / "
              f"{kb['report_json']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
