"""Clock-event (throttle) reasons, max clocks, power limit and temperatures per GPU: the readings that must fail,
warn or pass each gate, which source is read first, and the exact sentence an operator reads. Built on the real
h200x2 capture (GPU 1, 0000:00:07.0; catalog H200: SM 1980 / memory 3201 MHz, 700 W, GPU 85 C / HBM 95 C)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import thermal
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import h200_doc
from tests.unit.certify.test_gates_public import exp

BASE = h200_doc()
G1 = "GPU 1 (0000:00:07.0)"
SMI_Q = "raw.nvidia_smi_q"
CATALOG = "catalog: H200-SXM-141GB"


def _doc(q: dict[str, Any] | None = None, query: dict[str, Any] | None = None) -> dict[str, Any]:
    """The capture with GPU 1's parsed `nvidia-smi -q` keys and query-CSV columns replaced (None drops a column)."""
    doc = copy.deepcopy(BASE)
    doc["nvidia_smi"]["q"]["gpus"][1].update(q or {})
    row = doc["nvidia_smi"]["query"][1]
    for k, v in (query or {}).items():
        if v is None:
            row.pop(k, None)
        else:
            row[k] = v
    return doc


def _g1(gate: Any, doc: dict[str, Any], **spec: Any) -> Any:
    (r,) = [r for r in gate(doc, exp("h200", 2, "passthrough", **spec)) if r.gpu == 1]
    return r


@pytest.mark.parametrize(("gate", "reason"), [
    (thermal.throttle, "no GPUs to read clock-event reasons from"),
    (thermal.clocks, "no GPUs to read clocks from"),
    (thermal.power, "no GPUs to read the power limit from"),
    (thermal.temperature, "no GPUs to read temperatures from"),
])
def test_no_gpus_is_one_error(gate: Any, reason: str) -> None:
    (r,) = gate({}, exp("h200", 2, "passthrough"))
    assert (r.gate, r.status, r.reason, r.gpu) == (gate.__name__, S.ERROR, reason, None)


# ---- throttle: clock-event reasons -------------------------------------------------------------------------

MASK_ONLY = {"clock_event_reasons": None}  # an -q without the section: the query CSV's bitmask decides
THROTTLE_EXPECTED = Expected(equals=[], source="no hardware/thermal slowdown")


def test_idle_gpu_passes_naming_its_active_reasons() -> None:
    r = _g1(thermal.throttle, _doc())
    assert (r.gate, r.status, r.reason) == ("throttle", S.PASS, f"{G1}: no slowdown active (Idle)")
    assert r.measured == ["Idle"] and r.expected == THROTTLE_EXPECTED and r.evidence == SMI_Q


@pytest.mark.parametrize(("mask", "status", "why"), [
    ("0x0000000000000000", S.PASS, "no slowdown active"),
    ("0x0000000000000001", S.PASS, "no slowdown active (GPU Idle)"),
    ("0x0000000000000012", S.PASS, "no slowdown active (Applications Clocks Setting, Sync Boost)"),
    ("0x0000000000000100", S.PASS, "no slowdown active (Display Clock Setting)"),
    ("0x0000000000000004", S.WARN, "SW Power Cap active"),
    ("0x0000000000000008", S.FAIL, "HW Slowdown active"),
    ("0x0000000000000020", S.FAIL, "SW Thermal Slowdown active"),
    ("0x0000000000000040", S.FAIL, "HW Thermal Slowdown active"),
    ("0x0000000000000080", S.FAIL, "HW Power Brake Slowdown active"),
    ("0X00000000000000C5", S.FAIL, "HW Thermal Slowdown, HW Power Brake Slowdown active"),
    ("0x00000000000001FF", S.FAIL, "HW Slowdown, SW Thermal Slowdown, HW Thermal Slowdown, HW Power Brake "
                                   "Slowdown active"),
])
def test_query_bitmask_decodes_to_nvml_reasons(mask: str, status: S, why: str) -> None:
    r = _g1(thermal.throttle, _doc(MASK_ONLY, {"clocks_event_reasons.active": mask}))
    assert (r.status, r.reason) == (status, f"{G1}: {why}")


