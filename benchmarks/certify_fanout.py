"""Certify wall time against nodes and forks on a sandbox fleet, the controller's cost per fork, and the fan-out
model's parameters fitted to the points (docs/benchmarks.md, 'Fan-out').

    env PYTHONPATH=$PWD .venv/bin/python benchmarks/certify_fanout.py \\
        --sizes 3 6 12 --forks 1 3 12 --json /tmp/fanout.json

One generated fleet of the largest size (sandbox.testfleet, SIMULATED hosts, not provisioned: the probe runs with
the hosts' python3 and records what it finds) is brought up once and torn down at the end; every point is
`gridready -i <fleet> certify --force --json --limit node1..nodeN` with `certification.parallel: F` written into
the fleet's generated cluster.yml. While a point runs, the controller's processes under it (ansible-playbook and
its forked workers, the SSH clients and the ControlPersist masters of this fleet) are sampled every 0.2 s: private
memory (smaps_rollup), open files (/proc/<pid>/fd).

The model fitted (least squares over the points): T(N, F) = T0 + ceil(N / F) x t_wave + N x c_node, where
t_wave is the time of one wave of probes (copy, probe, fetch: the per-node probe time when nodes run side by side),
and c_node the controller's serial cost per node probed (its forks' module runs share the controller's cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sandbox import paths  # noqa: E402
from sandbox.testfleet import Fleet, start_fleet  # noqa: E402

SAMPLE_S = 0.2


def _private_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(m) for m in re.findall(r"^Private_(?:Clean|Dirty):\s+(\d+) kB", text, re.M))


def _open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(entry)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return out


class Sampler(threading.Thread):
    """The controller's processes of one certify run: ansible-playbook (the main process and its forked workers),
    the SSH clients it starts and the ControlPersist masters (re-parented away from it, found by the fleet's key)."""

    def __init__(self, root: int, fleet_key: str) -> None:
        super().__init__(daemon=True)
        self.root, self.key = root, fleet_key
        self.samples: list[dict[str, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            procs = _processes()
            under = {self.root}
            for _ in range(8):  # descendants, a few generations deep
                under |= {p for p, (pp, _) in procs.items() if pp in under}
            playbook = [p for p in under if "ansible-playbook" in procs[p][1]]
            main = [p for p in playbook if procs[p][0] not in playbook]
            workers = [p for p in playbook if p not in main]
            ssh = [p for p, (_, cmd) in procs.items() if cmd.startswith("ssh ") and self.key in cmd]
            self.samples.append({
                "workers": len(workers), "ssh": len(ssh),
                "workers_private_kib": sum(_private_kib(p) for p in workers),
                "main_private_kib": sum(_private_kib(p) for p in main),
                "ssh_private_kib": sum(_private_kib(p) for p in ssh),
                "open_files": sum(_open_files(p) for p in [*playbook, *ssh]),
                "main_open_files": sum(_open_files(p) for p in main),
            })


def set_parallel(inv: Path, forks: int) -> None:
    cluster = inv / "cluster.yml"
    text = re.sub(r"(?m)^  parallel: \d+\n", "", cluster.read_text())
    cluster.write_text(re.sub(r"(?m)^certification:\n", f"certification:\n  parallel: {forks}\n", text, count=1))


def point(fleet: Fleet, n: int, forks: int, artifacts: Path) -> dict[str, Any]:
    set_parallel(fleet.inventory, forks)
    hosts = fleet.names[:n]
    env = {**os.environ, "GRIDREADY_ARTIFACTS": str(artifacts), "CI": "1"}
    cmd = [str(Path(sys.executable).parent / "gridready"), "-i", str(fleet.inventory), "certify", "--force",
           "--json", "--limit", ",".join(hosts)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid, str(paths.fleet_dir(fleet.name)))
    sampler.start()
    out, err = proc.communicate(timeout=900)
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    try:
        summary = json.loads(out)
    except json.JSONDecodeError:
        raise SystemExit(f"certify of {n} nodes at {forks} forks printed no summary (exit {proc.returncode}): "
                         f"{err[-2000:]}") from None
    stage = artifacts / summary["customer"] / summary["run_id"] / "certify"
    probe_s = []
    for h in hosts:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            probe_s.append(float(json.loads((stage / "probes" / h / "probe.json").read_text())["wall_s"]))
    busy = [s for s in sampler.samples if s["workers"]]
    peak = max(busy, key=lambda s: (s["workers"], s["workers_private_kib"]), default=None)
    per_worker = [s["workers_private_kib"] / s["workers"] for s in busy]
    return {
        "nodes": n, "forks": forks, "exit_code": proc.returncode, "wall_s": round(wall, 2),
        "playbook_s": summary.get("data", {}).get("playbook_seconds"),
        "stage_s": summary.get("seconds"),
        "probe_s_mean": round(sum(probe_s) / len(probe_s), 2) if probe_s else None,
        "probe_s_max": max(probe_s) if probe_s else None,
        "peak_workers": peak["workers"] if peak else 0,
        "peak_ssh": max((s["ssh"] for s in sampler.samples), default=0),
        "mib_per_worker_mean": round(sum(per_worker) / len(per_worker) / 1024, 1) if per_worker else None,
        "mib_per_worker_max": round(max(per_worker) / 1024, 1) if per_worker else None,
        "mib_main": round(max((s["main_private_kib"] for s in sampler.samples), default=0) / 1024, 1),
        "mib_per_ssh": round(max((s["ssh_private_kib"] / s["ssh"] for s in sampler.samples if s["ssh"]),
                                 default=0) / 1024, 1),
        "open_files_peak": max((s["open_files"] for s in sampler.samples), default=0),
        "open_files_main": max((s["main_open_files"] for s in sampler.samples), default=0),
        "loadavg_after": round(os.getloadavg()[0], 2),
    }


def fit(rows: list[dict[str, Any]], key: str = "wall_s") -> dict[str, float]:
    """T0, t_wave, c_node of T = T0 + ceil(N / F) t_wave + N c_node by least squares, and the worst residual."""
    import numpy as np

    a = np.array([[1.0, math.ceil(r["nodes"] / r["forks"]), r["nodes"]] for r in rows])
    y = np.array([r[key] for r in rows])
    (t0, wave, node), *_ = np.linalg.lstsq(a, y, rcond=None)
    worst = float(np.max(np.abs(a @ np.array([t0, wave, node]) - y)))
    return {"T0_s": round(float(t0), 2), "t_wave_s": round(float(wave), 2), "c_node_s": round(float(node), 3),
            "worst_residual_s": round(worst, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3, 6, 12])
    ap.add_argument("--forks", type=int, nargs="+", default=[1, 3, 12])
    ap.add_argument("--repeat", type=int, default=1, help="points measured this many times each, in turn")
    ap.add_argument("--json", default=None, help="write the points and the fit here")
    ap.add_argument("--refit", default=None, help="no fleet: fit the points of an earlier run's output (its JSON "
                                                  "lines, one per point, as printed)")
    a = ap.parse_args()
    if a.refit:
        rows = [json.loads(line) for line in Path(a.refit).read_text().splitlines() if line.startswith("{")]
        report({"rows": rows, "fit_wall": fit(rows), "fit_playbook": fit(rows, "playbook_s")}, a.json)
        return 0
    t0 = time.monotonic()
    fleet = start_fleet(max(a.sizes), prefix="fanout", healthy=True)
    up = time.monotonic() - t0
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="fanout-") as tmp:
            for _ in range(a.repeat):
                for n, f in ((n, f) for n in a.sizes for f in a.forks if f <= n):
                    rows.append(point(fleet, n, f, Path(tmp)))
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        fleet.down()
    report({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
            "bring_up_s": round(up, 1), "rows": rows, "fit_wall": fit(rows), "fit_playbook": fit(rows, "playbook_s")},
           a.json)
    return 0


def report(result: dict[str, Any], out: str | None) -> None:
    rows = result["rows"]
    if out:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
    print("| nodes | forks | certify wall s | playbook s | probe s (mean) | workers | MiB/worker | open files |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['nodes']} | {r['forks']} | {r['wall_s']} | {r['playbook_s']} | {r['probe_s_mean']} | "
              f"{r['peak_workers']} | {r['mib_per_worker_mean']} | {r['open_files_peak']} |")
    print("fit (wall):", result["fit_wall"], "fit (playbook):", result["fit_playbook"])


if __name__ == "__main__":
    sys.exit(main())
