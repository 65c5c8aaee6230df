"""Sandbox fleet timings: bring-up, first playbook run, no-op re-run and teardown for 3, 6 and 12 hosts.

    sudo .venv/bin/python benchmarks/sandbox_bringup.py [--sizes 3 6 12] [--json]

Each size gets its own generated fleet (sandbox.testfleet); the play installs `hello` through the
apt-cacher-ng proxy and writes a file (tests/sandbox/data/fleet_play.yml). The image must be built already
(its build time is reported separately). Results go into docs/sandbox.md by hand, with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox import image
from sandbox.testfleet import start_fleet

PLAY = Path(__file__).resolve().parents[1] / "tests" / "sandbox" / "data" / "fleet_play.yml"


def changed(output: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", output))


def measure(n: int) -> dict[str, float | int]:
    t0 = time.monotonic()
    f = start_fleet(n, prefix="bench")
    up = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        first = f.ansible_playbook(PLAY)
        t2 = time.monotonic()
        second = f.ansible_playbook(PLAY)
        t3 = time.monotonic()
    finally:
        t4 = time.monotonic()
        f.down()
        down = time.monotonic() - t4
    return {"hosts": n, "up_s": round(up, 2), "first_run_s": round(t2 - t1, 1),
            "first_changed": changed(first.stdout), "rerun_s": round(t3 - t2, 1),
            "rerun_changed": changed(second.stdout), "down_s": round(down, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[3, 6, 12])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    img = image.ensure_image()
    meta = json.loads((img.parent / image.OK_MARKER).read_text())
    rows = [measure(n) for n in args.sizes]
    if args.json:
        print(json.dumps({"image_build_s": meta["seconds"], "load": os.getloadavg(), "rows": rows}, indent=2))
        return 0
    print(f"image {meta['key']} (built in {meta['seconds']} s); loadavg before: {os.getloadavg()[0]:.2f}")
    print("| hosts | bring-up | playbook run 1 (changed) | no-op re-run (changed) | teardown |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['hosts']} | {r['up_s']} s | {r['first_run_s']} s ({r['first_changed']}) | "
              f"{r['rerun_s']} s ({r['rerun_changed']}) | {r['down_s']} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
