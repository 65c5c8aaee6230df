"""Kernel log: Xid (GPU) and SXid (NVSwitch) events, GPUs lost or failing to initialise, PCIe 'limited by' notices
(dmesg, kmsg, journald or syslog form).

Xid lines as the driver prints them (NVIDIA/open-gpu-kernel-modules, kernel_rc): `NVRM: Xid (PCI:0000:01:00): 94,
...` and, on a MIG GPU, with the partition inside the parenthesis: `NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...`
or `(PCI:... GPU-I:01 GPU-CI:02)`. `from_boot` says whether the text reaches back to the kernel's first messages
(`Linux version`, `Command line:`): a wrapped ring buffer lost the Xids that came before its first line.

A GPU can be lost with no Xid line at all (NVIDIA/NVSentinel#155, leptonai/gpud#1209): the driver's own "fallen off
the bus" notice, in one line (`NVRM: GPU at PCI:0000:44:00: GPU has fallen off the bus.`) or spread over three
(`NVRM: The NVIDIA GPU 0000:b3:00.0` / `NVRM: (PCI ID: 10de:26b5) installed in this system has` / `NVRM: fallen off
the bus and is not responding to commands.`), and a GPU the driver could not bring up (`NVRM: GPU 0000:0a:00.0:
RmInitAdapter failed! (0x24:0x72:1568)`, `rm_init_adapter failed`, `RmInitAdapter: Cannot initialize GSP firmware
RM`, `failed to wait for GFW_BOOT`, `The NVIDIA probe routine failed for 1 device(s)`, X.org's `Failed to initialize
the NVIDIA GPU at PCI:1:0:0`). Each is a `gpu_lost` record naming the GPU's PCI address, taken from the line or,
for the wrapped notice, from the NVRM line that opened it.

The PCIe notice is the kernel's __pcie_print_link_status (drivers/pci/pci.c, since 4.17): `<avail> Gb/s available
PCIe bandwidth, limited by <speed> x<w> link at <bdf> (capable of <cap> Gb/s with <speed> x<w> link)`. Before 5.3
the speed reads `8 GT/s` (no `.0`, no `PCIe`); since, `8.0 GT/s PCIe`. The line is anchored on the device's PCI
address, so journald (`Feb 14 05:03:41 host kernel: mlx5_core ...`) and syslog (`kern.info kernel: [ 3.02] pci ...`)
prefixes do not move the fields. The unlimited form (`... available PCIe bandwidth (8.0 GT/s PCIe x16 link)`) is
not a notice of a fault and is not recorded.
"""

from __future__ import annotations

import re
from typing import Any

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)((?:\s+GPU-C?I:\d+)*)\): (\d+),\s*(.*)$")
_SXID = re.compile(r"SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_FM_SXID = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d+) .*?pci bus id (\S+)", re.IGNORECASE)
_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_SPEED = r"(?:[\d.]+ ?GT/s|Unknown speed)(?: PCIe)? x\d+"
_LIMITED = re.compile(rf"(?:^|[\s\]])([\w.-]+) ({_BDF}): ([\d.]+) Gb/s available (?:PCIe )?bandwidth, limited by "
                      rf"({_SPEED}) link at ([^\s(]+)(?:\s+\(capable of ([\d.]+)\s*Gb/s with ({_SPEED}) link\))?")
# the driver's notices of a GPU lost or not initialised, with or without an Xid line beside them
_LOST = re.compile(r"fallen off the bus|RmInitAdapter failed|rm_init_adapter failed|RmInitAdapter: Cannot initialize|"
                   r"Failed to initialize the NVIDIA GPU|NVIDIA probe routine failed|failed to wait for GFW[_ ]boot",
                   re.IGNORECASE)
_NVRM_BDF = re.compile(r"NVRM: .*?(?:GPU at PCI:|GPU |PCI:)([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})")
_XORG_PCI = re.compile(r"GPU at PCI:(\d{1,3}):(\d{1,2}):(\d)\b")
_BOOT = re.compile(r"\bLinux version \d|\bCommand line: ")


def _lost_pci(ln: str, opener: str | None) -> str | None:
    """The lost GPU's address (`0000:b3:00`, the Xid lines' form) from its line, else from the NVRM line that opened
    a wrapped notice; X.org prints `PCI:bus:dev:fn` in decimal."""
    if m := _XORG_PCI.search(ln):
        return f"0000:{int(m.group(1)):02x}:{int(m.group(2)):02x}"
    if m := _NVRM_BDF.search(ln):
        return m.group(1).lower()
    return opener


def _lost(ln: str, opener: str | None) -> dict[str, Any]:
    low = ln.lower()
    what = ("fallen off the bus" if "fallen off the bus" in low else
            "failed to initialise (RmInitAdapter)" if "rminitadapter" in low or "rm_init_adapter" in low else
            "failed to initialise (GPU firmware boot)" if "gfw" in low else
            "failed to initialise")
    return {"pci": _lost_pci(ln, opener), "what": what, "line": ln[:400]}


def parse(text: str) -> dict[str, Any]:
    """-> {xid: [{xid, pci, gpu_instance, message, line}], sxid: [...], gpu_lost: [{pci, what, line}],
    pcie_limited: [...], lines: n, from_boot: bool}."""
    xid, sxid, limited, lost = [], [], [], []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    opener: str | None = None  # the PCI address the last NVRM line named: a wrapped notice continues it
    for ln in lines:
        if "NVRM:" in ln and (m := _NVRM_BDF.search(ln)):
            opener = m.group(1).lower()
        elif "NVRM:" not in ln:
            opener = None
        if _LOST.search(ln) and not _XID.search(ln):  # an Xid 79 line is judged as its Xid
            lost.append(_lost(ln, opener))
            continue
        if m := _XID.search(ln):
            inst = re.search(r"GPU-I:(\d+)", m.group(2))
            xid.append({"xid": int(m.group(3)), "pci": m.group(1).lower(), "message": m.group(4)[:240],
                        "gpu_instance": int(inst.group(1)) if inst else None, "line": ln[:400]})
        elif m := _SXID.search(ln):
            sxid.append({"sxid": int(m.group(2)), "pci": m.group(1).lower(), "message": m.group(3)[:240],
                         "line": ln[:400]})
        elif m := _FM_SXID.search(ln):  # fabric manager log form
            sxid.append({"sxid": int(m.group(2)), "pci": m.group(3).lower(),
                         "message": f"{m.group(1)} (fabric manager)", "line": ln[:400]})
        elif m := _LIMITED.search(ln):
            limited.append({"driver": m.group(1), "pci": m.group(2).lower(), "limited_by": m.group(4),
                            "at": m.group(5), "gbps": float(m.group(3)),
                            "capable_gbps": float(m.group(6)) if m.group(6) else None,
                            "capable_of": m.group(7), "line": ln[:400]})
    return {"xid": xid, "sxid": sxid, "gpu_lost": lost, "pcie_limited": limited, "lines": len(lines),
            "from_boot": any(_BOOT.search(ln) for ln in lines[:4000])}
