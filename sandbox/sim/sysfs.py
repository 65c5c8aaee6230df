"""`gridready-sim-sysfs`: writes the sysfs files the probe reads, for this host's profile, under one root.

Layout under ROOT (default /var/lib/gridready-sim/sysfs; the probe reads it through GRIDREADY_SYSFS_ROOT), as
under /sys unless noted; every file ends with a newline like the kernel's:
  bus/pci/devices/<bdf>/{vendor,device,class,current_link_speed,current_link_width,max_link_speed,
                         max_link_width,numa_node}            GPUs, HCAs, GPU switch ports, a benign Gen4 pair,
                                                               the NVSwitches of a bare-metal HGX 8-GPU board
  class/infiniband/<hca>/{fw_ver,hca_type,board_id,node_guid,device -> bus/pci/devices/<bdf>}
  class/infiniband/<hca>/ports/1/{state,phys_state,rate,link_layer,lid,sm_lid}, counters/*, hw_counters/*
  class/net/<netdev>/{operstate,mtu}
  kernel/iommu_groups/<n>/devices/<bdf> -> bus/pci/devices/<bdf>
  module/nvidia/version, module/nvidia_peermem/initstate
  proc/{cmdline,cpuinfo,modules,driver/nvidia/version}           (a fake /proc: GRIDREADY_PROC_ROOT=ROOT/proc)
  GRIDREADY_SIMULATED                                            (the marker; not in a real /sys)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from . import simcore
from .simcore import Host

COUNTERS = (
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors",
    "port_rcv_data", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
    "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
)  # fmt: skip
HW_COUNTERS = ("out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err")
CPU_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht"
CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=/dev/nvme0n1p2 ro iommu=pt quiet"


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _pci(root: Path, bdf: str, *, vendor: str, device: str, cls: str, cur: tuple[int, int], mx: tuple[int, int],
         numa: int) -> Path:  # fmt: skip
    d = root / "bus/pci/devices" / bdf
    for name, val in {
        "vendor": vendor,
        "device": device,
        "class": cls,
        "current_link_speed": simcore.GEN_SPEED[cur[0]],
        "current_link_width": str(cur[1]),
        "max_link_speed": simcore.GEN_SPEED[mx[0]],
        "max_link_width": str(mx[1]),
        "numa_node": str(numa),
    }.items():
        _w(d / name, val)
    return d


def _rate(hca: simcore.Hca) -> str:
    if not hca.up:
        return "10 Gb/sec (4X SDR)" if hca.link_layer == "InfiniBand" else "40 Gb/sec (4X QDR)"
    if hca.rate >= 400:
        return f"{hca.rate} Gb/sec (4X NDR)"
    if hca.rate == 200 and hca.rate_gbps == 400:
        return "200 Gb/sec (2X NDR)"
    return f"{hca.rate} Gb/sec (4X HDR)" if hca.rate == 200 else f"{hca.rate} Gb/sec (4X EDR)"


def write_tree(host: Host, root: Path) -> Path:
    """Write the whole tree into root (replaced atomically when it exists)."""
    tmp = root.with_name(root.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n = len(host.gpus)
    group = 0

    def iommu(bdf: str) -> None:
        nonlocal group
        link = tmp / "kernel/iommu_groups" / str(group) / "devices" / bdf
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f"../../../../bus/pci/devices/{bdf}")
        group += 1

    for g in host.gpus:
        numa = 0 if g.index < max(1, n // 2) else 1
        full = (g.sku["pcie_gen"], g.sku["pcie_width"])
        _pci(tmp, g.bdf, vendor="0x10de", device=g.sku["device_id"], cls="0x030200", cur=g.pcie, mx=full, numa=numa)
        sw = f"0000:{simcore.SWITCH_BUSES[g.index % 8]:02x}:00.0"  # switch downstream port above the GPU
        _pci(tmp, sw, vendor="0x1000", device="0xc030", cls="0x060400", cur=g.pcie, mx=(5, 16), numa=numa)
        iommu(g.bdf)
    if host.sku.get("nvswitch") and host.sku.get("platform", "baremetal") == "baremetal":
        # an HGX 8-GPU board's four NVSwitches, as `lspci -vvv` of a real HGX H100 lists them (83:00.0-86:00.0
        # "Bridge: NVIDIA Corporation Device 22a3": leptonai/gpud pkg/pci/testdata/lspci-vvv); a VM slice does not
        # see them (Fabric Manager User Guide: the NVSwitches stay with the host or its service VM)
        for i in range(4):
            _pci(tmp, f"0000:{0x83 + i:02x}:00.0", vendor="0x10de", device="0x22a3", cls="0x068000", cur=(4, 2),
                 mx=(4, 2), numa=1)
    for hca in host.hcas:
        numa = 0 if hca.index < max(1, n // 2) else 1
        cls = "0x020700" if hca.link_layer == "InfiniBand" else "0x020000"
        d = _pci(tmp, hca.bdf, vendor="0x15b3", device="0x1021", cls=cls, cur=hca.pcie, mx=(5, 16), numa=numa)
        iommu(hca.bdf)
        _w(d / "net" / hca.netdev / "operstate", "up" if hca.up else "down")
        ib = tmp / "class/infiniband" / hca.name
        _w(ib / "fw_ver", "28.39.1002")
        _w(ib / "hca_type", "MT4129")
        _w(ib / "board_id", "MT_0000000838")
        _w(ib / "node_guid", ":".join(hca.guid[2:][i : i + 4] for i in range(0, 16, 4)))
        (ib / "device").symlink_to(f"../../../bus/pci/devices/{hca.bdf}")
        port = ib / "ports/1"
        _w(port / "state", "4: ACTIVE" if hca.up else "1: DOWN")
        phys = "5: LinkUp" if hca.up else ("2: Polling" if hca.link_layer == "InfiniBand" else "3: Disabled")
        _w(port / "phys_state", phys)
        _w(port / "rate", _rate(hca))
        _w(port / "link_layer", hca.link_layer)
        _w(port / "lid", f"0x{hca.lid:x}" if hca.link_layer == "InfiniBand" else "0x0")
        _w(port / "sm_lid", "0x1" if hca.link_layer == "InfiniBand" else "0x0")
        seed = simcore.h(host.name + hca.name)
        for c in COUNTERS:
            val = 0
            if c in {"port_rcv_data", "port_xmit_data"}:
                val = 200_000_000_000 + seed % 10**9
            elif c.endswith("_packets") and not c.startswith("multicast"):
                val = 300_000_000 + seed % 10**6
            elif c == "link_downed":
                val = 0 if hca.up else 1
            _w(port / "counters" / c, str(val))
        for c in HW_COUNTERS:
            _w(port / "hw_counters" / c, "0")
        _w(tmp / "class/net" / hca.netdev / "operstate", "up" if hca.up else "down")
        _w(tmp / "class/net" / hca.netdev / "mtu", "4092" if hca.link_layer == "InfiniBand" else "9000")
    # a switch port legitimately at Gen4 because its endpoint (a ConnectX-6 Dx) is a Gen4 part: not a fault
    _pci(tmp, "0000:17:03.0", vendor="0x1000", device="0xc030", cls="0x060400", cur=(4, 16), mx=(5, 16), numa=0)
    _pci(tmp, "0000:1b:00.0", vendor="0x15b3", device="0x101d", cls="0x020000", cur=(4, 16), mx=(4, 16), numa=0)
    iommu("0000:1b:00.0")
    _w(tmp / "module/nvidia/version", host.running_driver())  # the loaded module, not the installed package
    peermem = host.peermem_loaded()  # only with DOCA/MLNX_OFED's ib_core (simcore.Host.peermem_loadable)
    if peermem:
        _w(tmp / "module/nvidia_peermem/initstate", "live")
    _w(tmp / "proc/cmdline", CMDLINE)
    # /proc/cpuinfo flags: a VM's kernel lists `hypervisor` (Linux arch/x86/include/asm/cpufeatures.h,
    # X86_FEATURE_HYPERVISOR "Running on a hypervisor"); bare metal does not
    flags = CPU_FLAGS + (" hypervisor" if host.sku.get("platform") == "passthrough" else "")
    _w(tmp / "proc/cpuinfo", "\n\n".join(f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) "
                                         f"Platinum 8480+\nflags\t\t: {flags}" for i in range(2)))
    pm = "nvidia_peermem," if peermem else ""
    modules = [("nvidia_peermem", 16384, 0, "-", " (OE)")] if peermem else []
    modules += [
        ("nvidia_uvm", 1789952, 0, "-", " (OE)"),
        ("nvidia", 11681792, 1 + peermem, f"nvidia_uvm,{pm}", " (OE)"),
        ("mlx5_ib", 450560, 0, "-", ""),
        ("mlx5_core", 2166784, 1, "mlx5_ib,", ""),
        ("ib_core", 454656, 1 + peermem, f"mlx5_ib,{pm}", ""),
    ]
    _w(tmp / "proc/modules", "\n".join(f"{m} {size} {used} {by} Live 0x0000000000000000{tag}"
                                       for m, size, used, by, tag in modules))
    _w(
        tmp / "proc/driver/nvidia/version",
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {host.running_driver()}  Release Build"
        "  (gridready-sim)\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)",
    )
    _w(tmp / "GRIDREADY_SIMULATED", f"gridready-sim: simulated sysfs (profile {host.name})")
    old = root.with_name(root.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if root.exists():
        root.rename(old)
    tmp.rename(root)
    shutil.rmtree(old, ignore_errors=True)
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gridready-sim-sysfs", description="write the simulated sysfs tree")
    ap.add_argument("--root", default=os.environ.get("GRIDREADY_SYSFS_ROOT") or simcore.SYSFS_ROOT)
    ap.add_argument("--profile", default=None, help="profile JSON (default: $GRIDREADY_SIM_PROFILE or /etc)")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    host = simcore.load(Path(a.profile) if a.profile else None)
    print(f"gridready-sim-sysfs: wrote {write_tree(host, Path(a.root))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
