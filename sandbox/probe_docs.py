"""Probe documents of simulated nodes without booting any host: the simulated tools (sandbox.sim) run
in-process for one hardware profile each, and their outputs go through the probe's own parsers
(gridready.probe.offline), so a fleet of any size can be judged and reported on the controller alone.
Used by benchmarks/certify_fleet.py and the report tests. Every document carries the simulator's markers."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gridready.probe import nvsmi, offline
from sandbox.profile import Fault, HardwareProfile
from sandbox.sim import dcgmi, dmesg, nccl_tests, nvidia_smi, sdc, simcore

NCCL_ARGS = ["-b", str(1 << 20), "-e", str(8 << 30), "-f", "2", "-n", "20", "-w", "5", "-c", "1"]
# faults a fleet benchmark spreads over a few nodes (sandbox/profile.py FaultKind)
FAULTS: tuple[dict[str, Any], ...] = (
    {"kind": "pcie_downtrained", "gpu": 3}, {"kind": "nvlink_inactive", "gpu": 1},
    {"kind": "xid", "gpu": 0, "code": 79}, {"kind": "ecc_uncorrectable", "gpu": 2},
    {"kind": "row_remap_pending", "gpu": 5}, {"kind": "hw_slowdown", "gpu": 4},
)


def _run(fn: Callable[..., int], args: list[str], **kw: Any) -> str:
    buf = io.StringIO()
    # the tools end like their CLIs do (SystemExit); their stderr is not part of the outputs the probe keeps
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        fn(args, **kw)
    return buf.getvalue()


@contextlib.contextmanager
def _profile_env(path: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in (simcore.PROFILE_ENV, "NCCL_NVLS_ENABLE", "GRIDREADY_SIM_WORLD")}
    os.environ[simcore.PROFILE_ENV] = str(path)
    for k in ("NCCL_NVLS_ENABLE", "GRIDREADY_SIM_WORLD"):
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def probe_doc(profile: HardwareProfile, workdir: Path, dcgm_level: int = 3) -> dict[str, Any]:
    """The probe document of one simulated node: nvidia-smi (query, -q, nvlink), dmesg, dcgmi diag -r <level> -j,
    all_reduce_perf and the SDC step's digests, each the simulator's output for this profile."""
    path = profile.write(workdir / f"{profile.host}.json")
    gpus = str(profile.gpus)
    with _profile_env(path):
        outputs = {
            "nvidia_smi_query": _run(nvidia_smi.main, [f"--query-gpu={nvsmi.QUERY_FIELDS}", "--format=csv"]),
            "nvidia_smi_q": _run(nvidia_smi.main, ["-q"]),
            "nvidia_smi_nvlink_s": _run(nvidia_smi.main, ["nvlink", "-s"]),
            "nvidia_smi_nvlink_e": _run(nvidia_smi.main, ["nvlink", "-e"]),
            "kernel_log": _run(dmesg.main, []),
            "dcgmi_diag": _run(dcgmi.main, ["diag", "-r", str(dcgm_level), "-j"]),
            "all_reduce_perf": _run(nccl_tests.main, [*NCCL_ARGS, "-g", gpus], prog="all_reduce_perf"),
            "sdc": _run(sdc.main, []),  # SIMULATED digests in the probe's sdc JSON (sandbox/sim/sdc.py)
        }
    doc = offline.doc_from_outputs(outputs, host=profile.host, dcgm_level=dcgm_level,
                                   modules=["nvidia", "nvidia_peermem"], cmdline="iommu=pt", iommu_groups=0)
    doc["system"]["simulated_sysfs"] = True
    return doc


def fleet_docs(n: int, faulted_every: int = 50) -> Iterator[tuple[str, dict[str, Any]]]:
    """(host, probe document) for `n` simulated HGX H200 nodes; node 7 of every `faulted_every` carries one fault
    of FAULTS in turn."""
    with tempfile.TemporaryDirectory() as td:
        for i in range(n):
            host = f"gpu{i:04d}"
            faulted = i % faulted_every == min(7, faulted_every - 1)
            faults = [Fault(**FAULTS[(i // faulted_every) % len(FAULTS)])] if faulted else []
            yield host, probe_doc(HardwareProfile.sample(host, faults=faults), Path(td))
