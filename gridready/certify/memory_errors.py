"""ECC (DRAM and SRAM, volatile and aggregate), row remapping, retired pages (ANCH 3.6). Limits from the spec."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import gpu_label, gpus, later_rows
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in gpus(doc)] or [
        {"index": i, "bus_id": q.get("bus_id") if q.get("bus_id") != "unknown" else None, "q": q}
        for i, q in enumerate(((doc.get("nvidia_smi") or {}).get("q") or {}).get("gpus") or [])]


def ecc(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    lim = exp.spec.limits
    rows = _rows(doc)
    if not rows:
        return [exp.result("ecc", E, "no nvidia-smi -q output: ECC counters unknown", evidence="raw.nvidia_smi_q")]
    later = later_rows(doc)
    out = []
    for g in rows:
        c = g["q"].get("ecc") or {}
        ca = ((later or {}).get(g["bus_id"]) or {}).get("q", {}).get("ecc") or {}
        label = gpu_label(g)
        kw: dict[str, Any] = {"gpu": g["index"], "measured": c, "evidence": "raw.nvidia_smi_q",
                              "expected": Expected(ceiling=lim.sram_ue_aggregate, source="spec limits")}
        mode = g["q"].get("ecc_mode")
        if not c or all(v is None for v in c.values()):
            out.append(exp.result("ecc", E, f"{label}: ECC counters not reported", **kw))
            continue
        bad = []
        if mode is not None and mode != "Enabled":
            bad.append(f"ECC mode {mode}")
        if (c.get("volatile_dram_ue") or 0) > 0:
            bad.append(f"{c['volatile_dram_ue']} uncorrectable DRAM errors since boot")
        if (c.get("volatile_sram_ue") or 0) > 0:
            bad.append(f"{c['volatile_sram_ue']} uncorrectable SRAM errors since boot")
        if later is not None and ca.get("volatile_dram_ue") is None:
            out.append(exp.result("ecc", E, f"{label}: ECC counters not read after the load", **kw))
            continue
        grew = [k for k in ("volatile_dram_ue", "volatile_sram_ue") if (ca.get(k) or 0) > (c.get(k) or 0)]
        if grew:
            bad.append("uncorrectable errors during the certification run: " + ", ".join(
                f"{k} {c.get(k) or 0} -> {ca[k]}" for k in grew))
        if (c.get("aggregate_sram_ue") or 0) > lim.sram_ue_aggregate:
            bad.append(f"aggregate SRAM uncorrectable {c['aggregate_sram_ue']} > {lim.sram_ue_aggregate}")
        if c.get("sram_threshold_exceeded"):
            bad.append("SRAM threshold exceeded")
        if (c.get("aggregate_sram_ce") or 0) > lim.sram_ce_aggregate:
            bad.append(f"aggregate SRAM correctable {c['aggregate_sram_ce']} > {lim.sram_ce_aggregate}")
        if (c.get("volatile_dram_ce") or 0) > lim.dram_ce_volatile:
            bad.append(f"DRAM correctable {c['volatile_dram_ce']} > {lim.dram_ce_volatile}")
        if bad:
            out.append(exp.result("ecc", F, f"{label}: " + "; ".join(bad), **kw))
        else:
            out.append(exp.result("ecc", P, f"{label}: no uncorrectable ECC errors, correctable within limits", **kw))
    return out


def _recovery_action(g: dict[str, Any], later: dict[str, Any] | None) -> str | None:
    """What nvidia-smi asks for, at idle or after the load: a GPU Recovery Action other than None, a TPC or channel
    repair pending (NVML nvmlDeviceGetRepairStatus: the repair happens at the next GPU reset), or memory it
    cannot repair (nvmlDeviceGetUnrepairableMemoryFlag: RMA); None when it asks for nothing or prints none."""
    after = ((later or {}).get(g["bus_id"]) or {}).get("q", {})
    for q in (g["q"], after):
        if q.get("recovery_action") not in (None, "None"):
            return str(q["recovery_action"])
        repair = q.get("repair") or {}
        if repair.get("unrepairable"):
            return "unrepairable memory (RMA)"
        pending = [n for n, k in (("channel", "channel_pending"), ("TPC", "tpc_pending")) if repair.get(k)]
        if pending:
            return f"{' and '.join(pending)} repair pending (reset the GPU)"
    return None


def row_remap(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    """Pending or failed row remapping fails (AZ NHC2007), at idle or after the load (issue 34: remaps the run's
    own stress caused); UE remaps above the limit fail; pre-Ampere parts report retired pages instead (a pending
    page blacklist fails). The GPU Recovery Action, the third of NVIDIA's error recovery flags beside the remap
    pending and failure flags (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt, "Error Recovery and Response Flags"),
    fails the GPU when it asks for anything but None: GPU Reset, Node Reboot, Drain P2P, Drain and Reset."""
    lim = exp.spec.limits.remap_uncorrectable
    rows = _rows(doc)
    if not rows:
        return [exp.result("row_remap", E, "no nvidia-smi -q output: row remapping unknown",
                           evidence="raw.nvidia_smi_q")]
    later = later_rows(doc)
    out = []
    for g in rows:
        r, rp = g["q"].get("remap") or {}, g["q"].get("retired_pages") or {}
        ra = ((later or {}).get(g["bus_id"]) or {}).get("q", {}).get("remap") or {}
        label = gpu_label(g)
        kw: dict[str, Any] = {"gpu": g["index"], "measured": {"remap": r, "retired_pages": rp},
                              "expected": Expected(ceiling=lim, source="spec limits"), "evidence": "raw.nvidia_smi_q"}
        if r.get("pending") is None and rp.get("pending") is None:
            out.append(exp.result("row_remap", E, f"{label}: neither remapped rows nor retired pages reported", **kw))
        elif r.get("pending"):
            out.append(exp.result("row_remap", F, f"{label}: row remapping pending (reset the GPU, then re-certify)",
                                  **kw))
        elif r.get("failure"):
            out.append(exp.result("row_remap", F, f"{label}: row remapping failure occurred (RMA)", **kw))
        elif (r.get("uncorrectable") or 0) > lim:
            out.append(exp.result("row_remap", F, f"{label}: {r['uncorrectable']} rows remapped for uncorrectable "
                                  f"errors > {lim}", **kw))
        elif action := _recovery_action(g, later):
            out.append(exp.result("row_remap", F, f"{label}: nvidia-smi asks for a recovery action: {action} "
                                  "(NVIDIA error recovery flags: act on it, then re-certify)", **kw))
        elif later is not None and ra.get("pending") is None and rp.get("pending") is None:
            out.append(exp.result("row_remap", E, f"{label}: remapped rows not read after the load", **kw))
        elif ra.get("pending") or ra.get("failure"):
            out.append(exp.result("row_remap", F, f"{label}: row remapping "
                                  f"{'pending' if ra.get('pending') else 'failure'} after the load: the certification "
                                  "run's own memory errors (reset the GPU, then re-certify)", **kw))
        elif rp.get("pending"):
            out.append(exp.result("row_remap", F, f"{label}: retired page blacklist pending (SBE "
                                  f"{rp.get('single_bit')}, DBE {rp.get('double_bit')})", **kw))
        else:
            out.append(exp.result("row_remap", P, f"{label}: no pending or failed remapping", **kw))
    return out
