"""A driver bump rolled over a serving 3-node sandbox fleet under steady requests through the router (issue 45's
acceptance): every node drained, upgraded, rebooted and re-certified before it serves again; failed requests
counted; time per node and in total.

    sudo env PYTHONPATH=$PWD .venv/bin/python benchmarks/rolling_provision.py \\
        [--batch 1] [--clients 2] [--router-on-head] [--no-tier-routers] [--out FILE.json]

Steps: a fleet of 3 healthy SIMULATED GPU hosts and a router host comes up (sandbox.testfleet.start_fleet: node4
moves into an inventory group `routers` of its own, serving.router.hosts: [node4]; `--router-on-head` leaves it out
and the router on the serving head); its inventory is shaped as tests/e2e/test_rolling_provision.py shapes it (one
vLLM tier, a replica of tensor_parallel 8 per node, the router on with a tier router in front of the tier's
replicas, which a drain reaches through its worker API without restarting anything (`--no-tier-routers`: LiteLLM
alone, re-configured and restarted at every drain and return), the driver pinned to the sandbox repository's
previous release, 580.95.05, reboots allowed); `provision certify serve` runs; then the pin goes to the current
release, 580.159.04 (sandbox/sim/versions.json: the repository serves both), and `provision --batch N` rolls it
while `--clients` loops send chat requests through the router, one at a time each. Afterwards, from the artifacts:
per node from roll.json its batch, whether it rebooted, the gates re-certified and its seconds; from the ledger's
history that its certification came after its drain and before its return; each node's driver as nvidia-smi reports
it; every request that did not answer 200, with the node whose batch was under way. One JSON document on stdout (and
--out); docs/provision.md records it by hand. The fleet goes down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready import vault  # noqa: E402
from sandbox.testfleet import start_fleet  # noqa: E402
from tests.e2e.test_rolling_provision import CURRENT, PREVIOUS, pin, router_host, set_router, shape  # noqa: E402


def gridready(inv: Path, artifacts: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRIDREADY_INVENTORY": str(inv), "GRIDREADY_ARTIFACTS": str(artifacts), "CI": "1",
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, check=False, timeout=3600)


def chat(url: str, key: str, model: str) -> int:
    req = urllib.request.Request(
        url + "/v1/chat/completions", method="POST",
        data=json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status if json.loads(resp.read())["choices"][0]["message"]["content"] else 0
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return 0


class Load:
    """`clients` loops sending one request after another until stopped; each request as (start, end, status)."""

    def __init__(self, url: str, key: str, model: str, clients: int) -> None:
        self.url, self.key, self.model = url, key, model
        self.done: list[tuple[float, float, int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(clients)]

    def loop(self) -> None:
        while not self.stop.is_set():
            t0 = time.time()
            code = chat(self.url, self.key, self.model)
            self.done.append((t0, time.time(), code))

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=180)


def ordered(history: list[dict[str, Any]], node: str) -> bool:
    """The node's ledger history in the roll: drained, then a certify run's verdict (certified), and only then
    returned (undrained)."""
    mine = [h for h in history if h["node"] == node]
    drained = next((i for i, h in enumerate(mine) if h["after"] == "drained" and "rolling" in h["reason"]), None)
    if drained is None:
        return False
    later = list(enumerate(mine))[drained + 1:]
    certified = next((i for i, h in later if h["source"].startswith("certify ") and h["after"] == "certified"), None)
    returned = next((i for i, h in later if h["before"] == "drained" and h["after"] != "drained"), None)
    # a certify run that certifies a drained node records drained -> certified: that entry is its return too
    return certified is not None and returned is not None and certified <= returned


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="1")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--router-on-head", action="store_true", help="no router host: the router on the serving head")
    ap.add_argument("--no-tier-routers", action="store_true", help="LiteLLM alone in front of the replicas")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    # a `timeout` or a kill by hand still brings the fleet down (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    fleet = start_fleet(3 if args.router_on_head else 4, healthy=True, prefix="roll")
    gpu_nodes = ["node1", "node2", "node3"]
    try:
        shape(fleet.inventory, 3, PREVIOUS)
        if args.router_on_head:
            set_router(fleet.inventory, hosts=[], tier_routers=not args.no_tier_routers)
        else:
            router_host(fleet.inventory, "node4", tier_routers=not args.no_tier_routers)
        artifacts = Path(tempfile.mkdtemp(prefix=f"{fleet.name}-artifacts-"))
        first = gridready(fleet.inventory, artifacts, "provision", "certify", "serve")
        if first.returncode != 0:
            sys.stderr.write(first.stderr[-4000:])
            return 1
        served_s = time.monotonic() - t0
        serve = json.loads(max(artifacts.glob("*/*/serve/summary.json"), key=lambda p: p.stat().st_mtime)
                           .read_text())
        (model,) = serve["data"]["router"]["routes"]
        key = vault.read(fleet.name, fleet.inventory)["vault_gridready_router_key_sandbox"]
        pin(fleet.inventory, CURRENT)
        with Load(serve["data"]["router"]["url"], key, model, args.clients) as load:
            time.sleep(10)  # steady before the roll
            r0 = time.time()
            rolled = gridready(fleet.inventory, artifacts, "provision", "--batch", args.batch)
            r1 = time.time()
            time.sleep(10)
        customer = json.loads(max(artifacts.glob("*/*/provision/summary.json"),
                                  key=lambda p: p.stat().st_mtime).read_text())["customer"]
        roll = json.loads((artifacts / customer / "roll.json").read_text())
        history = json.loads((artifacts / customer / "ledger.json").read_text())["history"]
        query = "nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1"
        drivers = {n: fleet.ssh(n, query, check=False).stdout.strip() for n in gpu_nodes}
        failed = [{"sent": round(s - r0, 1), "status": c} for s, _, c in load.done if c != 200]
        during = [(s, e) for s, e, _ in load.done if r0 <= s <= r1]
        flags = [*(["--router-on-head"] if args.router_on_head else []),
                 *(["--no-tier-routers"] if args.no_tier_routers else [])]
        doc = {
            "command": " ".join(["benchmarks/rolling_provision.py", "--batch", args.batch, "--clients",
                                 str(args.clients), *flags]),
            "router": {"hosts": [] if args.router_on_head else ["node4"], "tier_routers": not args.no_tier_routers,
                       "url": serve["data"]["router"]["url"]},
            "simulated": "sandbox fleet: SIMULATED GPUs, driver packages and engines; real Ansible, systemd, reboots "
                         "(systemd-nspawn), router",
            "roll_exit": rolled.returncode, "roll_stderr_tail": rolled.stderr[-1500:],
            "setup_s": round(served_s, 1), "roll_s": round(r1 - r0, 1),
            "nodes": {n: {"batch": r["batch"], "rebooted": r["rebooted"], "gates": r["gates"] if r["gates"] is not None
                          else "none", "seconds": r["seconds"], "step": r["step"], "driver": drivers.get(n),
                          "certified_after_drain": ordered(history, n)} for n, r in roll["nodes"].items()},
            "requests": len(load.done), "requests_during_roll": len(during),
            "slowest_request_s": round(max((e - s for s, e in during), default=0.0), 2),
            "failed_requests": len(failed), "failed": failed[:50],
        }
        text = json.dumps(doc, indent=2)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return 0 if rolled.returncode == 0 and not failed else 3
    finally:
        fleet.down()


if __name__ == "__main__":
    raise SystemExit(main())
