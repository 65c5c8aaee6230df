"""Kernel log: Xid (GPU) and SXid (NVSwitch) events, PCIe 'limited by' warnings (dmesg, kmsg or syslog form)."""

from __future__ import annotations

import re
from typing import Any

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_SXID = re.compile(r"SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_FM_SXID = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d+) .*?pci bus id (\S+)", re.IGNORECASE)
_LIMITED = re.compile(r"(\S+) (\S+): .*available PCIe bandwidth, limited by ([\d.]+ GT/s PCIe x\d+) link at (\S+)")


def parse(text: str) -> dict[str, Any]:
    """-> {xid: [{xid, pci, message, line}], sxid: [...], pcie_limited: [...], lines: n}."""
    xid, sxid, limited = [], [], []
    lines = text.splitlines()
    for ln in lines:
        if m := _XID.search(ln):
            xid.append({"xid": int(m.group(2)), "pci": m.group(1).lower(), "message": m.group(3)[:240],
                        "line": ln[:400]})
        elif m := _SXID.search(ln):
            sxid.append({"sxid": int(m.group(2)), "pci": m.group(1).lower(), "message": m.group(3)[:240],
                         "line": ln[:400]})
        elif m := _FM_SXID.search(ln):  # fabric manager log form
            sxid.append({"sxid": int(m.group(2)), "pci": m.group(3).lower(),
                         "message": f"{m.group(1)} (fabric manager)", "line": ln[:400]})
        elif m := _LIMITED.search(ln):
            limited.append({"driver": m.group(1), "pci": m.group(2), "limited_by": m.group(3),
                            "at": m.group(4), "line": ln[:400]})
    return {"xid": xid, "sxid": sxid, "pcie_limited": limited, "lines": len(lines)}
