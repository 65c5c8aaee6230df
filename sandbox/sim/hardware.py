"""The simulated GPUs' healthy values, the simulator's own witness of NVIDIA's published figures.

The product judges nodes against gridready/catalog.py; the simulator prints what a healthy part shows from this
table, taken from the sources below and never from the product's tables, so that a wrong floor in the catalog
cannot move the simulated node with it (the two may agree: they are two witnesses of the same published figures).
Stdlib only: installed with the simulated tools (gridready_sim) on the sandbox hosts.

Sources (the fixtures are real tool outputs kept in the shared folder; ../../shared/fixtures from the repository):
  DS-H100   NVIDIA H100 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-gpu-resources/h100-datasheet
            (SXM / PCIe / NVL columns: NVLink 900 GB/s SXM, 600 GB/s NVL and PCIe bridge; PCIe Gen5 128 GB/s;
            max TDP up to 700 W SXM, 350-400 W NVL, 300-350 W PCIe)
  DS-H200   NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/ (SXM: NVLink
            900 GB/s, PCIe Gen5 128 GB/s, max TDP up to 700 W)
  PCI-IDS   The PCI ID Repository, https://pci-ids.ucw.cz/read/PC/10de: 2330 GH100 [H100 SXM5 80GB],
            2331 GH100 [H100 PCIe], 2321 GH100L [H100 NVL], 2335 GH100 [H200 SXM 141GB]
  H200x2    fixtures/h200x2 (2 x H200 SXM in a VM): nvidia-smi -q (Max Clocks SM 1980 MHz, Memory 3201 MHz; power
            limit 700 W), nvidia-smi nvlink -s (18 links x 26.562 GB/s), sysfs-pci-links (32.0 GT/s x16),
            all_reduce_perf -g 2 (347 GB/s busbw at the largest sizes)
  H200x1    fixtures/h200x1 (1 x H200 passed through): fabric state N/A, `nvidia-smi nvlink -s` prints nothing
  H100-Q    fixtures/public/nvidia-smi/nvidia-smi-q__8xH100-SXM__drv565.57.01__thamada.txt: Max Clocks 1980 / 2619 MHz,
            PCIe Gen5 x16, Fabric State Completed/Success, 700 W
  H100-NVL  fixtures/public/nvidia-smi/nvidia-smi-nvlink-s-i0__H100-SXM__18x26.562GBps-ok__unresolved-repo.txt
  NT-290    NVIDIA/nccl-tests issue 290 (fixtures/public/nccl-tests): 8 x H100 NVLS all_reduce busbw 476.5 GB/s, "in
            the expected range for H100" (maintainer)
  NT-212    NVIDIA/nccl-tests issue 212, https://github.com/NVIDIA/nccl-tests/issues/212: NVLink4 "effective NVLink
            bandwidth of 370GB/s, which you can observe as BusBw when running non-allreduce operations", 8 x H100
  MLENG     stas00/ml-engineering network/README.md, https://github.com/stas00/ml-engineering/blob/master/network/
            README.md: 8 x H200 nccl-tests 16 GiB busbw all_gather 361.4, reduce_scatter 362.9; ring all_reduce 370
  GTC25     NVIDIA GTC 2025 S72583, "All-to-all Communication Bandwidth": NVLink4 (H100) alltoall busbw 320 GB/s
  FMUG      NVIDIA Fabric Manager User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide:
            NVSwitch systems (HGX 8-GPU), full passthrough and shared-NVSwitch partitions of 1/2/4/8 GPUs
  HGX4      DS-H100/DS-H200 HGX 4-GPU form factor: GPUs joined by NVLink without NVSwitch
"""

from __future__ import annotations

import copy
from typing import Any

# NVLink4 as nvidia-smi reports it: 26.562 GB/s per link (H200x2, H100-NVL); 18 links per SXM GPU (DS-H100, DS-H200:
# 900 GB/s = 18 x 50 GB/s both directions). The PCIe/NVL bridge: 600 GB/s both directions = 12 links x 25 GB/s.
NVLINK4_SXM_LINK_GBPS = 26.5625
NVLINK4_BRIDGE_LINK_GBPS = 25.0


