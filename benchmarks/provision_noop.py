"""No-op `playbooks/provision.yml` on converged sandbox fleets of 3, 6 and 12 hosts: before and after, side by side.

    sudo PYTHONPATH=$PWD .venv/bin/python benchmarks/provision_noop.py [--sizes 3 6 12] [--before REV] [--rounds 2]
        [--fleet FLEET.json]  # an already converged fleet (Fleet fields as JSON) instead of new ones
        [--one-fleet]  # one fleet of the largest size, converged once; each size is a run --limit'ed to its first hosts
        [--extra '{"var": value}']  # extra vars for every run, before and after alike
        [--before no-record]  # "before" = the current playbook with the hosts' converged record removed first

Per size: a fleet is generated and converged once with the current playbook (with --one-fleet: one fleet of the
largest size, and each size runs on its first N hosts through --limit, which costs one convergence); then the
playbook and ansible.cfg of
git revision REV ("before") and the current ones ("after") run alternately `--rounds` times on that same fleet, so
both see the same machine load. Each no-op run reports wall time, changed (must be 0), task results per host,
the controller's CPU time (user+sys of ansible-playbook and its workers) and, through
benchmarks/callback_plugins/gridready_timing.py, where the time went per role and per module.
`--before no-record` makes "before" the current playbook and ansible.cfg run after removing each host's converged
record (/var/lib/gridready/converged.json): every role runs, as every no-op run did while ansible-core 2.19's tuple
`ansible_run_tags` kept the record from ever being written. That run records again, so the "after" run that follows
it takes the fast path.
Results go into docs/benchmarks.md by hand, with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready import inventory  # noqa: E402
from gridready.provision_vars import role_vars  # noqa: E402
from sandbox.testfleet import Fleet, start_fleet  # noqa: E402
from tests.roles.conftest import Run, _simulated_sysfs, sandbox_vars  # noqa: E402

CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"


NO_RECORD = "no-record"
RECORD = "/var/lib/gridready/converged.json"  # library/gridready_fingerprint.py state_file


def variant_files(rev: str, tmp: Path) -> tuple[Path, Path]:
    """The provision playbook and ansible.cfg of `rev`, written beside the current ones (imports are relative);
    with rev `no-record`, the current ones."""
    if rev == NO_RECORD:
        return AFTER
    play = REPO / "playbooks" / f".bench-{rev[:12]}-provision.yml"
    play.write_text(subprocess.run(["git", "show", f"{rev}:playbooks/provision.yml"], cwd=REPO, check=True,
                                   capture_output=True, text=True).stdout)
    cfg = tmp / "ansible.cfg"
    cfg.write_text(subprocess.run(["git", "show", f"{rev}:ansible.cfg"], cwd=REPO, check=True,
                                  capture_output=True, text=True).stdout)
    return play, cfg


EXTRA: list[str] = []


def run(fleet: Fleet, play: Path, cfg: Path, extravars: Path, tmp: Path, *args: str) -> dict[str, Any]:
    timing = tmp / "timing.json"
    env = {**fleet.ansible_env(), "ANSIBLE_CONFIG": str(cfg), "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
           "ANSIBLE_CALLBACKS_ENABLED": "gridready_timing", "GRIDREADY_TIMING_OUT": str(timing)}
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.hosts_file), str(play),
           "-e", f"@{extravars}", *EXTRA, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=3600, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = Run.of(proc)
    prof = json.loads(timing.read_text()) if timing.exists() else {}
    print(f"{time.strftime('%H:%M:%S')} {play.name} {' '.join(args)}: rc {r.rc}, {wall:.1f} s, load "
          f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    per_host = prof.get("results_per_host", {})
    return {"rc": r.rc, "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "changed": sum(h["changed"] for h in r.recap.values()),
            "failed": sum(h["failed"] + h["unreachable"] for h in r.recap.values()),
            "tasks_per_host": round(sum(per_host.values()) / max(len(per_host), 1)),
            "by_role": {k: round(v, 1) for k, v in sorted(prof.get("by_role", {}).items(), key=lambda kv: -kv[1])},
            "by_action": {k: round(v, 1) for k, v in
                          sorted(prof.get("by_action", {}).items(), key=lambda kv: -kv[1])[:8]},
            "tail": "" if r.rc == 0 else proc.stdout[-3000:]}


AFTER = (REPO / "playbooks" / "provision.yml", REPO / "ansible.cfg")


def converge(fleet: Fleet, tmp: Path) -> tuple[Path, dict[str, Any]]:
    """The fleet's extra vars (as `invoke provision` builds them) and the converging run of the current playbook."""
    _simulated_sysfs(fleet)
    inv = inventory.load(fleet.inventory)
    ev = tmp / f"extravars-{fleet.name}.json"
    ev.write_text(json.dumps({"gridready_group_vars": {g.name: role_vars(inv.spec, g)
                                                       for g in inv.spec.node_groups}, **sandbox_vars()}))
    return ev, run(fleet, *AFTER, ev, tmp)


