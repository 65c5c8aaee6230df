"""Isolation benchmark: how many pairwise runs and how long the fabric phase needs to name one bad host.

    .venv/bin/python benchmarks/fabric_isolation.py                 # in-process fake fabric (default 12 hosts)
    .venv/bin/python benchmarks/fabric_isolation.py --per-run 0.5   # each nccl-tests run takes 0.5 s
    .venv/bin/python benchmarks/fabric_isolation.py --sandbox       # a real 12-host sandbox fleet (root)

The fault is a half-rate HCA on one host. With the HCA gates as a prefilter (the default) the port gate names the
host before any NCCL run; `--no-prefilter` measures isolation alone (the host joins the pairwise runs and must
be found by them), which is the figure docs/fabric.md records. Prints one JSON object per scenario.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready.spec.fabric import FabricSettings  # noqa: E402
from gridready.stages.fabric import SshRunner, run_fabric_phase  # noqa: E402


def fake(n: int, faulted: list[str], per_run: float, prefilter: bool, parallel: bool) -> dict:
    from tests.unit.fabric.fakefabric import FakeFabric, make_inventory

    inv = make_inventory(n)
    fab = FakeFabric(inv, dict.fromkeys(faulted, "half_rate"), run_s=per_run)
    settings = FabricSettings(exclude_hca_failures=prefilter, parallel_pairs=parallel)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        r = run_fabric_phase(inv, None, list(inv.hosts), fab, settings=settings, out_dir=Path(tmp))
    return _summary("fake", n, faulted, r, time.monotonic() - t0, per_run, prefilter, parallel)


def sandbox(n: int, faulted: list[str], prefilter: bool, parallel: bool) -> dict:
    from gridready.inventory import load
    from sandbox.pytest_plugin import start_fleet
    from tests.sandbox.fabric_simtools import ensure_sim_tools

    profiles = {h: {"faults": [{"kind": "hca_half_rate", "hca": "mlx5_1"}]} for h in faulted}
    t_up = time.monotonic()
    fl = start_fleet(n, profiles, healthy=True, prefix="fb")
    try:
        ensure_sim_tools(fl)
        up_s = time.monotonic() - t_up
        inv = load(fl.inventory)  # group_vars/all: gridready_rdma_sysfs_root (the simulated sysfs tree)
        settings = FabricSettings(exclude_hca_failures=prefilter, parallel_pairs=parallel, gdr_bw=True,
                                  all_reduce_perf="all_reduce_perf")  # the copied simulator tools are on PATH
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            r = run_fabric_phase(inv, None, list(inv.hosts), SshRunner.from_inventory(inv), settings=settings,
                                 out_dir=Path(tmp))
        out = _summary("sandbox", n, faulted, r, time.monotonic() - t0, None, prefilter, parallel)
        out["fleet_up_s"] = round(up_s, 1)
        return out
    finally:
        fl.down()


def _summary(mode: str, n: int, faulted: list[str], r, wall: float, per_run, prefilter: bool,
             parallel: bool) -> dict:
    return {
        "mode": mode, "hosts": n, "faulted": faulted, "hca_prefilter": prefilter, "parallel_pairs": parallel,
        "per_run_s": per_run, "quarantined": sorted(r.quarantined), "certified": len(r.certified),
        "pairwise_runs": r.pairwise_run_count, "rounds": r.isolation_rounds,
        "isolation_wall_s": round(r.isolation_wall_s, 3), "phase_wall_s": round(wall, 3),
        "set_busbw_gbps": r.set_runs[0].busbw_gbps if r.set_runs else None, "status": r.status,
        "timings_s": r.timings_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=12)
    ap.add_argument("--faulted", default="", help="comma list (default: the 5th host)")
    ap.add_argument("--per-run", type=float, default=0.0, help="fake: seconds per nccl-tests run")
    ap.add_argument("--sandbox", action="store_true")
    ap.add_argument("--serial", action="store_true", help="one pair at a time")
    ap.add_argument("--no-prefilter", action="store_true", help="HCA gate failures still join the pairwise runs")
    a = ap.parse_args()
    prefix = "node" if a.sandbox else "gpu"
    faulted = [h for h in a.faulted.split(",") if h] or [f"{prefix}{5:02d}" if not a.sandbox else "node5"]
    if a.sandbox:
        out = sandbox(a.hosts, faulted, not a.no_prefilter, not a.serial)
    else:
        out = fake(a.hosts, faulted, a.per_run, not a.no_prefilter, not a.serial)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