def test_full_bitmask_names_every_reason_in_nvml_order() -> None:
    r = _g1(thermal.throttle, _doc(MASK_ONLY, {"clocks_event_reasons.active": "0x1ff"}))
    assert r.measured == ["GPU Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown", "Sync Boost",
                          "SW Thermal Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown",
                          "Display Clock Setting"]


def test_older_drivers_throttle_reasons_column() -> None:
    """Drivers before 535 name the column `clocks_throttle_reasons.active`."""
    doc = _doc(MASK_ONLY, {"clocks_event_reasons.active": None, "clocks_throttle_reasons.active": "0x0000000000000040"})
    r = _g1(thermal.throttle, doc)
    assert (r.status, r.reason, r.measured) == (S.FAIL, f"{G1}: HW Thermal Slowdown active", ["HW Thermal Slowdown"])


@pytest.mark.parametrize("mask", [None, "[N/A]", "Not Supported", ""])
def test_reasons_not_reported_is_an_error(mask: str | None) -> None:
    r = _g1(thermal.throttle, _doc(MASK_ONLY, {"clocks_event_reasons.active": mask}))
    assert (r.status, r.reason) == (S.ERROR, f"{G1}: clock-event reasons not reported")
    assert r.measured is None and r.expected == THROTTLE_EXPECTED and r.evidence == SMI_Q


def test_nvidia_smi_q_section_wins_over_the_query_bitmask() -> None:
    flat = dict.fromkeys(BASE["nvidia_smi"]["q"]["gpus"][1]["clock_event_reasons"], False)
    r = _g1(thermal.throttle, _doc({"clock_event_reasons": {**flat, "HW Slowdown": True}},
                                   {"clocks_event_reasons.active": "0x0000000000000000"}))
    assert (r.status, r.reason, r.measured) == (S.FAIL, f"{G1}: HW Slowdown active", ["HW Slowdown"])
    calm = _g1(thermal.throttle, _doc({"clock_event_reasons": flat}, {"clocks_event_reasons.active": "0x08"}))
    assert (calm.status, calm.reason, calm.measured) == (S.PASS, f"{G1}: no slowdown active", [])


def _with_after(idle_mask: str, after_mask: str | None) -> dict[str, Any]:
    doc = _doc(MASK_ONLY, {"clocks_event_reasons.active": idle_mask})
    later = copy.deepcopy(doc["nvidia_smi"])
    if after_mask is None:
        later["query"][1].pop("clocks_event_reasons.active")
    else:
        later["query"][1]["clocks_event_reasons.active"] = after_mask
    doc["after"] = {"nvidia_smi": later, "kernel_log": doc.get("kernel_log")}
    return doc


@pytest.mark.parametrize(("idle", "after", "status", "why", "evidence"), [
    ("0x1", "0x1", S.PASS, "no slowdown active (GPU Idle)", SMI_Q),
    ("0x1", "0x0", S.PASS, "no slowdown active (GPU Idle)", SMI_Q),
    ("0x1", "0x40", S.FAIL, "HW Thermal Slowdown active after the load (the certification's own stress)",
     "raw.after_nvidia_smi_q_x"),
    ("0x1", "0x84", S.FAIL, "HW Power Brake Slowdown active after the load (the certification's own stress)",
     "raw.after_nvidia_smi_q_x"),
    ("0x1", "0xc0", S.FAIL, "HW Thermal Slowdown, HW Power Brake Slowdown active after the load (the "
                            "certification's own stress)", "raw.after_nvidia_smi_q_x"),
    ("0x1", "0x4", S.PASS, "no slowdown active (GPU Idle)", SMI_Q),  # power capping under load is expected
    ("0x4", "0x4", S.WARN, "SW Power Cap active", SMI_Q),
    ("0x8", "0x40", S.FAIL, "HW Slowdown active", SMI_Q),
    ("0x1", None, S.ERROR, "clock-event reasons not read after the load", SMI_Q),
])
def test_reasons_after_the_load(idle: str, after: str | None, status: S, why: str, evidence: str) -> None:
    r = _g1(thermal.throttle, _with_after(idle, after))
    assert (r.status, r.reason, r.evidence) == (status, f"{G1}: {why}", evidence)
    assert set(r.measured) == {"idle", "after"} and r.expected == THROTTLE_EXPECTED


