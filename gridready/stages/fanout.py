"""The certify fan-out (certification.parallel = Ansible forks) against what the controller can hold, checked
before any probe starts: not a run that dies half way with "Too many open files" or a killed worker.

Per node probed at once, the controller holds one forked Ansible worker (a copy of ansible-playbook, its resident
memory mostly shared until written; MIB_PER_FORK is the private part we budget) and one SSH client with its
ControlMaster socket (ansible.cfg: ControlPersist=60s keeps each master open a minute after its last task), each
costing open files in the controller's processes (FILES_PER_FORK: the worker's result pipes and the SSH pipes and
socket). Too few open files stops certify before it starts (exit 2); too little memory available now is a warning
in the summary (it changes from minute to minute). The figures are budgets from those mechanisms, not measured on
a large controller: docs/benchmarks.md says which are measured and which are modelled.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

from gridready.errors import InvalidInput

FILES_PER_FORK = 8  # worker pipes (result queue, stdin/stdout) + ssh client pipes + control socket
FILES_BASE = 256  # ansible-playbook itself, its plugins and logs
MIB_PER_FORK = 60  # private memory of one forked worker running a module over SSH (budget)
MIB_BASE = 1024  # ansible-playbook, the judge and the reports (docs/benchmarks.md: ~1 GiB at 10,000 nodes)


@dataclass(frozen=True)
class Controller:
    open_files: int  # soft RLIMIT_NOFILE
    available_mib: int | None  # MemAvailable, None where unknown


def this_controller() -> Controller:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return Controller(open_files=soft if soft != resource.RLIM_INFINITY else 1 << 30,
                      available_mib=_available_mib())


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
    if c.available_mib is not None and mib > c.available_mib:
        return [f"warning: {where}: {parallel} nodes at once need about {mib} MiB on the controller "
                f"({MIB_PER_FORK} MiB per Ansible worker), {c.available_mib} MiB available now: lower it to "
                f"{max(1, (c.available_mib - MIB_BASE) // MIB_PER_FORK)} or run the probes on the fleet's scheduler "
                "(docs/benchmarks.md, 'Fan-out')"]
    return []
