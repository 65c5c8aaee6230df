"""ECC and row-remapping verdicts per GPU: each counter or flag that must fail the gate, the limits at their edge,
the snapshot after the load, and the exact sentence an operator reads. Built on the real h200x2 capture."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import memory_errors
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import h200_doc
from tests.unit.certify.test_gates_public import exp

BASE = h200_doc()
G1 = "GPU 1 (0000:00:07.0)"
SMI_Q = "raw.nvidia_smi_q"


def _doc(after: bool = False, **edits: dict[str, Any]) -> dict[str, Any]:
    """The capture with GPU 1's parsed `nvidia-smi -q` sections updated (`ecc`, `remap`, ...); with `after`, a
    snapshot after the load equal to the idle one, whose GPU 1 the `after_*` edits update."""
    doc = copy.deepcopy(BASE)
    later = copy.deepcopy(doc["nvidia_smi"])
    for key, val in edits.items():
        target = later if key.startswith("after_") else doc["nvidia_smi"]
        section = key.removeprefix("after_")
        q = target["q"]["gpus"][1]
        if isinstance(val, dict) and isinstance(q.get(section), dict):
            q[section] = {**q[section], **val}
        else:
            q[section] = val
    if after:
        doc["after"] = {"nvidia_smi": later, "kernel_log": doc.get("kernel_log")}
    return doc


def _g1(results: list[Any]) -> Any:
    (r,) = [r for r in results if r.gpu == 1]
    return r


def _ecc(doc: dict[str, Any], **limits: int) -> Any:
    return _g1(memory_errors.ecc(doc, exp("h200", 2, "passthrough", limits=limits)))


def _remap(doc: dict[str, Any], **limits: int) -> Any:
    return _g1(memory_errors.row_remap(doc, exp("h200", 2, "passthrough", limits=limits)))


# ---- no nvidia-smi -q at all ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("gate", "reason"), [
    (memory_errors.ecc, "no nvidia-smi -q output: ECC counters unknown"),
    (memory_errors.row_remap, "no nvidia-smi -q output: row remapping unknown"),
])
def test_no_nvidia_smi_q_is_one_error(gate: Any, reason: str) -> None:
    (r,) = gate({}, exp("h200", 2, "passthrough"))
    assert (r.gate, r.status, r.reason, r.evidence, r.gpu) == (gate.__name__, S.ERROR, reason, SMI_Q, None)


def test_query_rows_without_an_index_fall_back_to_the_q_sections() -> None:
    """A query CSV whose index column did not parse: the GPUs of `nvidia-smi -q` are still judged, by position,
    with the bus id that section printed ("unknown" names none)."""
    doc = copy.deepcopy(BASE)
    for row in doc["nvidia_smi"]["query"]:
        row["index"] = "[N/A]"
    doc["nvidia_smi"]["q"]["gpus"][0]["bus_id"] = "unknown"
    doc["nvidia_smi"]["q"]["gpus"][1]["ecc"]["volatile_dram_ue"] = 1
    doc["nvidia_smi"]["q"]["gpus"][1]["remap"]["pending"] = True
    bus1 = doc["nvidia_smi"]["q"]["gpus"][1]["bus_id"]
    ecc = memory_errors.ecc(doc, exp("h200", 2, "passthrough"))
    assert [(r.gpu, r.status, r.reason) for r in ecc] == [
        (0, S.PASS, "GPU 0: no uncorrectable ECC errors, correctable within limits"),
        (1, S.FAIL, f"GPU 1 ({bus1}): 1 uncorrectable DRAM errors since boot")]
    remap = memory_errors.row_remap(doc, exp("h200", 2, "passthrough"))
    assert [(r.gpu, r.status, r.reason) for r in remap] == [
        (0, S.PASS, "GPU 0: no pending or failed remapping"),
        (1, S.FAIL, f"GPU 1 ({bus1}): row remapping pending (reset the GPU, then re-certify)")]


# ---- ECC -------------------------------------------------------------------------------------------------------

def test_healthy_gpu_passes_with_its_counters_as_evidence() -> None:
    r = _ecc(_doc())
    assert r.status is S.PASS and r.reason == f"{G1}: no uncorrectable ECC errors, correctable within limits"
    assert r.measured == BASE["nvidia_smi"]["q"]["gpus"][1]["ecc"] and r.measured["volatile_dram_ue"] == 0
    assert (r.gate, r.evidence, r.expected) == ("ecc", SMI_Q, Expected(ceiling=0, source="spec limits"))


NO_COUNTERS = dict.fromkeys(BASE["nvidia_smi"]["q"]["gpus"][1]["ecc"])


@pytest.mark.parametrize("ecc", [{}, None, NO_COUNTERS])
def test_ecc_counters_not_reported_is_an_error(ecc: Any) -> None:
    doc = _doc()
    doc["nvidia_smi"]["q"]["gpus"][1]["ecc"] = ecc
    r = _ecc(doc)
    assert (r.status, r.reason, r.evidence) == (S.ERROR, f"{G1}: ECC counters not reported", SMI_Q)
    assert r.expected == Expected(ceiling=0, source="spec limits")


@pytest.mark.parametrize(("edits", "status", "why"), [
    ({"ecc_mode": "Disabled"}, S.FAIL, "ECC mode Disabled"),
    ({"ecc_mode": "Enabled"}, S.PASS, None),
    ({"ecc_mode": None}, S.PASS, None),  # a driver that prints no mode: the counters decide
    ({"ecc": {"volatile_dram_ue": 2}}, S.FAIL, "2 uncorrectable DRAM errors since boot"),
    ({"ecc": {"volatile_dram_ue": None}}, S.PASS, None),
    ({"ecc": {"volatile_sram_ue": 1}}, S.FAIL, "1 uncorrectable SRAM errors since boot"),
    ({"ecc": {"volatile_sram_ue": None}}, S.PASS, None),
    ({"ecc": {"aggregate_sram_ue": 1}}, S.FAIL, "aggregate SRAM uncorrectable 1 > 0"),
    ({"ecc": {"aggregate_sram_ue": None}}, S.PASS, None),
    ({"ecc": {"sram_threshold_exceeded": True}}, S.FAIL, "SRAM threshold exceeded"),
    ({"ecc": {"aggregate_sram_ce": 10_001}}, S.FAIL, "aggregate SRAM correctable 10001 > 10000"),
    ({"ecc": {"aggregate_sram_ce": None, "volatile_dram_ce": None}}, S.PASS, None),
    ({"ecc": {"volatile_dram_ce": 20_000_001}}, S.FAIL, "DRAM correctable 20000001 > 20000000"),
    ({"ecc": {"aggregate_dram_ue": 7, "aggregate_dram_ce": 9}}, S.PASS, None),  # DRAM history: remapping decides
])
def test_each_ecc_finding_at_idle(edits: dict[str, Any], status: S, why: str | None) -> None:
    r = _ecc(_doc(**edits))
    assert r.status is status
    assert r.reason == (f"{G1}: {why}" if why else f"{G1}: no uncorrectable ECC errors, correctable within limits")


def test_every_ecc_finding_is_listed_in_order() -> None:
    r = _ecc(_doc(ecc_mode="Disabled", ecc={"volatile_dram_ue": 3, "volatile_sram_ue": 4, "aggregate_sram_ue": 5,
                                            "sram_threshold_exceeded": True, "aggregate_sram_ce": 10_001,
                                            "volatile_dram_ce": 20_000_001}))
    assert r.status is S.FAIL
    assert r.reason == (f"{G1}: ECC mode Disabled; 3 uncorrectable DRAM errors since boot; 4 uncorrectable SRAM "
                        "errors since boot; aggregate SRAM uncorrectable 5 > 0; SRAM threshold exceeded; aggregate "
                        "SRAM correctable 10001 > 10000; DRAM correctable 20000001 > 20000000")


@pytest.mark.parametrize(("limits", "ecc", "status"), [
    ({"sram_ue_aggregate": 2}, {"aggregate_sram_ue": 2}, S.PASS),
    ({"sram_ue_aggregate": 2}, {"aggregate_sram_ue": 3}, S.FAIL),
    ({"sram_ce_aggregate": 5}, {"aggregate_sram_ce": 5}, S.PASS),
    ({"sram_ce_aggregate": 5}, {"aggregate_sram_ce": 6}, S.FAIL),
    ({"dram_ce_volatile": 7}, {"volatile_dram_ce": 7}, S.PASS),
    ({"dram_ce_volatile": 7}, {"volatile_dram_ce": 8}, S.FAIL),
])
def test_ecc_limits_of_the_spec_at_their_edge(limits: dict[str, int], ecc: dict[str, int], status: S) -> None:
    r = _ecc(_doc(ecc=ecc), **limits)
    assert r.status is status, r.reason


def test_spec_ue_limit_is_the_expected_ceiling() -> None:
    r = _ecc(_doc(ecc={"aggregate_sram_ue": 4}), sram_ue_aggregate=3)
    assert r.expected == Expected(ceiling=3, source="spec limits")
    assert r.reason == f"{G1}: aggregate SRAM uncorrectable 4 > 3"


@pytest.mark.parametrize(("idle", "later", "status", "why"), [
    ({}, {}, S.PASS, None),
    ({}, {"volatile_dram_ue": 1}, S.FAIL, "volatile_dram_ue 0 -> 1"),
    ({}, {"volatile_sram_ue": 2}, S.FAIL, "volatile_sram_ue 0 -> 2"),
    ({"volatile_sram_ue": None}, {"volatile_sram_ue": 2}, S.FAIL, "volatile_sram_ue 0 -> 2"),
    ({"volatile_dram_ue": None}, {"volatile_dram_ue": 1}, S.FAIL, "volatile_dram_ue 0 -> 1"),
    ({}, {"volatile_dram_ue": 1, "volatile_sram_ue": 1}, S.FAIL, "volatile_dram_ue 0 -> 1, volatile_sram_ue 0 -> 1"),
    ({}, {"volatile_sram_ue": None}, S.PASS, None),
])
def test_uncorrectable_errors_during_the_run(idle: dict[str, Any], later: dict[str, Any], status: S,
                                             why: str | None) -> None:
    r = _ecc(_doc(after=True, ecc=idle, after_ecc=later))
    assert r.status is status
    assert r.reason == (f"{G1}: uncorrectable errors during the certification run: {why}" if why else
                        f"{G1}: no uncorrectable ECC errors, correctable within limits")


def test_uncorrectable_errors_at_idle_and_more_during_the_run() -> None:
    r = _ecc(_doc(after=True, ecc={"volatile_dram_ue": 1}, after_ecc={"volatile_dram_ue": 3}))
    assert r.reason == (f"{G1}: 1 uncorrectable DRAM errors since boot; uncorrectable errors during the "
                        "certification run: volatile_dram_ue 1 -> 3")
    same = _ecc(_doc(after=True, ecc={"volatile_dram_ue": 3}, after_ecc={"volatile_dram_ue": 3}))
    assert same.reason == f"{G1}: 3 uncorrectable DRAM errors since boot"


@pytest.mark.parametrize("later", [{"volatile_dram_ue": None}, None])
def test_ecc_not_read_after_the_load_is_an_error(later: Any) -> None:
    r = _ecc(_doc(after=True, after_ecc=later))
    assert (r.status, r.reason) == (S.ERROR, f"{G1}: ECC counters not read after the load")
    assert r.evidence == SMI_Q and r.expected == Expected(ceiling=0, source="spec limits")


def test_ecc_gpu_missing_from_the_snapshot_after_the_load_is_an_error() -> None:
    doc = _doc(after=True)
    del doc["after"]["nvidia_smi"]["q"]["gpus"][1]
    doc["after"]["nvidia_smi"]["query"] = doc["after"]["nvidia_smi"]["query"][:1]
    assert [(r.gpu, r.status) for r in memory_errors.ecc(doc, exp("h200", 2, "passthrough"))] == [
        (0, S.PASS), (1, S.ERROR)]


def test_ecc_mode_off_still_reports_the_missing_reading_after_the_load() -> None:
    r = _ecc(_doc(after=True, ecc_mode="Disabled", after_ecc={"volatile_dram_ue": None}))
    assert (r.status, r.reason) == (S.ERROR, f"{G1}: ECC counters not read after the load")


# ---- row remapping and retired pages ----------------------------------------------------------------------------

def test_healthy_gpu_has_no_pending_remap() -> None:
    r = _remap(_doc())
    assert (r.gate, r.status, r.reason) == ("row_remap", S.PASS, f"{G1}: no pending or failed remapping")
    assert r.measured == {"remap": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
                          "retired_pages": {"pending": None, "single_bit": None, "double_bit": None}}
    assert r.expected == Expected(ceiling=512, source="spec limits") and r.evidence == SMI_Q


@pytest.mark.parametrize(("edits", "status", "why"), [
    ({"remap": None, "retired_pages": None}, S.ERROR, "neither remapped rows nor retired pages reported"),
    ({"remap": {"pending": None}}, S.ERROR, "neither remapped rows nor retired pages reported"),
    ({"remap": {"pending": True}}, S.FAIL, "row remapping pending (reset the GPU, then re-certify)"),
    ({"remap": {"pending": True, "failure": True}}, S.FAIL, "row remapping pending (reset the GPU, then re-certify)"),
    ({"remap": {"failure": True}}, S.FAIL, "row remapping failure occurred (RMA)"),
    ({"remap": {"uncorrectable": 512}}, S.PASS, "no pending or failed remapping"),
    ({"remap": {"uncorrectable": 513}}, S.FAIL, "513 rows remapped for uncorrectable errors > 512"),
    ({"remap": {"uncorrectable": None}}, S.PASS, "no pending or failed remapping"),
    ({"remap": {"correctable": 100_000}}, S.PASS, "no pending or failed remapping"),
    # pre-Ampere: retired pages instead of remapping
    ({"remap": None, "retired_pages": {"pending": False, "single_bit": 3, "double_bit": 0}}, S.PASS,
     "no pending or failed remapping"),
    ({"remap": None, "retired_pages": {"pending": True, "single_bit": 3, "double_bit": 1}}, S.FAIL,
     "retired page blacklist pending (SBE 3, DBE 1)"),
    ({"remap": {"pending": None}, "retired_pages": {"pending": True, "single_bit": 0, "double_bit": 2}}, S.FAIL,
     "retired page blacklist pending (SBE 0, DBE 2)"),
])
def test_each_remap_finding_at_idle(edits: dict[str, Any], status: S, why: str) -> None:
    r = _remap(_doc(**edits))
    assert (r.status, r.reason) == (status, f"{G1}: {why}")
    assert r.evidence == SMI_Q and r.expected == Expected(ceiling=512, source="spec limits")


@pytest.mark.parametrize(("limit", "count", "status"), [(0, 0, S.PASS), (0, 1, S.FAIL), (10, 10, S.PASS),
                                                        (10, 11, S.FAIL)])
def test_remap_limit_of_the_spec(limit: int, count: int, status: S) -> None:
    r = _remap(_doc(remap={"uncorrectable": count}), remap_uncorrectable=limit)
    assert r.status is status and r.expected == Expected(ceiling=limit, source="spec limits")
    if status is S.FAIL:
        assert r.reason == f"{G1}: {count} rows remapped for uncorrectable errors > {limit}"


@pytest.mark.parametrize(("later", "status", "why"), [
    ({}, S.PASS, "no pending or failed remapping"),
    ({"pending": True}, S.FAIL, "row remapping pending after the load: the certification run's own memory errors "
                                "(reset the GPU, then re-certify)"),
    ({"failure": True}, S.FAIL, "row remapping failure after the load: the certification run's own memory errors "
                                "(reset the GPU, then re-certify)"),
    ({"pending": True, "failure": True}, S.FAIL, "row remapping pending after the load: the certification run's "
                                                 "own memory errors (reset the GPU, then re-certify)"),
    ({"pending": None}, S.ERROR, "remapped rows not read after the load"),
    ({"uncorrectable": 600}, S.PASS, "no pending or failed remapping"),
])
def test_remapping_after_the_load(later: dict[str, Any], status: S, why: str) -> None:
    r = _remap(_doc(after=True, after_remap=later))
    assert (r.status, r.reason) == (status, f"{G1}: {why}")


def test_remap_gpu_missing_after_the_load_is_an_error() -> None:
    r = _remap(_doc(after=True, after_remap=None))
    assert (r.status, r.reason) == (S.ERROR, f"{G1}: remapped rows not read after the load")


def test_old_driver_without_remapping_needs_no_reading_after_the_load() -> None:
    """Retired pages (pre-Ampere) are read at idle; the after-load snapshot has no remap section to compare."""
    r = _remap(_doc(after=True, remap=None, retired_pages={"pending": False, "single_bit": 0, "double_bit": 0},
                    after_remap=None))
    assert (r.status, r.reason) == (S.PASS, f"{G1}: no pending or failed remapping")
    bad = _remap(_doc(after=True, remap=None, retired_pages={"pending": True, "single_bit": 1, "double_bit": 0},
                      after_remap=None))
    assert (bad.status, bad.reason) == (S.FAIL, f"{G1}: retired page blacklist pending (SBE 1, DBE 0)")


def test_idle_findings_come_before_the_reading_after_the_load() -> None:
    r = _remap(_doc(after=True, remap={"uncorrectable": 513}, after_remap={"pending": None}))
    assert r.reason == f"{G1}: 513 rows remapped for uncorrectable errors > 512"


def test_remap_gpu_absent_from_the_snapshot_after_the_load_is_an_error() -> None:
    doc = _doc(after=True)
    del doc["after"]["nvidia_smi"]["q"]["gpus"][1]
    doc["after"]["nvidia_smi"]["query"] = doc["after"]["nvidia_smi"]["query"][:1]
    assert [(r.gpu, r.status, r.reason) for r in memory_errors.row_remap(doc, exp("h200", 2, "passthrough"))] == [
        (0, S.PASS, "GPU 0 (0000:00:06.0): no pending or failed remapping"),
        (1, S.ERROR, f"{G1}: remapped rows not read after the load")]


def test_correctable_limits_of_zero_pass_zero_counts() -> None:
    r = _ecc(_doc(), sram_ce_aggregate=0, dram_ce_volatile=0)
    assert r.status is S.PASS, r.reason
    bad = _ecc(_doc(ecc={"aggregate_sram_ce": 1, "volatile_dram_ce": 1}), sram_ce_aggregate=0, dram_ce_volatile=0)
    assert bad.reason == f"{G1}: aggregate SRAM correctable 1 > 0; DRAM correctable 1 > 0"


@pytest.mark.parametrize("after", [False, True])
def test_an_unreadable_first_gpu_does_not_hide_the_next(after: bool) -> None:
    doc = _doc(after=after, ecc={"volatile_dram_ue": 1})
    gpu0 = (doc["after"]["nvidia_smi"] if after else doc["nvidia_smi"])["q"]["gpus"][0]
    gpu0["ecc"] = {**gpu0["ecc"], "volatile_dram_ue": None} if after else {}
    res = memory_errors.ecc(doc, exp("h200", 2, "passthrough"))
    assert [(r.gpu, r.status) for r in res] == [(0, S.ERROR), (1, S.FAIL)]


# ---- the GPU Recovery Action (NVIDIA "Error Recovery and Response Flags"; nvidia-smi -q `GPU Recovery Action`) ---

@pytest.mark.parametrize("action", ["GPU Reset", "Node Reboot", "Drain P2P", "Drain and Reset"])
@pytest.mark.parametrize("when", ["recovery_action", "after_recovery_action"])
def test_a_recovery_action_asked_for_fails(action: str, when: str) -> None:
    r = _remap(_doc(after=True, **{when: action}))
    assert (r.status, r.reason) == (S.FAIL, f"{G1}: nvidia-smi asks for a recovery action: {action} (NVIDIA error "
                                            "recovery flags: act on it, then re-certify)")


@pytest.mark.parametrize("action", ["None", None])
def test_recovery_action_none_or_not_printed_passes(action: str | None) -> None:
    assert _remap(_doc(after=True, recovery_action=action, after_recovery_action=action)).status is S.PASS


@pytest.mark.parametrize(("repair", "why"), [
    ({"channel_pending": True}, "channel repair pending (reset the GPU)"),
    ({"tpc_pending": True}, "TPC repair pending (reset the GPU)"),
    ({"channel_pending": True, "tpc_pending": True}, "channel and TPC repair pending (reset the GPU)"),
    ({"unrepairable": True, "tpc_pending": True}, "unrepairable memory (RMA)"),
])
def test_a_repair_pending_or_unrepairable_memory_fails(repair: dict[str, bool], why: str) -> None:
    """NVML's repair status and unrepairable-memory flag, printed by nvidia-smi -q (R580) under ECC Errors."""
    full = {"channel_pending": False, "tpc_pending": False, "unrepairable": False, **repair}
    r = _remap(_doc(repair=full))
    assert (r.status, r.reason) == (S.FAIL, f"{G1}: nvidia-smi asks for a recovery action: {why} (NVIDIA error "
                                            "recovery flags: act on it, then re-certify)")


def test_no_repair_pending_passes() -> None:
    r = _remap(_doc(repair={"channel_pending": False, "tpc_pending": False, "unrepairable": False}))
    assert r.status is S.PASS
