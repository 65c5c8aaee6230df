"""Converge playbooks/provision.yml on a sandbox fleet once per session; the role suites (test_<role>.py) then check
the end state of every converged host over ssh (testinfra).

The fleet: node1 and node2 are healthy SIMULATED HGX H200 8-GPU hosts; node3's profile shows only 4 GPUs, so its
preflight must stop it while the others carry on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gridready import inventory
from gridready.provision_vars import role_vars
from sandbox import paths
from sandbox.sim import simcore
from sandbox.testfleet import Fleet

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = "playbooks/provision.yml"
SIM_DIR = REPO / "sandbox" / "sim"
GOOD = ["node1", "node2"]
CONVERGED_RECORD = "/var/lib/gridready/converged.json"  # library/gridready_fingerprint.py state_file
BAD = "node3"
# Start profiles (real starting points of a leased host): node1 fresh; node2 with cuda-keyring's entry for the
# NVIDIA repository and DCGM 3.x installed; node4 with the previous release of the branch installed and loaded,
# which provision upgrades to the pinned one without a reboot (NVML mismatch until the reboot).
KEYRING_DCGM3 = "node2"
UPGRADED = "node4"
OLD_DRIVER = json.loads((SIM_DIR / "versions.json").read_text())["driver_previous"]
CONVERGED = [*GOOD, UPGRADED]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def sandbox_vars() -> dict[str, Any]:
    """Settings of the sandbox's SIMULATED world (not in the spec): the simulated sysfs tree, the nccl-tests tarball
    served by the sandbox repository (its checksum from the repository manifest), a build that needs only make,
    and the simulated RDMA tools next to the distribution's rdma-core."""
    with urllib.request.urlopen(paths.REPO_URL + "gridready-sim-manifest.json", timeout=10) as resp:
        manifest = json.load(resp)
    tests = manifest["nccl_tests"]
    sysfs = "/var/lib/gridready-sim/sysfs"
    return {
        "gridready_preflight_sysfs_root": sysfs,
        "gridready_rdma_sysfs_root": sysfs,
        "gridready_fabricmanager_sysfs_root": sysfs,
        "gridready_nccl_tests_url": paths.REPO_URL + tests["filename"],
        "gridready_nccl_tests_checksum": f"sha256:{tests['sha256']}",
        "gridready_nccl_tests_build_packages": ["make"],
        "gridready_nccl_tests_mpi_home": "/usr",
        "gridready_rdma_distro_packages": ["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest",
                                           "gridready-sim-rdma"],
    }


@dataclass
class Run:
    rc: int
    stdout: str
    recap: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, proc: subprocess.CompletedProcess[str]) -> Run:
        recap = {
            m[0]: dict(zip(("ok", "changed", "unreachable", "failed", "skipped"), map(int, m[1:]), strict=True))
            for m in RECAP.findall(proc.stdout)
        }
        return cls(proc.returncode, proc.stdout, recap)

    def changed_tasks(self, host: str) -> list[str]:
        """Task names reported changed on `host` (for a readable idempotence failure)."""
        out, task = [], ""
        for line in self.stdout.splitlines():
            if line.startswith("TASK ["):
                task = line[6:].split("]")[0]
            elif line.startswith(f"changed: [{host}]"):
                out.append(task)
        return out


@dataclass
class Provisioned:
    fleet: Any
    first: Run
    second: Run
    check: Run
    fast: Run | None = None  # a no-op run on the recorded converged state (the fast path)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> role -> facts file
    recorded_by_first: list[str] = field(default_factory=list)  # hosts with a converged record after run 1
    extravars: Path | None = None  # the runs' extra-vars file (-e @file)


def _simulated_sysfs(fleet: Any) -> None:
    """The simulated hardware must be visible before anything is installed (preflight reads it first). Until the
    fleet writes the tree at bring-up, write it here with the simulator's own module (stdlib only)."""
    for host in fleet.names:
        if fleet.ssh(host, "test -e /var/lib/gridready-sim/sysfs/GRIDREADY_SIMULATED", check=False).returncode == 0:
            continue
        files = {name: (SIM_DIR / name).read_text() for name in ("simcore.py", "sysfs.py", "versions.json")}
        files["skus.json"] = json.dumps(simcore.skus())
        script = "\n".join(
            ["set -e", "d=$(mktemp -d)", "mkdir -p $d/gridready_sim", "touch $d/gridready_sim/__init__.py"]
            + [f"cat > $d/gridready_sim/{name} <<'GRIDREADY_EOF'\n{text.rstrip()}\nGRIDREADY_EOF"
               for name, text in files.items()]
            + ["cd $d && python3 -m gridready_sim.sysfs", "rm -rf $d"]
        )
        fleet.ssh(host, "bash -s", input=script)


def _keyring_and_dcgm3(fleet: Any, host: str, *, dcgm3: bool = True) -> None:
    """What cuda-keyring leaves (its own entry for the NVIDIA repository, signed-by its keyring; here the sandbox
    repository and key stand in for NVIDIA's) and a DCGM 3.x installed from it."""
    key = paths.REPO_URL.rsplit("/nvidia/", 1)[0] + "/keys/gridready-sandbox-archive-keyring.gpg"
    script = "\n".join([
        "set -e",
        f"python3 -c 'import urllib.request as u; u.urlretrieve(\"{key}\", "
        "\"/usr/share/keyrings/cuda-archive-keyring.gpg\")'",
        "echo 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + paths.REPO_URL + " /' "
        "> /etc/apt/sources.list.d/cuda-debian12-x86_64.list",
        "apt-get update -q >/dev/null",
        *(["DEBIAN_FRONTEND=noninteractive apt-get install -y -q datacenter-gpu-manager datacenter-gpu-manager-config "
           ">/dev/null"] if dcgm3 else []),
    ])
    fleet.ssh(host, "bash -s", input=script)


