"""Simulated `dmesg`: ordinary boot lines of an HGX host, plus NVRM Xid / mlx5 lines for the profile's faults.

Marker: the first kernel line reads `gridready-sim: simulated kernel log (profile <host>)`, in the ring format.
Supports the default `[ seconds] msg`, `-T` (ctime stamps) and `--time-format iso`; `-l/--level` is accepted.
"""

from __future__ import annotations

import sys
import time

from . import simcore
from .simcore import Host

XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3a_12340000",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr "
    "0x12bac1c3e0 partition 2, subpartition 1.",
    63: "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.",
    64: "Row Remapper Error: (0x00000002eebc4100) - All reserved rows for bank are remapped",
    74: "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate detected",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).",
}


def fault_time(boot: float) -> float:
    """When the profile's GPU faults were logged, in seconds since boot: 600 s after boot for a profile the host
    booted with; for a profile rewritten while the host runs (sandbox.testfleet.Fleet.set_faults, after the
    simulator first fixed the boot time), the moment it was rewritten: the driver prints an Xid to the kernel log
    when the error occurs (NVIDIA, "Xid Errors", https://docs.nvidia.com/deploy/xid-errors/index.html: "an error
    report from the NVIDIA driver that is printed to the operating system's kernel log")."""
    try:
        changed = simcore.profile_path().stat().st_mtime
        first_read = (simcore.state_dir() / "boot-time").stat().st_mtime
    except OSError:
        return 600.0
    return max(600.0, changed - boot) if changed > first_read else 600.0


def lines(host: Host) -> list[tuple[float, str]]:
    v = simcore.versions()
    out: list[tuple[float, str]] = [
        (0.0, f"gridready-sim: simulated kernel log (profile {host.name})"),
        (
            0.0,
            "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) "
            "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)",
        ),
        (0.0, "Command line: BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=/dev/nvme0n1p2 ro iommu=pt quiet"),
        (0.41, "DMI: NVIDIA DGXH100/DGXH100, BIOS 1.5.3 04/11/2024"),
        (1.92, "PCI: Using configuration type 1 for base access"),
        # the kernel's link report of every PCI device (drivers/pci/pci.c, __pcie_print_link_status): the BMC's VGA
        # sits on a Gen1 x1 link, which is no fault of a GPU or NIC
        *([(1.95, "pci 0000:03:00.0: 2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x1 link at "
                  "0000:02:00.0 (capable of 4.000 Gb/s with 5.0 GT/s PCIe x1 link)")]
          if host.fault("pcie_limited_other") else []),
        (4.11, "systemd[1]: systemd 252.33-1~deb12u1 running in system mode"),
    ]
    t = 7.5
    for hca in host.hcas:
        gen, width = hca.pcie
        out.append((t, f"mlx5_core {hca.bdf}: firmware version: 28.39.1002"))
        if (gen, width) == (5, 16):
            out.append(
                (t + 0.01, f"mlx5_core {hca.bdf}: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)")
            )
        else:
            out.append(
                (
                    t + 0.01,
                    f"mlx5_core {hca.bdf}: 126.028 Gb/s available PCIe bandwidth, limited by "
                    f"16.0 GT/s PCIe x{width} link at 0000:{hca.bus - 2:02x}:01.0 "
                    "(capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
                )
            )
        t += 0.35
    out += [
        (12.6, "nvidia: loading out-of-tree module taints kernel."),
        (12.61, "nvidia: module license 'Dual MIT/GPL' taints kernel."),
        (12.84, "nvidia-nvlink: Nvlink Core is being initialized, major device number 235"),
        (
            12.9,
            f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {v['driver']}  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 30 09:12:40 UTC 2026",
        ),
        (
            13.2,
            "nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for x86_64  "
            f"{v['driver']}  Release Build",
        ),
    ]
    if host.peermem_loaded():
        out.append((14.05, "nvidia_peermem: module uses symbols nvidia_p2p_get_pages_persistent from proprietary "
                    "module nvidia"))
    t = fault_time(simcore.boot_time())
    for g in host.gpus:
        pci = f"PCI:0000:{g.bus:02x}:00"
        if g.ecc_uncorrectable:
            out.append((t, f"NVRM: Xid ({pci}): 48, pid='<unknown>', name=<unknown>, {XID_TEXT[48]}"))
            t += 0.03
        if g.row_remap_pending:
            out.append((t, f"NVRM: Xid ({pci}): 63, pid='<unknown>', name=<unknown>, {XID_TEXT[63]}"))
            t += 0.03
        for f in [f for f in g.faults if not f.get("after_load") or simcore.load_seen()]:
            if f["kind"] == "xid":
                code = int(f.get("code") or 79)
                text = XID_TEXT.get(code, "Graphics Engine Exception")
                who = "pid=24917, name=python3" if code in {13, 31, 94} else "pid='<unknown>', name=<unknown>"
                out.append((t, f"NVRM: Xid ({pci}): {code}, {who}, {text}"))
                t += 0.03
            elif f["kind"] == "xid_mig":
                # on a MIG instance the driver names it after the PCI address (NVIDIA Xid catalog, "MIG")
                code = int(f.get("code") or 95)
                out.append((t, f"NVRM: Xid ({pci} GPU-I:05): {code}, pid='<unknown>', name=<unknown>, "
                               f"{XID_TEXT.get(code, 'Graphics Engine Exception')}"))
                t += 0.03
        if g.has("thermal_throttle"):
            out.append((t, f"NVRM: GPU at {pci} has a HW thermal slowdown event (temperature {g.temp} C)"))
    for hca in host.hcas:
        if not hca.up:
            out.append((t + 1, f"mlx5_core {hca.bdf}: Port module event: module 0, Cable unplugged"))
            out.append((t + 1.01, f"mlx5_core {hca.bdf} {hca.netdev}: Link down"))
    return out


def render(host: Host, args: list[str]) -> str:
    if host.fault("kernel_log_empty"):
        return ""  # some hosts print nothing and exit 0 (issue 34, finding 9)
    boot = simcore.boot_time()
    text = []
    entries = lines(host)
    if host.fault("kernel_log_wrapped"):
        entries = [e for e in entries if e[0] >= 4.0]  # the boot lines were overwritten in the ring buffer
    iso = "iso" in (simcore.option(args, "--time-format") or "")
    for ts, msg in entries:
        if "-T" in args or "--ctime" in args:
            text.append(f"[{time.strftime('%a %b %d %H:%M:%S %Y', time.localtime(boot + ts))}] {msg}")
        elif iso:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(boot + ts))
            text.append(f"{stamp},{int((ts % 1) * 1e6):06d}+00:00 {msg}")
        else:
            text.append(f"[{ts:>12.6f}] {msg}")
    return "\n".join(text) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(render(simcore.load(), args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