def _bus(gpus: int, algo: str, reference_gbps: float, collective: str = "all_reduce") -> dict[str, Any]:
    """A healthy nccl-tests busbw (GB/s) inside one node: what the simulated all_reduce_perf & co. print."""
    return {"gpus": gpus, "algo": algo, "collective": collective, "reference_gbps": reference_gbps}


# NVLink4 SXM boards (H100 and H200 alike): busbw at the largest message sizes
_SXM_BUSBW = [
    _bus(2, "ring", 313.0, "all_gather"),  # H200x2 nccl-tests 2.19.6, lent 2 x H200 (issue 17)
    _bus(2, "ring", 296.0, "reduce_scatter"),  # same run
    _bus(2, "ring", 366.0, "sendrecv"),  # same run
    _bus(8, "ring", 361.4, "all_gather"), _bus(8, "nvls", 361.4, "all_gather"),  # MLENG (NCCL runs it on Ring)
    _bus(8, "ring", 362.9, "reduce_scatter"), _bus(8, "nvls", 362.9, "reduce_scatter"),  # MLENG
    _bus(8, "ring", 320.0, "alltoall"),  # GTC25
    _bus(8, "ring", 370.0, "sendrecv"),  # NT-212
    _bus(2, "ring", 347.0),  # H200x2 all_reduce_perf
    _bus(4, "ring", 356.0),  # between the 2- and 8-GPU figures (no published 4-GPU ring figure)
    _bus(8, "ring", 367.0),  # MLENG / NT-212: 365.6-370
    _bus(8, "nvls", 476.5),  # NT-290
]
# PCIe cards: a bridged pair, 600 GB/s bridge (DS-H100); ~260 GB/s busbw, the bridge's 300 GB/s one way less NCCL's
# protocol overhead as on NVLink4 (347 of 478 raw on SXM pairs, H200x2)
_BRIDGE_BUSBW = [_bus(2, "ring", 260.0)]


def _shape(gpus: int, platform: str, nvswitch: bool, nvlink_links: int) -> dict[str, Any]:
    return {"gpus": gpus, "platform": platform, "nvswitch": nvswitch, "nvlink_links": nvlink_links}


# How each part is sold as a node (FMUG, HGX4, H200x1, DS-H100): GPUs, platform, NVSwitch reachable, links exposed
_HGX_SHAPES = [
    _shape(8, "baremetal", True, 18),  # FMUG: HGX 8-GPU baseboard with NVSwitch
    _shape(4, "baremetal", False, 18),  # HGX4: 4 GPUs joined directly, 6 links to each peer
    _shape(8, "passthrough", True, 18),  # FMUG: full passthrough / 8-GPU partition
    _shape(4, "passthrough", True, 18),  # FMUG: 4-GPU partition
    _shape(2, "passthrough", True, 18),  # H200x2 (NV18, fabric Completed/Success); FMUG 2-GPU partition
    _shape(1, "passthrough", False, 0),  # H200x1: fabric N/A, no NVLinks printed
    _shape(2, "slice", True, 18), _shape(4, "slice", True, 18),  # FMUG: GPUs of the board on bare metal
]
_PCIE_SHAPES = [
    _shape(1, "baremetal", False, 0), *(_shape(n, "baremetal", False, 12) for n in (2, 4, 8)),  # DS-H100 bridge
    _shape(1, "passthrough", False, 0), _shape(2, "passthrough", False, 12),
]

