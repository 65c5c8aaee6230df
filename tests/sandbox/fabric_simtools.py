"""Put the simulator's fabric tools on sandbox hosts when the simulated NVIDIA packages are not installed yet.

Copies sandbox/sim as the package `gridready_sim` to /usr/lib/gridready-sim (as the packages do), adds
small launchers (mpirun, all_reduce_perf, ibstat, ib_write_bw, nvidia-smi, gridready-sim-sysfs/-fabric), writes
the sysfs tree and starts the fabric agent. Also rewrites a host's profile (faults) for the next scenario.
Hosts that already have `mpirun` are left alone apart from refreshing the sysfs tree.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandbox.profile import HardwareProfile
from sandbox.pytest_plugin import Fleet
from sandbox.sim import simcore

SIM_DIR = simcore.HERE
SYSFS_ROOT = "/var/lib/gridready-sim/sysfs"
LAUNCHERS = {
    "mpirun": ("fabric", "mpirun_main()"),
    "gridready-sim-fabric": ("fabric", "agent_main()"),
    "gridready-sim-sysfs": ("sysfs", "main()"),
    "nvidia-smi": ("nvidia_smi", "main()"),
    **{n: ("nccl_tests", f"main(None, prog={n!r})") for n in ("all_reduce_perf", "all_gather_perf",
                                                              "reduce_scatter_perf")},
    **{n: ("ib", f"main(None, prog={n!r})") for n in ("ibstat", "ib_write_bw", "ibv_devinfo")},
}


def _bundle() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(SIM_DIR.iterdir()):
            if p.is_file() and p.suffix in (".py", ".json", ".txt"):
                tar.add(p, arcname=f"gridready_sim/{p.name}")
        skus = json.dumps(simcore.skus()).encode()
        info = tarfile.TarInfo("gridready_sim/skus.json")
        info.size = len(skus)
        tar.addfile(info, io.BytesIO(skus))
        for name, (mod, call) in LAUNCHERS.items():
            text = (f"#!/usr/bin/python3\nimport sys\nsys.path.insert(0, '/usr/lib/gridready-sim')\n"
                    f"from gridready_sim import {mod}\nsys.exit({mod}.{call})\n").encode()
            info = tarfile.TarInfo(f"bin/{name}")
            info.size, info.mode = len(text), 0o755
            tar.addfile(info, io.BytesIO(text))
    return base64.b64encode(buf.getvalue()).decode()


INSTALL = (
    "set -e; d=$(mktemp -d); base64 -d | tar -xz -C $d; mkdir -p /usr/lib/gridready-sim; "
    "rm -rf /usr/lib/gridready-sim/gridready_sim; mv $d/gridready_sim /usr/lib/gridready-sim/; "
    "install -m 0755 $d/bin/* /usr/local/bin/; rm -rf $d"
)
START_AGENT = (
    "systemctl stop gridready-sim-fabric-test 2>/dev/null || true; systemctl reset-failed gridready-sim-fabric-test "
    "2>/dev/null || true; "
    "systemd-run --unit=gridready-sim-fabric-test /usr/local/bin/gridready-sim-fabric --bind {addr}"
)


def _refresh(fleet: Fleet, host: str) -> None:
    fleet.ssh(host, f"GRIDREADY_SYSFS_ROOT={SYSFS_ROOT} gridready-sim-sysfs >/dev/null")


def ensure_sim_tools(fleet: Fleet) -> None:
    bundle = _bundle()

    def one(host: str) -> None:
        has = fleet.ssh(host, "command -v mpirun && command -v all_reduce_perf", check=False).returncode == 0
        if not has:
            fleet.ssh(host, INSTALL, input=bundle)
            fleet.ssh(host, START_AGENT.format(addr=fleet.addresses[host]))
        _refresh(fleet, host)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, fleet.names))


def set_faults(fleet: Fleet, faults: dict[str, list[dict[str, Any]]]) -> None:
    """Replace every host's injected faults (none for hosts not named) and rewrite its sysfs tree."""

    def one(host: str) -> None:
        prof = json.loads(fleet.ssh(host, "cat /etc/gridready-sim/profile.json").stdout)
        prof["faults"] = faults.get(host, [])
        HardwareProfile.model_validate(prof)  # fail here, not in the simulated tools
        fleet.ssh(host, "cat > /etc/gridready-sim/profile.json", input=json.dumps(prof, indent=2) + "\n")
        _refresh(fleet, host)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, fleet.names))