def test_measured_holds_both_snapshots() -> None:
    r = _g1(thermal.throttle, _with_after("0x1", "0x44"))
    assert r.measured == {"idle": ["GPU Idle"], "after": ["SW Power Cap", "HW Thermal Slowdown"]}


def test_gpu_missing_from_the_snapshot_after_the_load_is_an_error() -> None:
    doc = _with_after("0x1", "0x1")
    doc["after"]["nvidia_smi"]["query"] = doc["after"]["nvidia_smi"]["query"][:1]
    del doc["after"]["nvidia_smi"]["q"]["gpus"][1]
    r = _g1(thermal.throttle, doc)
    assert (r.status, r.reason) == (S.ERROR, f"{G1}: clock-event reasons not read after the load")
    assert r.measured == {"idle": ["GPU Idle"], "after": None}


# ---- clocks ------------------------------------------------------------------------------------------------------

CLOCKS_EXPECTED = Expected(equals={"sm": 1980, "memory": 3201}, source=CATALOG)


@pytest.mark.parametrize(("q", "query", "status", "why", "measured"), [
    ({}, {}, S.PASS, "max clocks SM 1980 MHz, memory 3201 MHz", {"sm": 1980, "memory": 3201}),
    ({}, {"clocks.max.sm": 1979}, S.FAIL, "max sm clock 1979 MHz < 1980", {"sm": 1979, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 3200}}, {}, S.FAIL, "max memory clock 3200 MHz < 3201",
     {"sm": 1980, "memory": 3200}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 2619}}, {"clocks.max.sm": 1755}, S.FAIL,
     "max sm clock 1755 MHz < 1980; max memory clock 2619 MHz < 3201", {"sm": 1755, "memory": 2619}),
    # the query CSV is read first, the -q section when it lacks a column
    ({"max_clocks_mhz": {"sm": 1500, "memory": 3201}}, {}, S.PASS, "max clocks SM 1980 MHz, memory 3201 MHz",
     {"sm": 1980, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1500, "memory": 3201}}, {"clocks.max.sm": None}, S.FAIL,
     "max sm clock 1500 MHz < 1980", {"sm": 1500, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 1000}}, {"clocks.max.memory": 3201}, S.PASS,
     "max clocks SM 1980 MHz, memory 3201 MHz", {"sm": 1980, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 1000}}, {"clocks.max.mem": 3201}, S.PASS,
     "max clocks SM 1980 MHz, memory 3201 MHz", {"sm": 1980, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 1000}}, {"clocks.max.memory": 3300, "clocks.max.mem": 3000}, S.PASS,
     "max clocks SM 1980 MHz, memory 3300 MHz", {"sm": 1980, "memory": 3300}),
    ({"max_clocks_mhz": {"sm": 1980, "memory": 3201}}, {"clocks.max.sm": "[N/A]"}, S.PASS,
     "max clocks SM 1980 MHz, memory 3201 MHz", {"sm": 1980, "memory": 3201}),
    ({"max_clocks_mhz": {"sm": 1980}}, {}, S.PASS, "max clocks SM 1980 MHz", {"sm": 1980, "memory": None}),
    ({"max_clocks_mhz": None}, {}, S.PASS, "max clocks SM 1980 MHz", {"sm": 1980, "memory": None}),
    ({"max_clocks_mhz": None}, {"clocks.max.sm": None}, S.ERROR, "max SM clock not reported",
     {"sm": None, "memory": None}),
    ({"max_clocks_mhz": {"memory": 1000}}, {"clocks.max.sm": None}, S.ERROR, "max SM clock not reported",
     {"sm": None, "memory": 1000}),
])
def test_max_clocks(q: dict[str, Any], query: dict[str, Any], status: S, why: str,
                    measured: dict[str, float | None]) -> None:
    r = _g1(thermal.clocks, _doc(q, query))
    assert (r.gate, r.status, r.reason) == ("clocks", status, f"{G1}: {why}")
    assert r.measured == measured and r.unit == "MHz" and r.evidence == SMI_Q and r.expected == CLOCKS_EXPECTED


