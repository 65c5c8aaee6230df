"""sysfs / procfs collectors: PCIe endpoint links of GPUs and NICs, IOMMU groups, kernel cmdline, modules, the
CPU's hypervisor flag.

Only ENDPOINTS are read (GPUs: vendor 0x10de class 0x03xx; NICs: class 0x02xx; NVSwitches are listed, never
judged). Switch and root ports are never compared: a switch port that trains below its capability because its
endpoint is slower is benign.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .tools import proc_root, read_text, sysfs_root

_GTS = re.compile(r"([\d.]+)\s*GT/s")
# link rate in GT/s -> PCIe generation
GEN_OF_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def gen_of(speed: str | None) -> int | None:
    """'32.0 GT/s PCIe' -> 5."""
    if not speed:
        return None
    m = _GTS.search(speed)
    return GEN_OF_GTS.get(float(m.group(1))) if m else None


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text.strip(), base) if text is not None else None
    except ValueError:
        return None


def endpoint_kind(vendor: int | None, pci_class: int | None) -> str | None:
    """gpu (NVIDIA, display class 0x03), nic (network class 0x02) or nvswitch: an NVIDIA function of class 0x0680
    ("Bridge", other), as each of the four NVSwitches of an HGX H100 board reads in `lspci -vvv` (`83:00.0 Bridge:
    NVIDIA Corporation Device 22a3`, public capture: leptonai/gpud pkg/pci/testdata/lspci-vvv); its link is not
    judged."""
    if pci_class is None:
        return None
    base = pci_class >> 16
    if vendor == 0x10DE and base == 0x03:
        return "gpu"
    if vendor == 0x10DE and pci_class >> 8 == 0x0680:
        return "nvswitch"
    if base == 0x02:
        return "nic"
    return None


def pci_endpoints() -> list[dict[str, Any]]:
    """GPU and NIC endpoints under <sysfs>/bus/pci/devices with current and max link speed/width."""
    base = os.path.join(sysfs_root(), "bus", "pci", "devices")
    rows: list[dict[str, Any]] = []
    for bdf in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, bdf)

        def rd(name: str, d: str = d) -> str | None:
            t = read_text(os.path.join(d, name))
            return t.strip() if t is not None else None

        vendor, pci_class = _int(rd("vendor"), 16), _int(rd("class"), 16)
        kind = endpoint_kind(vendor, pci_class)
        if kind is None:
            continue
        group = os.path.join(d, "iommu_group")
        cur_speed, max_speed = rd("current_link_speed"), rd("max_link_speed")
        rows.append({
            "bdf": bdf,
            "kind": kind,
            "vendor": f"0x{vendor:04x}" if vendor is not None else None,
            "device": rd("device"),
            "class": f"0x{pci_class:06x}" if pci_class is not None else None,
            "current_speed": cur_speed,
            "max_speed": max_speed,
            "gen_current": gen_of(cur_speed),
            "gen_max": gen_of(max_speed),
            "width_current": _int(rd("current_link_width")),
            "width_max": _int(rd("max_link_width")),
            "numa_node": _int(rd("numa_node")),
            "iommu_group": os.path.basename(os.path.realpath(group)) if os.path.exists(group) else None,
            "source": "sysfs",
        })
    return rows


def parse_sysfs_links_dump(text: str) -> list[dict[str, Any]]:
    """The h200x2 fixture's one-line-per-device dump (`<path> class=.. speed=.. width=..`) -> endpoint rows."""
    rows = []
    pat = re.compile(r"^(\S+) class=(\S+) speed=(.+?) width=(\d+) maxspeed=(.+?) maxwidth=(\d+)")
    for ln in text.splitlines():
        m = pat.match(ln.strip())
        if not m:
            continue
        cls = int(m.group(2), 16)
        rows.append({
            "bdf": os.path.basename(m.group(1)), "kind": endpoint_kind(0x10DE, cls), "vendor": "0x10de",
            "device": None, "class": m.group(2), "current_speed": m.group(3), "max_speed": m.group(5),
            "gen_current": gen_of(m.group(3)), "gen_max": gen_of(m.group(5)),
            "width_current": int(m.group(4)), "width_max": int(m.group(6)), "source": "sysfs",
        })
    return rows


def iommu() -> dict[str, Any]:
    groups = os.path.join(sysfs_root(), "kernel", "iommu_groups")
    n = len(os.listdir(groups)) if os.path.isdir(groups) else 0
    return {"groups": n, "enabled": n > 0}


DMI_KEYS = ("sys_vendor", "product_name", "product_serial", "product_uuid", "board_serial", "board_name")


def dmi() -> dict[str, str | None]:
    """The machine's identity from /sys/class/dmi/id (board and product serials, readable by root): what the
    signed evidence names as the machine that passed; None where a key is absent or unreadable."""
    base = os.path.join(sysfs_root(), "class", "dmi", "id")
    out: dict[str, str | None] = {}
    for key in DMI_KEYS:
        text = read_text(os.path.join(base, key))
        out[key] = text.strip() or None if text is not None else None
    return out


def cmdline() -> str | None:
    t = read_text(os.path.join(proc_root(), "cmdline"))
    return t.strip() if t is not None else None


def modules() -> list[str] | None:
    t = read_text(os.path.join(proc_root(), "modules"))
    return None if t is None else sorted({ln.split()[0] for ln in t.splitlines() if ln.strip()})


# GPUDirect RDMA's peer-memory module: nvidia_peermem (the driver's, since R470), or nv_peer_mem, the older one of
# Mellanox's nv_peer_memory package (https://github.com/Mellanox/nv_peer_memory)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")


def peermem_loaded(mods: list[str] | None) -> bool | None:
    """Whether a peer-memory module is among the loaded `mods`; None where /proc/modules was unreadable."""
    return None if mods is None else any(m in PEERMEM_MODULES for m in mods)


def cpu_hypervisor() -> bool | None:
    """Whether the CPU runs under a hypervisor: the `hypervisor` flag of /proc/cpuinfo (Linux
    arch/x86/include/asm/cpufeatures.h X86_FEATURE_HYPERVISOR, "Running on a hypervisor"); None when unreadable.
    Read where the NVIDIA driver is absent and nvidia-smi cannot say `gpu_virtualization_mode`."""
    t = read_text(os.path.join(proc_root(), "cpuinfo"))
    if t is None:
        return None
    flags = next((ln.split(":", 1)[1].split() for ln in t.splitlines() if ln.startswith("flags")), None)
    return None if flags is None else "hypervisor" in flags


def iommu_mode(cmd: str | None, groups: int) -> str:
    """'off', 'passthrough' or 'translated' from the kernel command line and the group count."""
    args = (cmd or "").split()
    if "iommu=pt" in args or "iommu.passthrough=1" in args:
        return "passthrough"
    if any(a in args for a in ("intel_iommu=off", "amd_iommu=off", "iommu=off")) or groups == 0:
        return "off"
    return "translated"


def simulated() -> bool:
    """A simulated sysfs tree says so: a GRIDREADY_SIMULATED marker file at its root or one level up (a real /sys
    never has one); the report labels such evidence SIMULATED."""
    here = sysfs_root()
    return any(os.path.exists(os.path.join(d, "GRIDREADY_SIMULATED")) for d in (here, os.path.dirname(here)))
