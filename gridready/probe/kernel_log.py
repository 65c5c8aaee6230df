"""Kernel log: Xid (GPU) and SXid (NVSwitch) events, PCIe 'limited by' warnings (dmesg, kmsg or syslog form).

Xid lines as the driver prints them (NVIDIA/open-gpu-kernel-modules, kernel_rc): `NVRM: Xid (PCI:0000:01:00): 94,
...` and, on a MIG GPU, with the partition inside the parenthesis: `NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...`
or `(PCI:... GPU-I:01 GPU-CI:02)`. `from_boot` says whether the text reaches back to the kernel's first messages
(`Linux version`, `Command line:`): a wrapped ring buffer lost the Xids that came before its first line.
"""

from __future__ import annotations

import re
from typing import Any

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)((?:\s+GPU-C?I:\d+)*)\): (\d+),\s*(.*)$")
_SXID = re.compile(r"SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_FM_SXID = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d+) .*?pci bus id (\S+)", re.IGNORECASE)
_LIMITED = re.compile(r"(\S+) (\S+): .*available PCIe bandwidth, limited by ([\d.]+ GT/s PCIe x\d+) link at (\S+)")
_BOOT = re.compile(r"\bLinux version \d|\bCommand line: ")


def parse(text: str) -> dict[str, Any]:
    """-> {xid: [{xid, pci, gpu_instance, message, line}], sxid: [...], pcie_limited: [...], lines: n,
    from_boot: bool}."""
    xid, sxid, limited = [], [], []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in lines:
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
            limited.append({"driver": m.group(1), "pci": m.group(2), "limited_by": m.group(3),
                            "at": m.group(4), "line": ln[:400]})
    return {"xid": xid, "sxid": sxid, "pcie_limited": limited, "lines": len(lines),
            "from_boot": any(_BOOT.search(ln) for ln in lines[:4000])}