SKUS: dict[str, dict[str, Any]] = {
    "H100-SXM5-80GB": {
        "device_id": "0x2330",  # PCI-IDS
        "aliases": ["h100", "h100-sxm", "h100-sxm5", "NVIDIA H100 80GB HBM3"],  # H100-Q product name
        "nvlink_links": 18, "nvlink_link_gbps": NVLINK4_SXM_LINK_GBPS, "nvswitch": True,  # DS-H100, H100-NVL
        "pcie_gen": 5, "pcie_width": 16,  # DS-H100 PCIe Gen5; H100-Q Gen5 x16
        "power_limit_w": 700.0,  # DS-H100 SXM up to 700 W; H100-Q
        "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 2619,  # H100-Q Max Clocks
        "nccl": _SXM_BUSBW, "shapes": _HGX_SHAPES,
    },
    "H200-SXM-141GB": {
        "device_id": "0x2335",  # PCI-IDS; H200x2 pci.device_id 0x233510DE
        "aliases": ["h200", "h200-sxm", "NVIDIA H200"],  # H200x2 product name
        "nvlink_links": 18, "nvlink_link_gbps": NVLINK4_SXM_LINK_GBPS, "nvswitch": True,  # DS-H200, H200x2
        "pcie_gen": 5, "pcie_width": 16,  # H200x2 sysfs 32.0 GT/s x16
        "power_limit_w": 700.0,  # DS-H200 up to 700 W; H200x2 power.limit
        "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201,  # H200x2 Max Clocks
        "nccl": _SXM_BUSBW, "shapes": _HGX_SHAPES,
    },
    "H100-NVL-94GB": {
        "device_id": "0x2321",  # PCI-IDS
        "aliases": ["h100-nvl"],
        "nvlink_links": 12, "nvlink_link_gbps": NVLINK4_BRIDGE_LINK_GBPS, "nvswitch": False,  # DS-H100 NVL bridge
        "pcie_gen": 5, "pcie_width": 16,  # DS-H100 NVL PCIe Gen5 128 GB/s
        "power_limit_w": 400.0,  # DS-H100 NVL 350-400 W
        "max_sm_clock_mhz": 1785,  # derived from DS-H100 NVL's dense peaks (the datasheet prints no clock)
        "max_mem_clock_mhz": 2619,  # assumed the SXM part's HBM3 clock (H100-Q): no real output of this part here
        "nccl": _BRIDGE_BUSBW, "shapes": _PCIE_SHAPES,
    },
    "H100-PCIe-80GB": {
        "device_id": "0x2331",  # PCI-IDS
        "aliases": ["h100-pcie"],
        "nvlink_links": 12, "nvlink_link_gbps": NVLINK4_BRIDGE_LINK_GBPS, "nvswitch": False,  # DS-H100 PCIe bridge
        "pcie_gen": 5, "pcie_width": 16,  # DS-H100 PCIe Gen5 128 GB/s
        "power_limit_w": 350.0,  # DS-H100 PCIe 300-350 W
        "max_sm_clock_mhz": 1755,  # derived from DS-H100 PCIe's dense peaks (the datasheet prints no clock)
        "max_mem_clock_mhz": 1593,  # HBM2e at 2 TB/s (DS-H100 PCIe); no real output of this part here
        "nccl": _BRIDGE_BUSBW, "shapes": _PCIE_SHAPES,
    },
}


def skus() -> dict[str, dict[str, Any]]:
    """A copy of the table (callers adjust a SKU to its node's shape)."""
    return copy.deepcopy(SKUS)


def lookup(key: str) -> tuple[str, dict[str, Any]] | None:
    """(name, facts) by name or alias (any case) or PCI device id (`0x2335`, `2335`, nvidia-smi's `0x233510DE`)."""
    k = key.strip().lower()
    for name, facts in SKUS.items():
        if k in {name.lower(), *(a.lower() for a in facts["aliases"])}:
            return name, facts
    hexpart = k.removeprefix("0x")
    if len(hexpart) == 8:  # device id then vendor id
        hexpart = hexpart[:4]
    return next(((n, f) for n, f in SKUS.items() if f["device_id"] == f"0x{hexpart}"), None)


def known_keys() -> list[str]:
    return sorted([f["device_id"] for f in SKUS.values()] + list(SKUS))


def shape(name: str, gpus: int, platform: str) -> dict[str, Any] | None:
    return next((s for s in SKUS[name]["shapes"] if s["gpus"] == gpus and s["platform"] == platform), None)


def shape_names(name: str) -> str:
    return ", ".join(f"{s['gpus']} GPU{'s' if s['gpus'] > 1 else ''} {s['platform']}" for s in SKUS[name]["shapes"])
