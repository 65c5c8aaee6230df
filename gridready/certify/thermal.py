"""Clocks, clock-event (throttle) reasons, power limit and temperatures (ANCH 3.8)."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import gpu_label, gpus, later_rows
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN

# clocks_event_reasons bitmask (nvml.h nvmlClocksEventReason*): the hardware/thermal ones fail the node
REASON_BITS = {0x1: "GPU Idle", 0x2: "Applications Clocks Setting", 0x4: "SW Power Cap", 0x8: "HW Slowdown",
               0x10: "Sync Boost", 0x20: "SW Thermal Slowdown", 0x40: "HW Thermal Slowdown",
               0x80: "HW Power Brake Slowdown", 0x100: "Display Clock Setting"}
FAILING = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")


def _num(*vals: Any) -> float | None:
    return next((float(v) for v in vals if isinstance(v, (int, float))), None)


def clocks(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    rows = gpus(doc)
    if not rows:
        return [exp.result("clocks", E, "no GPUs to read clocks from")]
    want = {"sm": exp.sku.max_sm_clock_mhz, "memory": exp.sku.max_mem_clock_mhz}
    out = []
    for g in rows:
        mc = g["q"].get("max_clocks_mhz") or {}
        m = {"sm": _num(g["query"].get("clocks.max.sm"), mc.get("sm")),
             "memory": _num(g["query"].get("clocks.max.memory"), g["query"].get("clocks.max.mem"), mc.get("memory"))}
        kw: dict[str, Any] = {"gpu": g["index"], "measured": m, "unit": "MHz", "evidence": "raw.nvidia_smi_q",
                              "expected": Expected(equals=want, source=f"catalog: {exp.sku.name}")}
        low = [f"max {k} clock {v:g} MHz < {want[k]}" for k in want if (v := m[k]) is not None and v < want[k]]
        if m["sm"] is None:
            out.append(exp.result("clocks", E, f"{gpu_label(g)}: max SM clock not reported", **kw))
        elif low:
            out.append(exp.result("clocks", F, f"{gpu_label(g)}: " + "; ".join(low), **kw))
        else:
            out.append(exp.result("clocks", P, f"{gpu_label(g)}: max clocks SM {m['sm']:g} MHz"
                                  + (f", memory {m['memory']:g} MHz" if m["memory"] else ""), **kw))
    return out


def _active_reasons(g: dict[str, Any]) -> list[str] | None:
    flat = g["q"].get("clock_event_reasons")
    if flat:
        return [k for k, v in flat.items() if v]
    mask = g["query"].get("clocks_event_reasons.active") or g["query"].get("clocks_throttle_reasons.active")
    if isinstance(mask, str) and mask.lower().startswith("0x"):
        bits = int(mask, 16)
        return [name for bit, name in REASON_BITS.items() if bits & bit]
    return None


def throttle(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    """HW slowdown, HW power brake, HW or SW thermal slowdown active fails (ANCH 4 #16: power brake at idle
    means a PSU/BMC problem), at idle or in the snapshot after the load (issue 34: a slowdown the certification's
    own stress causes); SW power cap alone warns."""
    rows = gpus(doc)
    if not rows:
        return [exp.result("throttle", E, "no GPUs to read clock-event reasons from")]
    later = later_rows(doc)
    out = []
    for g in rows:
        act = _active_reasons(g)
        after = _active_reasons(later[g["bus_id"]]) if later and g["bus_id"] in later else None
        kw: dict[str, Any] = {"gpu": g["index"], "measured": act if later is None else {"idle": act, "after": after},
                              "evidence": "raw.nvidia_smi_q",
                              "expected": Expected(equals=[], source="no hardware/thermal slowdown")}
        if act is None:
            out.append(exp.result("throttle", E, f"{gpu_label(g)}: clock-event reasons not reported", **kw))
        elif bad := [a for a in act if a in FAILING]:
            out.append(exp.result("throttle", F, f"{gpu_label(g)}: {', '.join(bad)} active", **kw))
        elif later is not None and after is None:
            out.append(exp.result("throttle", E, f"{gpu_label(g)}: clock-event reasons not read after the load",
                                  **kw))
        elif bad := [a for a in after or [] if a in FAILING]:
            out.append(exp.result("throttle", F, f"{gpu_label(g)}: {', '.join(bad)} active after the load "
                                  "(the certification's own stress)", **{**kw, "evidence": "raw.after_nvidia_smi_q_x"}))
        elif "SW Power Cap" in act:
            out.append(exp.result("throttle", W, f"{gpu_label(g)}: SW Power Cap active", **kw))
        else:
            out.append(exp.result("throttle", P, f"{gpu_label(g)}: no slowdown active"
                                  + (f" ({', '.join(act)})" if act else ""), **kw))
    return out


def power(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    rows = gpus(doc)
    if not rows:
        return [exp.result("power", E, "no GPUs to read the power limit from")]
    want = exp.sku.power_limit_w
    out = []
    for g in rows:
        lim = _num(g["query"].get("power.limit"), g["q"].get("power_limit_w"))
        kw: dict[str, Any] = {"gpu": g["index"], "measured": lim, "unit": "W", "evidence": "raw.nvidia_smi_q",
                              "expected": Expected(floor=want, source=f"catalog: {exp.sku.name}")}
        if lim is None:
            out.append(exp.result("power", E, f"{gpu_label(g)}: power limit not reported", **kw))
        elif lim < want * 0.99:
            out.append(exp.result("power", F, f"{gpu_label(g)}: power limit {lim:g} W below {want:g} W", **kw))
        else:
            out.append(exp.result("power", P, f"{gpu_label(g)}: power limit {lim:g} W", **kw))
    return out


def temperature(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    rows = gpus(doc)
    if not rows:
        return [exp.result("temperature", E, "no GPUs to read temperatures from")]
    gmax = exp.spec.limits.max_gpu_temp_c or exp.sku.max_gpu_temp_c
    out = []
    for g in rows:
        t = _num(g["query"].get("temperature.gpu"), g["q"].get("temperature_c"))
        tm = _num(g["query"].get("temperature.memory"), g["q"].get("memory_temperature_c"))
        kw: dict[str, Any] = {"gpu": g["index"], "measured": {"gpu": t, "memory": tm}, "unit": "C",
                              "evidence": "raw.nvidia_smi_q",
                              "expected": Expected(ceiling=gmax, source=f"catalog: {exp.sku.name}")}
        if t is None:
            out.append(exp.result("temperature", E, f"{gpu_label(g)}: temperature not reported", **kw))
        elif t > gmax or (tm is not None and tm > exp.sku.max_mem_temp_c):
            out.append(exp.result("temperature", F, f"{gpu_label(g)}: GPU {t:g} C / memory {tm} C above "
                                  f"{gmax:g} / {exp.sku.max_mem_temp_c:g} C", **kw))
        else:
            out.append(exp.result("temperature", P, f"{gpu_label(g)}: GPU {t:g} C"
                                  + (f", memory {tm:g} C" if tm is not None else ""), **kw))
    return out
