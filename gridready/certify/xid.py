"""Xid (GPU) and SXid (NVSwitch) events in the kernel log: any event fails the node except the spec's allow-list of
application faults (default 13, 31, 43, 45; ANCH 3.7), judged over the certification run and by state.

The kernel log keeps an Xid until reboot, also after the GPU reset that repaired it. With the probe's snapshot after
the load (`after.kernel_log`), an Xid logged DURING the run fails; one logged BEFORE it fails unless the GPU reads
recovered after the load (no remap pending or failed, no volatile uncorrectable ECC error: the volatile counters
clear on reset) and logged nothing new, then it warns. Without that snapshot (older probes, offline captures) every
Xid fails. A non-fatal SXid warns (DCGM's pcie plugin leaves check_non_fatal off by default: NVIDIA/DCGM
nvvs/plugin_src/pcie/Pcie.cpp); a fatal one fails, before the run only when the run logged another.

No evidence is never a pass: an unreadable or empty kernel log (`journalctl -k` may print nothing and exit 0) and a
log that does not reach back to boot (`from_boot` false: the ring buffer wrapped, Xids before its first line are
lost) are errors unless the lines there already fail the node. MIG lines (`PCI:... GPU-I:05`) name the GPU too.

Follow-on Xids are judged by their cause. NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, "Xid 45:
Preemptive cleanup, due to previous errors") lists Xid 45 as the cleanup the driver does after an earlier error;
it is allow-listed by default because an application fault (Xid 13, 31, 43) also ends in one. A log window may hold
only the follow-on lines of a fatal event (the journal rotated, `--since` cut the cause off): where such a line
names the Xid that caused it (`... due to Xid 79`, `(Xid 79)`), the gate judges the named Xid, not the follow-on
code, and says so.

A GPU lost or failing to initialise is judged like an Xid even where the driver logged none (NVIDIA/NVSentinel#155:
"fallen off the bus" with no Xid line; `RmInitAdapter failed`): kernel_log's `gpu_lost` records fail the GPU they
name, by the same rule of before/during the run and recovery. A GPU reads recovered only when nvidia-smi's GPU
Recovery Action reads None where it is printed (NVIDIA, "Error Recovery and Response Flags": GPU Reset, Node Reboot,
Drain P2P, Drain and Reset each ask for an action before the GPU is used again)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import _bus, after_load, gpus
from gridready.certify.result import Expected, GateResult, GateStatus

F, E, W, P = GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN, GateStatus.PASS


# follow-on Xid -> what NVIDIA's Xid catalog says it is (docs.nvidia.com/deploy/xid-errors)
FOLLOW_ON = {45: "preemptive cleanup, due to previous errors"}
_CAUSE = re.compile(r"\bXid\s*[:#(]?\s*(\d+)", re.IGNORECASE)


def cause_of(e: dict[str, Any]) -> int | None:
    """The earlier Xid a follow-on Xid line names as its cause, or None (not a follow-on, or no cause named)."""
    if e.get("xid") not in FOLLOW_ON:
        return None
    for m in _CAUSE.finditer(str(e.get("message") or "")):
        if int(m.group(1)) != e["xid"]:
            return int(m.group(1))
    return None


def _judged(e: dict[str, Any]) -> dict[str, Any]:
    """The event as judged: a follow-on line that names its cause counts as the cause (`follow_on` keeps the code)."""
    cause = cause_of(e)
    return {**e, "xid": cause, "follow_on": e["xid"]} if cause is not None else e


def _non_fatal(e: dict[str, Any]) -> bool:
    return "non-fatal" in str(e.get("message") or "").lower()


def _fatal_sxids(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fatal SXid lines of one NVSwitch. The driver prints one report over several lines (`22013, Non-fatal,
    Link 44 ...`, then `22013, Severity 0 ...` and `22013, Data {...}`: NVIDIA/nvtrust#124); a line that states no
    severity takes the one its code's other lines state, and is fatal only where none does (fail closed)."""
    stated = {e["sxid"]: _non_fatal(e) for e in events if re.search(r"\b(non-)?fatal\b", str(e.get("message")), re.I)}
    return [e for e in events if not (_non_fatal(e) or stated.get(e["sxid"]) is True)]


def _recovered(g: dict[str, Any] | None) -> str | None:
    """Why the GPU reads recovered after the load, or None (not read, or still faulty)."""
    if g is None:
        return None
    q = g.get("q") or {}
    remap, ecc = q.get("remap") or {}, q.get("ecc") or {}
    if remap.get("pending") is None or remap.get("pending") or remap.get("failure"):
        return None
    if ecc.get("volatile_dram_ue") is None or ecc.get("volatile_dram_ue") or ecc.get("volatile_sram_ue"):
        return None
    if q.get("recovery_action") not in (None, "None") or any((q.get("repair") or {}).values()):
        return None
    return "no remap pending or failed, no volatile uncorrectable ECC error after the load" + (
        ", recovery action None" if q.get("recovery_action") else "")


def _lost_events(log: dict[str, Any]) -> list[dict[str, Any]]:
    """kernel_log's `gpu_lost` records as events of the Xid rule: no Xid code, the driver's notice instead."""
    return [{"xid": None, "lost": e["what"], "pci": e.get("pci") or "unknown", "message": e["line"].strip()[:240],
             "line": e["line"]} for e in log.get("gpu_lost") or []]


