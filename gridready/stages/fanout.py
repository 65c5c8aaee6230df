"""The certify fan-out (certification.parallel = Ansible forks) against what the controller can hold, checked
before any probe starts: not a run that dies half way with "Too many open files" or a killed worker.

Per node probed at once, the controller holds one forked Ansible worker (a copy of ansible-playbook, its resident
memory mostly shared until written; MIB_PER_FORK is the private part we budget) and one SSH client with its
ControlMaster socket (ansible.cfg: ControlPersist=60s keeps each master open a minute after its last task), each
costing open files in the controller's processes (FILES_PER_FORK: the worker's result pipes and the SSH pipes and
socket). Too few open files stops validate and certify before anything starts (exit 2); too little memory
available now is a warning in certify's summary (it changes from minute to minute).

The figures are measured on sandbox fleets of up to 12 nodes at up to 12 forks (benchmarks/certify_fanout.py,
docs/benchmarks.md 'Fan-out: measured on the sandbox'), with a margin: the limit that binds is the open files of
ansible-playbook's main process (RLIMIT_NOFILE is per process; each worker and SSH client has its own), 12 at one
fork and 56 at 12 forks, 3.7 per fork; a worker's private memory was 14-21 MiB on average, 40 MiB at most, an SSH
client's 1.2 MiB, the main process's 43 MiB.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

from gridready.errors import InvalidInput
from gridready.inventory import Inventory, display_path

FILES_PER_FORK = 5  # in ansible-playbook's main process: a worker's pipes and sentinel (measured 3.7)
FILES_BASE = 64  # ansible-playbook itself, its plugins, callback and logs (measured 12)
MIB_PER_FORK = 45  # a forked worker running a module over SSH (measured at most 40 MiB) and its SSH client
PROCS_PER_FORK = 3  # the worker, its SSH client, the ControlPersist master (which outlives its node's tasks by 60 s)
PROCS_BASE = 64  # ansible-playbook, ansible-runner, gridready and the user's shell
MIB_BASE = 1024  # ansible-playbook, the judge and the reports (docs/benchmarks.md: ~1 GiB at 10,000 nodes)


@dataclass(frozen=True)
class Controller:
    open_files: int  # soft RLIMIT_NOFILE
    available_mib: int | None  # MemAvailable, None where unknown
    processes: int | None = None  # soft RLIMIT_NPROC (this user's processes), None where unlimited


def this_controller() -> Controller:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    return Controller(open_files=soft if soft != resource.RLIM_INFINITY else 1 << 30,
                      available_mib=_available_mib(),
                      processes=None if nproc == resource.RLIM_INFINITY else nproc)


def _available_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def needs(parallel: int) -> tuple[int, int]:
    """(open files, MiB) the controller needs to probe `parallel` nodes at once."""
    return FILES_BASE + FILES_PER_FORK * parallel, MIB_BASE + MIB_PER_FORK * parallel


def check(parallel: int, where: str, controller: Controller | None = None) -> list[str]:
    """Warnings for the summary (memory: what is available changes from minute to minute), or InvalidInput naming
    `where` (file: key) when the open-file limit, fixed for the run, cannot hold the fan-out."""
    c = controller or this_controller()
    files, mib = needs(parallel)
    if files > c.open_files:
        raise InvalidInput(f"{where}: {parallel} nodes at once need about {files} open files on the controller, "
                           f"which allows {c.open_files} (ulimit -n): raise the limit or lower it to "
                           f"{max(1, (c.open_files - FILES_BASE) // FILES_PER_FORK)}")
    procs = PROCS_BASE + PROCS_PER_FORK * parallel
    if c.processes is not None and procs > c.processes:
        raise InvalidInput(f"{where}: {parallel} nodes at once need about {procs} processes on the controller (an "
                           f"Ansible worker, an SSH client and its ControlPersist master each), which allows "
                           f"{c.processes} (ulimit -u): raise the limit or lower it to "
                           f"{max(1, (c.processes - PROCS_BASE) // PROCS_PER_FORK)}")
    if c.available_mib is not None and mib > c.available_mib:
        return [f"warning: {where}: {parallel} nodes at once need about {mib} MiB on the controller "
                f"({MIB_PER_FORK} MiB per Ansible worker), {c.available_mib} MiB available now: lower it to "
                f"{max(1, (c.available_mib - MIB_BASE) // MIB_PER_FORK)} or run the probes on the fleet's scheduler "
                "(docs/benchmarks.md, 'Fan-out')"]
    return []


def refuse_unmet(inv: Inventory, controller: Controller | None = None) -> None:
    """validate's check: InvalidInput (one line, exit 2) when the certify playbook's fan-out cannot fit this
    controller's open files; nothing for the Job runner, whose fan-out is the cluster's."""
    if inv.spec.certification.runner == "ansible":
        check(inv.spec.certification.parallel, f"{display_path(inv.path / 'cluster.yml')}: certification.parallel",
              controller)
