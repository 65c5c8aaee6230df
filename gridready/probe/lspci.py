"""`lspci -vvv`: endpoint link capability vs status (GPUs and NICs only) and ACS control of bridges."""

from __future__ import annotations

import re
from typing import Any

from .sysfs import gen_of

_HEAD = re.compile(r"^([0-9a-fA-F]{4}:)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) ([^:]+): (.*)$")
_LNK = re.compile(r"Speed ([\d.]+GT/s)[^,]*, Width x(\d+)")


def _kind(cls: str, desc: str) -> str | None:
    c = cls.lower()
    if ("3d controller" in c or "vga" in c) and "nvidia" in desc.lower():
        return "gpu"
    if "ethernet controller" in c or "infiniband controller" in c or "network controller" in c:
        return "nic"
    if "bridge" in c:
        return "bridge"
    return None


def parse(text: str) -> dict[str, Any]:
    """-> {endpoints: [{bdf, kind, desc, gen_current, gen_max, width_current, width_max, source}],
    bridges: [{bdf, downgraded, acs_ctl: {flag: bool} | None}]}."""
    blocks: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for ln in text.splitlines():
        m = _HEAD.match(ln)
        if m:
            cur = {"bdf": (m.group(1) or "0000:") + m.group(2), "cls": m.group(3), "desc": m.group(4), "lines": []}
            blocks.append(cur)
        elif cur is not None:
            cur["lines"].append(ln.strip())
    endpoints, bridges = [], []
    for b in blocks:
        cap = sta = acs = buses = None
        for ln in b["lines"]:
            if (bm := re.match(r"Bus: primary=([0-9a-f]+), secondary=([0-9a-f]+), subordinate=([0-9a-f]+)", ln)):
                buses = (int(bm.group(2), 16), int(bm.group(3), 16))
            if ln.startswith("LnkCap:") and cap is None:
                cap = _LNK.search(ln)
            elif ln.startswith("LnkSta:") and sta is None:
                sta = _LNK.search(ln)
            elif ln.startswith("ACSCtl:"):
                acs = {f[:-1]: f.endswith("+") for f in ln.split()[1:] if f[-1] in "+-"}
        kind = _kind(b["cls"], b["desc"])
        if kind in ("gpu", "nic"):
            endpoints.append({
                "bdf": b["bdf"].lower(), "kind": kind, "desc": b["desc"],
                "gen_current": gen_of(sta.group(1)) if sta else None, "gen_max": gen_of(cap.group(1)) if cap else None,
                "width_current": int(sta.group(2)) if sta else None, "width_max": int(cap.group(2)) if cap else None,
                "source": "lspci",
            })
        elif kind == "bridge":
            bridges.append({"bdf": b["bdf"].lower(), "desc": b["desc"],
                            "downgraded": any("downgraded" in ln for ln in b["lines"] if ln.startswith("LnkSta:")),
                            "acs_ctl": acs, "buses": list(buses) if buses else None})
    for br in bridges:  # which GPU/NIC endpoints sit below this bridge: its domain, secondary..subordinate buses
        lo_hi = br["buses"]
        domain = br["bdf"].split(":")[0]
        br["endpoints_below"] = [e["bdf"] for e in endpoints if lo_hi and e["bdf"].split(":")[0] == domain
                                 and lo_hi[0] <= int(e["bdf"].split(":")[1], 16) <= lo_hi[1]]
    return {"endpoints": endpoints, "bridges": bridges}


def acs_redirects(parsed: dict[str, Any]) -> dict[str, Any]:
    """ACS redirection on the bridges above GPUs/NICs (ACS on unrelated switch ports is harmless): ReqRedir or
    CmpltRedir sends peer-to-peer and GPUDirect RDMA traffic up to the root complex (NCCL troubleshooting guide,
    "PCI Access Control Services (ACS)", https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html).
    -> {bridges_checked, redirect_enabled: [bdf], above: {bdf: [endpoint bdf]}}."""
    relevant = [b for b in parsed["bridges"] if b.get("endpoints_below") and b.get("acs_ctl")]
    on = [b for b in relevant if b["acs_ctl"].get("ReqRedir") or b["acs_ctl"].get("CmpltRedir")]
    return {"bridges_checked": len(relevant), "redirect_enabled": [b["bdf"] for b in on],
            "above": {b["bdf"]: b["endpoints_below"] for b in on}}