def _code(e: dict[str, Any]) -> int | str:
    return e["xid"] if e["xid"] is not None else e["lost"]


def _listed(counts: Counter[int | str], times: bool = True) -> str:
    xids = sorted((x, n) for x, n in counts.items() if isinstance(x, int))
    lost = sorted((x, n) for x, n in counts.items() if isinstance(x, str))
    parts = ["Xid " + ", ".join(f"{x} x{n}" if n > 1 and times else str(x) for x, n in xids)] if xids else []
    parts += [f"GPU {x} (driver notice{f' x{n}' if n > 1 else ''}, no Xid line)" for x, n in lost]
    return "; ".join(parts)


def xid(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    log = doc.get("kernel_log") or {}
    if not log.get("source") and "xid" not in log:
        return [exp.result("xid", E, "kernel log not readable: Xid events unknown", evidence="kernel_log")]
    if log.get("lines") == 0:
        return [exp.result("xid", E, f"kernel log empty ({log.get('source')}): Xid events unknown",
                           evidence="kernel_log")]
    after = after_load(doc)
    alog = (after or {}).get("kernel_log") if after else None
    if after is not None and not alog:
        return [exp.result("xid", E, "kernel log not readable after the load: the run's Xid events unknown",
                           evidence="after.kernel_log")]
    allow, sallow = set(exp.spec.xid_allow), set(exp.spec.sxid_allow)
    rows = gpus(doc)
    index_of = {(g["bus_id"] or "")[:10]: g["index"] for g in rows}
    later = {(g["bus_id"] or "")[:10]: g for g in gpus(after)} if after else {}
    seen = {e["line"] for e in log.get("xid", []) + log.get("sxid", []) + log.get("gpu_lost", [])}
    log = {**log, "xid": [_judged(e) for e in log.get("xid", [])] + _lost_events(log)}
    new_x = [_judged(e) for e in (alog or {}).get("xid", []) + _lost_events(alog or {}) if e["line"] not in seen]
    new_s = [e for e in (alog or {}).get("sxid", []) if e["line"] not in seen]
    bad = [e for e in log.get("xid", []) + new_x if e["xid"] not in allow]
    sbad = [e for e in log.get("sxid", []) + new_s if e["sxid"] not in sallow]
    allowed = len(log.get("xid", [])) + len(new_x) - len(bad)
    listed = ", ".join(map(str, sorted(allow))) or "none"
    expected = Expected(equals=0, source=f"spec: allow-list Xid {listed}; counted over the certification run")
    run_lines = {e["line"] for e in new_x + new_s}
    out = []
    for pci, events in _by_pci(bad).items():
        bus = (_bus(pci) or pci)[:10]
        gpu = index_of.get(bus)
        counts = Counter(_code(e) for e in events)
        who = f"GPU {gpu} ({pci})" if gpu is not None else f"GPU at PCI {pci}"
        listed = _listed(counts)
        follow = sorted({(e["follow_on"], e["xid"]) for e in events if "follow_on" in e})
        if follow:
            listed += " (" + "; ".join(f"named as the cause by follow-on Xid {f} lines ({FOLLOW_ON[f]})"
                                       for f, _ in follow) + ")"
        during = [e for e in events if e["line"] in run_lines]
        fixed = _recovered(later.get(bus)) if after is not None and not during else None
        if during:
            status, when = F, f"during the certification run ({_listed(Counter(_code(e) for e in during), False)})"
        elif fixed:
            status, when = W, f"before the run; the GPU reads recovered ({fixed}) and logged none during it"
        else:
            status, when = F, "since boot" if after is None else "before the run and the GPU does not read recovered"
        out.append(exp.result("xid", status, f"{who}: {listed} {when} — first: {events[0]['message']}",
                              gpu=gpu, measured=dict(counts), expected=expected, evidence="raw.kernel_log"))
    for pci, events in _by_pci(sbad).items():
        counts = Counter(e["sxid"] for e in events)
        fatal = _fatal_sxids(events)
        fatal_now = [e for e in fatal if e["line"] in run_lines]
        if fatal_now or (fatal and after is None):
            status, when = F, "during the certification run" if fatal_now else "since boot (fatal)"
        elif fatal:
            status, when = W, "fatal, before the run; none during it (the services gate judges the fabric state)"
        else:
            status, when = W, "non-fatal (DCGM checks non-fatal SXids only when asked: check_non_fatal)"
        out.append(exp.result("xid", status, f"NVSwitch {pci}: SXid " + ", ".join(map(str, sorted(counts)))
                              + f" {when} — {events[0]['message']}", measured=dict(counts), expected=expected,
                              evidence="raw.kernel_log"))
    if not any(r.status is F for r in out) and log.get("from_boot") is False:
        out.append(exp.result("xid", E, f"kernel log ({log.get('source')}) does not reach back to boot "
                              "(ring buffer wrapped, no persistent journal): Xids before its first line unknown",
                              expected=expected, evidence="kernel_log"))
    if not out:
        window = " and none during the certification run" if after is not None else ""
        out.append(exp.result("xid", P, f"no Xid/SXid since boot{window}"
                              + (f" ({allowed} allow-listed application Xids)" if allowed else ""),
                              measured=0, expected=expected, evidence=f"kernel_log ({log.get('source')})"))
    return out


def _by_pci(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e["pci"], []).append(e)
    return out
