"""Simulated `modprobe` for nvidia-peermem only; every other module goes to the real modprobe.

nvidia-peermem registers with ib_register_peer_memory_client, which only the ib_core of MLNX_OFED/DOCA-OFED exports.
Built against the distribution's (inbox) ib_core, the module's init returns -EINVAL and modprobe reports
"could not insert 'nvidia_peermem': Invalid argument" with exit status 1. Sources: NVIDIA open-gpu-kernel-modules,
kernel-open/nvidia-peermem/nvidia-peermem.c (nv_mem_client_init), https://github.com/NVIDIA/open-gpu-kernel-modules;
GPUDirect RDMA, "Using nvidia-peermem" / "Using DMA-BUF", https://docs.nvidia.com/cuda/gpudirect-rdma/index.html;
modprobe(8) for the message and status.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import simcore
from .sysfs import write_tree

REAL = ("/usr/sbin/modprobe", "/sbin/modprobe")
PEERMEM = "nvidia_peermem"


def _names(argv: list[str]) -> list[str]:
    return [a.replace("-", "_") for a in argv if not a.startswith("-")]


def main(argv: list[str]) -> int:
    names = _names(argv)
    if PEERMEM not in names:
        real = next((r for r in REAL if Path(r).exists()), None)
        if real is None:
            sys.stderr.write("modprobe: no real modprobe on this host\n")
            return 1
        os.execv(real, [real, *argv])
    host = simcore.load()
    remove = any(a in ("-r", "--remove") for a in argv)
    if remove:
        simcore.PEERMEM_STATE.unlink(missing_ok=True)
    elif not host.peermem_loadable():
        sys.stderr.write(f"modprobe: ERROR: could not insert '{PEERMEM}': Invalid argument\n")
        return 1
    else:
        simcore.PEERMEM_STATE.parent.mkdir(parents=True, exist_ok=True)
        simcore.PEERMEM_STATE.write_text("loaded by modprobe (gridready-sim)\n")
    # the loaded-module list the probe reads is the simulated /proc/modules
    write_tree(simcore.load(), Path(os.environ.get("GRIDREADY_SYSFS_ROOT") or simcore.SYSFS_ROOT))
    return 0