def _previous_driver(fleet: Any, host: str) -> None:
    """A host leased with an older driver release of the branch installed (and loaded: its start profile): the
    repository serves both releases, and cluster.yml pins the current one, which provision must upgrade to."""
    _keyring_and_dcgm3(fleet, host, dcgm3=False)
    release = f"{OLD_DRIVER}-1"
    fleet.ssh(host, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                    f"nvidia-kernel-open-dkms={release} nvidia-driver-cuda={release} nvidia-persistenced={release} "
                    ">/dev/null")


@pytest.fixture(scope="session")
def provisioned(make_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provisioned]:
    fleet = make_fleet(4, healthy=True, profiles={BAD: {"gpus": 4}, UPGRADED: {"loaded_driver": OLD_DRIVER}})
    _simulated_sysfs(fleet)
    _keyring_and_dcgm3(fleet, KEYRING_DCGM3)
    _previous_driver(fleet, UPGRADED)
    inv = inventory.load(fleet.inventory)
    extravars = {"gridready_group_vars": {g.name: role_vars(inv.spec, g) for g in inv.spec.node_groups},
                 **sandbox_vars()}
    ev = tmp_path_factory.mktemp("provision") / "extravars.json"
    ev.write_text(json.dumps(extravars))
    good = ",".join(CONVERGED)
    first = Run.of(fleet.ansible_playbook(PLAYBOOK, "-e", f"@{ev}", check=False))
    # the first converge records GOOD (their new module is loaded: the simulated one loads without a reboot);
    # UPGRADED still runs its old module, so it owes a reboot and stays unrecorded
    recorded = [h for h in CONVERGED if fleet.ssh(h, f"test -e {CONVERGED_RECORD}", check=False).returncode == 0]
    # The roles themselves must be idempotent and check-mode clean, not only the fast path that skips them: the
    # second run and the check run with the record set aside, so every role runs; then the record is put back for
    # a fast no-op run of GOOD. -v: the versions are a fact set at the end of the play (the stage reads them from
    # its events); -v prints it
    def aside() -> None:
        for host in CONVERGED:
            fleet.ssh(host, f"test ! -e {CONVERGED_RECORD} || mv {CONVERGED_RECORD} {CONVERGED_RECORD}.kept")

    def back() -> None:
        for host in CONVERGED:
            fleet.ssh(host, f"test ! -e {CONVERGED_RECORD}.kept || mv -f {CONVERGED_RECORD}.kept {CONVERGED_RECORD}")

    aside()
    second = Run.of(fleet.ansible_playbook(PLAYBOOK, "-e", f"@{ev}", "--limit", good, "-v", check=False))
    aside()
    check = Run.of(fleet.ansible_playbook(PLAYBOOK, "-e", f"@{ev}", "--limit", good, "--check", "--diff",
                                          check=False))
    back()
    # GOOD only: UPGRADED owes a reboot (its loaded driver is older than the installed one), so it is never
    # recorded as converged and its roles run on every run until it reboots
    fast = Run.of(fleet.ansible_playbook(PLAYBOOK, "-e", f"@{ev}", "--limit", ",".join(GOOD), check=False))
    for label, run in (("run 1", first), ("run 2", second), ("check", check), ("fast", fast)):
        print(f"provision {label}: rc={run.rc} " + ", ".join(
            f"{h}: changed={r['changed']} failed={r['failed']}" for h, r in sorted(run.recap.items())))
    facts: dict[str, dict[str, Any]] = {}
    for host in GOOD:
        facts[host] = {}
        for role in ("preflight", "nvidia_driver", "fabricmanager", "nccl", "dcgm", "rdma", "container_engine",
                     "container_toolkit", "probe_runtime", "host_tuning"):
            r = fleet.ssh(host, f"cat /etc/gridready/facts.d/{role}.json", check=False)
            facts[host][role] = json.loads(r.stdout) if r.returncode == 0 else {}
    yield Provisioned(fleet, first, second, check, fast, facts, recorded, ev)


@pytest.fixture(scope="session")
def converged_fleet(request: pytest.FixtureRequest) -> Any:
    """The fleet the role suites check: `provisioned`'s, or an already converged one named by
    GRIDREADY_CONVERGED_FLEET (a JSON file with the Fleet fields name, inventory, ssh_config, addresses)."""
    path = os.environ.get("GRIDREADY_CONVERGED_FLEET")
    if path:
        data = json.loads(Path(path).read_text())
        return Fleet(name=data["name"], inventory=Path(data["inventory"]), ssh_config=Path(data["ssh_config"]),
                     addresses=data["addresses"])
    return request.getfixturevalue("provisioned").fleet


@pytest.fixture(params=GOOD)
def node(request: pytest.FixtureRequest, converged_fleet: Any) -> Any:
    """A testinfra Host of one converged sandbox node (node1, node2)."""
    return converged_fleet.host(request.param)
