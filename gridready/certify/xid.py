"""Xid (GPU) and SXid (NVSwitch) events in the kernel log since boot: any event fails the node except the
spec's allow-list of application faults (default 13, 31, 43, 45; ANCH 3.7).

No evidence is never a pass: an unreadable or empty kernel log (`journalctl -k` may print nothing and exit 0) and a
log that does not reach back to boot (`from_boot` false: the ring buffer wrapped, Xids before its first line are
lost) are errors unless the lines there already fail the node. MIG lines (`PCI:... GPU-I:05`) name the GPU too."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import _bus, gpus
from gridready.certify.result import Expected, GateResult, GateStatus


def xid(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    log = doc.get("kernel_log") or {}
    if not log.get("source") and "xid" not in log:
        return [exp.result("xid", GateStatus.ERROR, "kernel log not readable: Xid events unknown",
                           evidence="kernel_log")]
    if log.get("lines") == 0:
        return [exp.result("xid", GateStatus.ERROR, f"kernel log empty ({log.get('source')}): Xid events unknown",
                           evidence="kernel_log")]
    allow, sallow = set(exp.spec.xid_allow), set(exp.spec.sxid_allow)
    index_of = {g["bus_id"][:10] if g["bus_id"] else "": g["index"] for g in gpus(doc)}
    bad = [e for e in log.get("xid", []) if e["xid"] not in allow]
    sbad = [e for e in log.get("sxid", []) if e["sxid"] not in sallow]
    allowed = len(log.get("xid", [])) - len(bad)
    expected = Expected(equals=0, source=f"spec: allow-list Xid {sorted(allow)}")
    out = []
    for pci, events in _by_pci(bad).items():
        bus = (_bus(pci) or pci)[:10]
        gpu = index_of.get(bus)
        counts = Counter(e["xid"] for e in events)
        who = f"GPU {gpu} ({pci})" if gpu is not None else f"GPU at PCI {pci}"
        out.append(exp.result("xid", GateStatus.FAIL, f"{who}: Xid " + ", ".join(
            f"{x} x{n}" if n > 1 else str(x) for x, n in sorted(counts.items())) + f" — first: {events[0]['message']}",
            gpu=gpu, measured=dict(counts), expected=expected, evidence="raw.kernel_log"))
    for pci, events in _by_pci(sbad).items():
        counts = Counter(e["sxid"] for e in events)
        out.append(exp.result("xid", GateStatus.FAIL, f"NVSwitch {pci}: SXid " + ", ".join(map(str, sorted(counts)))
                              + f" — {events[0]['message']}", measured=dict(counts), expected=expected,
                              evidence="raw.kernel_log"))
    if not out and log.get("from_boot") is False:
        out.append(exp.result("xid", GateStatus.ERROR, f"kernel log ({log.get('source')}) does not reach back to boot "
                              "(ring buffer wrapped, no persistent journal): Xids before its first line unknown",
                              expected=expected, evidence="kernel_log"))
    if not out:
        out.append(exp.result("xid", GateStatus.PASS, "no Xid/SXid since boot"
                              + (f" ({allowed} allow-listed application Xids)" if allowed else ""),
                              measured=0, expected=expected, evidence=f"kernel_log ({log.get('source')})"))
    return out


def _by_pci(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e["pci"], []).append(e)
    return out