# ---- power limit -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("q", "query", "status", "why", "measured"), [
    ({}, {}, S.PASS, "power limit 700 W", 700.0),
    ({}, {"power.limit": 693.0}, S.PASS, "power limit 693 W", 693.0),
    ({}, {"power.limit": 692.5}, S.FAIL, "power limit 692.5 W below 700 W", 692.5),
    ({}, {"power.limit": 1000.0}, S.PASS, "power limit 1000 W", 1000.0),
    ({"power_limit_w": 500.0}, {}, S.PASS, "power limit 700 W", 700.0),  # the query CSV first
    ({"power_limit_w": 500.0}, {"power.limit": None}, S.FAIL, "power limit 500 W below 700 W", 500.0),
    ({"power_limit_w": None}, {"power.limit": "[N/A]"}, S.ERROR, "power limit not reported", None),
])
def test_power_limit(q: dict[str, Any], query: dict[str, Any], status: S, why: str, measured: float | None) -> None:
    r = _g1(thermal.power, _doc(q, query))
    assert (r.gate, r.status, r.reason, r.measured) == ("power", status, f"{G1}: {why}", measured)
    assert r.unit == "W" and r.evidence == SMI_Q and r.expected == Expected(floor=700, source=CATALOG)


# ---- temperatures ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("q", "query", "status", "why", "measured"), [
    ({}, {}, S.PASS, "GPU 35 C, memory 34 C", {"gpu": 35, "memory": 34}),
    ({}, {"temperature.gpu": 85}, S.PASS, "GPU 85 C, memory 34 C", {"gpu": 85, "memory": 34}),
    ({}, {"temperature.gpu": 86}, S.FAIL, "GPU 86 C / memory 34.0 C above 85 / 95 C", {"gpu": 86, "memory": 34}),
    ({"memory_temperature_c": 95}, {}, S.PASS, "GPU 35 C, memory 95 C", {"gpu": 35, "memory": 95}),
    ({"memory_temperature_c": 96}, {}, S.FAIL, "GPU 35 C / memory 96.0 C above 85 / 95 C", {"gpu": 35, "memory": 96}),
    ({"memory_temperature_c": 10}, {"temperature.memory": 96}, S.FAIL, "GPU 35 C / memory 96.0 C above 85 / 95 C",
     {"gpu": 35, "memory": 96}),
    ({"memory_temperature_c": None}, {}, S.PASS, "GPU 35 C", {"gpu": 35, "memory": None}),
    ({"temperature_c": 90}, {}, S.PASS, "GPU 35 C, memory 34 C", {"gpu": 35, "memory": 34}),  # the query CSV first
    ({"temperature_c": 90}, {"temperature.gpu": None}, S.FAIL, "GPU 90 C / memory 34.0 C above 85 / 95 C",
     {"gpu": 90, "memory": 34}),
    ({"temperature_c": None}, {"temperature.gpu": None}, S.ERROR, "temperature not reported",
     {"gpu": None, "memory": 34}),
])
def test_temperatures(q: dict[str, Any], query: dict[str, Any], status: S, why: str,
                      measured: dict[str, float | None]) -> None:
    r = _g1(thermal.temperature, _doc(q, query))
    assert (r.gate, r.status, r.reason, r.measured) == ("temperature", status, f"{G1}: {why}", measured)
    assert r.unit == "C" and r.evidence == SMI_Q and r.expected == Expected(ceiling=85, source=CATALOG)


@pytest.mark.parametrize(("gpu_c", "status"), [(70, S.PASS), (71, S.FAIL)])
def test_spec_gpu_temperature_limit_replaces_the_catalogs(gpu_c: int, status: S) -> None:
    r = _g1(thermal.temperature, _doc({}, {"temperature.gpu": gpu_c}), limits={"max_gpu_temp_c": 70})
    assert r.status is status and r.expected == Expected(ceiling=70, source=CATALOG)
    if status is S.FAIL:
        assert r.reason == f"{G1}: GPU 71 C / memory 34.0 C above 70 / 95 C"