def measure(fleet: Fleet, ev: Path, converged: dict[str, Any], n: int, before: tuple[Path, Path], rounds: int,
            tmp: Path) -> dict[str, Any]:
    """Before and after, alternately, on the first n hosts of a converged fleet."""
    limit = ("--limit", ",".join(fleet.names[:n])) if n < len(fleet.names) else ()
    out: dict[str, Any] = {"hosts": min(n, len(fleet.names)), "converge": converged, "before": [], "after": []}
    for _ in range(rounds):
        if before == AFTER:  # --before no-record: every role runs, as before the record condition was fixed
            for host in fleet.names[:n]:
                fleet.ssh(host, f"rm -f {RECORD}")
        out["before"].append(run(fleet, *before, ev, tmp, *limit))
        out["after"].append(run(fleet, *AFTER, ev, tmp, *limit))
    out["after_check"] = run(fleet, *AFTER, ev, tmp, "--check", "--diff", *limit)
    return out


def measure_sizes(sizes: list[int], before: tuple[Path, Path], rounds: int, tmp: Path, *, one_fleet: bool,
                  given: Fleet | None) -> list[dict[str, Any]]:
    if given is not None:
        ev, converged = converge(given, tmp)
        return [measure(given, ev, converged, n, before, rounds, tmp) for n in sizes]
    rows = []
    for fleet_size in [max(sizes)] if one_fleet else sizes:
        fleet = start_fleet(fleet_size, healthy=True, prefix="noop")
        try:
            ev, converged = converge(fleet, tmp)
            rows += [measure(fleet, ev, converged, n, before, rounds, tmp)
                     for n in (sizes if one_fleet else [fleet_size])]
        finally:
            fleet.down()
    return rows


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["wall_s"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[3, 6, 12])
    ap.add_argument("--before", default=NO_RECORD,
                    help="'no-record' (the current playbook without the converged record: every role runs), or a git "
                         "revision of the 'before' playbook and ansible.cfg (55590eb's ansible.cfg no longer reaches "
                         "today's sandbox hosts: its runs end unreachable, rc 4)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write every figure here")
    ap.add_argument("--fleet", type=Path, help="JSON of a converged fleet (name, inventory, ssh_config, addresses)")
    ap.add_argument("--one-fleet", action="store_true",
                    help="one fleet of the largest size; each size runs on its first hosts (--limit)")
    ap.add_argument("--extra", help="extra vars (JSON) for every run")
    args = ap.parse_args()
    # a timeout's SIGTERM unwinds like Ctrl-C, so the fleets this run started are torn down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    if args.extra:
        EXTRA.extend(["-e", args.extra])
    given = None
    if args.fleet:
        d = json.loads(args.fleet.read_text())
        given = Fleet(name=d["name"], inventory=Path(d["inventory"]), ssh_config=Path(d["ssh_config"]),
                      addresses=d["addresses"])
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        before = variant_files(args.before, tmp)
        try:
            sizes = args.sizes if args.sizes != ap.get_default("sizes") or not given else [len(given.names)]
            rows = measure_sizes(sizes, before, args.rounds, tmp, one_fleet=args.one_fleet, given=given)
        finally:
            if before != AFTER:
                before[0].unlink()
    if args.json:
        args.json.write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=1))
    print(f"loadavg after: {os.getloadavg()[0]:.2f}; before = {args.before}; best of {args.rounds} no-op runs")
    print("| hosts | before: wall / CPU / tasks per host | after: wall / CPU / tasks per host | speed-up | "
          "changed before/after/--check |")
    print("|---|---|---|---|---|")
    for r in rows:
        b, a = best(r["before"]), best(r["after"])
        print(f"| {r['hosts']} | {b['wall_s']} s / {b['cpu_s']} s / {b['tasks_per_host']} | {a['wall_s']} s / "
              f"{a['cpu_s']} s / {a['tasks_per_host']} | {b['wall_s'] / max(a['wall_s'], 0.1):.1f} x | "
              f"{b['changed']}/{a['changed']}/{r['after_check']['changed']} |")
    for r in rows:
        print(f"{r['hosts']} hosts, converge {r['converge']['wall_s']} s (rc {r['converge']['rc']}); "
              f"before by role: {best(r['before'])['by_role']}; by module: {best(r['before'])['by_action']}; "
              f"after by role: {best(r['after'])['by_role']}")
        for name, one in [("converge", r["converge"]), ("after_check", r["after_check"]),
                          *(("before", x) for x in r["before"]), *(("after", x) for x in r["after"])]:
            if one["tail"]:
                print(f"--- {name} rc={one['rc']}\n{one['tail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
