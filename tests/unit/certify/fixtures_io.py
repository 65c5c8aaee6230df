"""Fixture readers shared by the certification, probe and report tests (real outputs from ../shared/fixtures)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gridready.probe.offline import doc_from_outputs
from gridready.spec import NodeGroup
from gridready.spec.certification import CertificationSpec

FIX = Path(__file__).resolve().parents[2] / "fixtures"
H200 = FIX / "h200x2"
PUB = FIX / "public"


def read(rel: str) -> str:
    return (FIX / rel).read_text(errors="replace")


def probe_quick() -> dict[str, Any]:
    """The real probe document from the lent 2x H200 machine (quick profile)."""
    return json.loads((H200 / "probe_quick.json").read_text())


def h200_outputs() -> dict[str, str]:
    """Every h200x2 capture as probe outputs; `nvidia-smi nvlink -e` from the real probe run on that machine."""
    return {
        "nvidia_smi_query": (H200 / "nvidia-smi-query-gpu.csv").read_text(),
        "nvidia_smi_q": (H200 / "nvidia-smi-q.txt").read_text(),
        "nvidia_smi_nvlink_s": (H200 / "nvidia-smi-nvlink.txt").read_text(),
        "nvidia_smi_nvlink_e": probe_quick()["raw"]["nvidia_smi_nvlink_e"],
        "sysfs_links": (H200 / "sysfs-pci-links.txt").read_text(),
        "all_reduce_perf": (H200 / "all_reduce_perf.txt").read_text(),
        "torch_probe": (H200 / "torch_probe.json").read_text(),
        "kernel_log": probe_quick()["raw"]["kernel_log"],  # the real NVRM lines of that machine: no Xid
    }


def h200_doc(**edits: str) -> dict[str, Any]:
    return doc_from_outputs({**h200_outputs(), **edits}, host="h200x2", modules=["nvidia"], cmdline="quiet")


def group(sku: str = "H200-SXM-141GB", gpus: int = 2, gdr: bool = False, platform: str | None = None) -> NodeGroup:
    """A node group; the h200x2 fixtures come from a VM, so 2 GPUs default to passthrough, 8 to bare metal."""
    plat = platform or ("passthrough" if gpus in (1, 2) and "PCIE" not in sku.upper() and "NVL" not in sku.upper()
                        else "baremetal")
    return NodeGroup.model_validate({"name": "gpu_nodes", "sku": sku, "gpus_per_node": gpus, "gpudirect_rdma": gdr,
                                     "platform": plat})


# The captured probe documents (h200x2, h200x1, public) predate the probe's sdc and goodput steps (issue 30): on them
# those gates are declared n/a (reported skipped, never passed); tests of the new gates use documents that have them.
BEFORE_ISSUE30 = ["sdc", "training_goodput"]


def spec(**kw: Any) -> CertificationSpec:
    base: dict[str, Any] = {"profile": "quick", "not_applicable": ["dcgm"]}
    base.update(kw)
    base["not_applicable"] = [*base["not_applicable"], *(g for g in BEFORE_ISSUE30 if g not in base["not_applicable"])]
    return CertificationSpec(**base)


def pub_path(tool: str, key: str) -> Path:
    """The one public fixture of `tool` whose file name contains `key`."""
    found = [p for p in (PUB / tool).iterdir() if key in p.name]
    assert len(found) == 1, f"{tool}/{key}: {found}"
    return found[0]


def pub(tool: str, key: str) -> str:
    return pub_path(tool, key).read_text(errors="replace")


SIM_TOOLS = {"nvidia-smi": ("nvidia_smi", None), "dcgmi": ("dcgmi", None), "dmesg": ("dmesg", None),
             "lspci": ("lspci", None),
             "all_reduce_perf": ("nccl_tests", "all_reduce_perf")}


def write_sim_tools(bindir: Path) -> Path:
    """Executables named as the real tools that run the simulator's mains: a PATH for a probe run."""
    bindir.mkdir(parents=True, exist_ok=True)
    for tool, (module, prog) in SIM_TOOLS.items():
        call = f"main(sys.argv[1:], prog={prog!r})" if prog else "main(sys.argv[1:])"
        (bindir / tool).write_text(f"#!{sys.executable}\nimport sys\nfrom sandbox.sim.{module} import main\n"
                                   f"sys.exit({call})\n")
        (bindir / tool).chmod(0o755)
    return bindir
