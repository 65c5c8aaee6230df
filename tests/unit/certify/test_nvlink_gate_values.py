"""The nvlink gate's verdicts on the real 2x H200 probe document, edited: link counts, speeds, the error counters
(nvidia-smi first, NVML second) judged over the run's window, and the exact sentence an operator reads."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from gridready.certify import measurements, nvlink
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_gates_public import exp

G0 = "GPU 0 (0000:00:06.0)"
G1 = "GPU 1 (0000:00:07.0)"
ZERO = {"replay": 0, "recovery": 0, "crc": 0}


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def _h200(**limits: int) -> Any:
    return exp("h200", 2, "passthrough", **({"limits": limits} if limits else {}))


def _smi_errors(doc: dict[str, Any], gpu: str = "0", link: str = "0", **counters: Any) -> None:
    doc["nvidia_smi"]["nvlink_errors"][gpu][link] = counters


def _by_gpu(res: list[Any]) -> dict[int | None, Any]:
    return {r.gpu: r for r in res}


def test_healthy_capture_passes_every_gpu_with_the_catalog_figures() -> None:
    res = nvlink.nvlink(_doc(), _h200())
    assert [(r.gpu, r.status, r.reason) for r in res] == [
        (0, S.PASS, f"{G0}: 18 of 18 links at 26.5625 GB/s, no errors"),
        (1, S.PASS, f"{G1}: 18 of 18 links at 26.5625 GB/s, no errors")]
    r = res[0]
    assert r.measured == {"active_links": 18, "inactive": [], "slow": [], "errors": ZERO,
                          "errors_after_load": None, "errors_during_run": None}
    assert r.expected.equals == {"active_links": 18, "gbps_per_link": 26.5625}
    assert r.expected.source == "catalog: H200-SXM-141GB 2 GPUs passthrough"
    assert r.evidence == "raw.nvidia_smi_nvlink_s" and r.gate == "nvlink"


def test_nvidia_smi_counters_are_summed_by_name_over_links() -> None:
    """Counter names are matched case-insensitively; unreadable values (N/A) are skipped, the link's others kept."""
    doc = _doc()
    _smi_errors(doc, link="0", **{"Replay Errors": "N/A", "Recovery Errors": 2, "CRC Errors": 3})
    _smi_errors(doc, link="1", **{"Replay Errors": 5, "Recovery Errors": 1, "CRC Errors": 7, "Other": 9})
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.measured["errors"] == {"replay": 5, "recovery": 3, "crc": 10}
    assert r.status is S.WARN
    assert r.reason == (f"{G0}: 18 links up; since reset recovery=3 crc=10 replay=5 (no snapshot after the load to "
                        "count this run's)")
    assert _by_gpu(nvlink.nvlink(doc, _h200()))[1].status is S.PASS


def test_nvml_counters_are_the_fallback_and_crc_data_is_not_counted() -> None:
    """The capture's NVML crc_data is non-zero on healthy links (unreliable on Hopper): only flit CRC counts."""
    doc = _doc()
    del doc["nvidia_smi"]["nvlink_errors"]
    assert nvlink.nvlink(doc, _h200())[0].status is S.PASS
    links = doc["nvml"]["gpus"][0]["nvlink"]["links"]
    links["0"]["errors"] = {"replay": 2, "recovery": None, "crc_flit": 4, "crc_data": 50}
    links["1"]["errors"] = {"replay": 1, "recovery": 1, "crc_flit": None}
    links["2"]["errors"] = None
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.measured["errors"] == {"replay": 3, "recovery": 1, "crc": 4}
    assert r.status is S.WARN and "since reset recovery=1 crc=4 replay=3" in r.reason


def test_no_counters_anywhere_is_an_error() -> None:
    doc = _doc()
    del doc["nvidia_smi"]["nvlink_errors"]
    for g in doc["nvml"]["gpus"]:
        g["nvlink"] = {}
    res = nvlink.nvlink(doc, _h200())
    assert [(r.status, r.reason) for r in res] == [(S.ERROR, f"{G0}: NVLink error counters not readable"),
                                                   (S.ERROR, f"{G1}: NVLink error counters not readable")]
    assert res[0].measured["errors"] is None


def test_sku_without_nvlink_is_not_applicable() -> None:
    e = _h200()
    e = dataclasses.replace(e, sku=e.sku.model_copy(update={"nvlink_links": 0}))
    (r,) = nvlink.nvlink(_doc(), e)
    assert r.status is S.SKIPPED and r.reason == "n/a: H200-SXM-141GB has no NVLink" and not r.required


def test_unknown_shape_is_an_error() -> None:
    (r,) = nvlink.nvlink(_doc(), exp("h200", 3, "baremetal"))
    assert r.status is S.ERROR and r.gate == "nvlink"


def test_shape_without_nvlinks_fails_when_links_are_up_and_is_na_when_none_are() -> None:
    one = exp("h200", 1, "passthrough")
    (bad,) = nvlink.nvlink(_doc(), one)
    assert bad.status is S.FAIL
    assert bad.reason == ("a 1 GPU passthrough node exposes no NVLinks, yet GPUs 0, 1 show active links: wrong shape "
                          "in the spec (gpus_per_node/platform)")
    assert bad.measured == {"0": [str(n) for n in range(18)], "1": [str(n) for n in range(18)]}
    assert bad.evidence == "raw.nvidia_smi_nvlink_s"
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]["links"] = {str(n): 0 for n in range(18)}
    (only1,) = nvlink.nvlink(doc, one)
    assert "yet GPUs 1 show active links" in only1.reason
    doc["nvidia_smi"]["nvlink_status"] = {"gpus": {}}
    (na,) = nvlink.nvlink(doc, one)
    assert na.status is S.SKIPPED
    assert na.reason == ("n/a: a 1 GPU passthrough H200-SXM-141GB node exposes no NVLinks (FIX-H200x1: 1 GPU in a VM, "
                         "fabric state N/A, `nvlink -s` empty; FM 1-GPU partition)")


def test_no_gpus_at_all_is_an_error() -> None:
    (r,) = nvlink.nvlink({"nvidia_smi": {}}, _h200())
    assert r.status is S.ERROR and r.reason == "no GPUs to read NVLink state from"


def test_gpus_known_only_from_nvlink_status_are_judged() -> None:
    doc = _doc()
    only = {"nvidia_smi": {"nvlink_status": doc["nvidia_smi"]["nvlink_status"],
                           "nvlink_errors": doc["nvidia_smi"]["nvlink_errors"]}}
    res = nvlink.nvlink(only, _h200())
    assert [(r.gpu, r.status, r.reason) for r in res] == [
        (0, S.PASS, "GPU 0: 18 of 18 links at 26.5625 GB/s, no errors"),
        (1, S.PASS, "GPU 1: 18 of 18 links at 26.5625 GB/s, no errors")]


def test_nvml_link_state_is_read_when_nvlink_status_is_missing() -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"] = None
    assert {r.status for r in nvlink.nvlink(doc, _h200())} == {S.PASS}
    links = doc["nvml"]["gpus"][1]["nvlink"]["links"]
    links["5"]["active"] = False
    links["9"]["active"] = False
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[1]
    assert r.status is S.FAIL and r.reason == f"{G1}: 16 of 18 NVLinks active (inactive: links 5, 9)"
    assert r.measured["inactive"] == ["5", "9"] and r.measured["slow"] == []


def test_link_state_readable_nowhere_is_an_error() -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"] = None
    doc["nvml"]["gpus"][0]["nvlink"] = {}
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.status is S.ERROR
    assert r.reason == f"{G0}: NVLink state not readable (nvidia-smi nvlink -s / NVML)"
    assert r.evidence == "raw.nvidia_smi_nvlink_s" and r.expected.equals["active_links"] == 18


def test_all_links_inactive_fails() -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["1"]["all_inactive"] = True
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[1]
    assert r.status is S.FAIL and r.reason == f"{G1}: all NVLinks inactive"


@pytest.mark.parametrize(("links", "reason"), [
    ({**{str(n): 26.562 for n in range(18)}, "3": 0, "7": None}, "16 of 18 NVLinks active (inactive: links 3, 7)"),
    ({str(n): 26.562 for n in range(17)}, "17 of 18 NVLinks active"),
])
def test_missing_links_fail_naming_them(links: dict[str, Any], reason: str) -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]["links"] = links
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.status is S.FAIL and r.reason == f"{G0}: {reason}"
    assert r.measured["active_links"] == len([s for s in links.values() if s])


@pytest.mark.parametrize(("speed", "status"), [(26.04, S.PASS), (26.02, S.FAIL)])
def test_link_speed_floor_is_98_percent_of_the_catalog_speed(speed: float, status: S) -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]["links"]["4"] = speed
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.status is status
    if status is S.FAIL:
        assert r.reason == f"{G0}: slow links link 4 {speed} GB/s"
        assert r.measured["slow"] == [f"link 4 {speed} GB/s"] and r.measured["active_links"] == 18


def _after(doc: dict[str, Any], **counters: int) -> dict[str, Any]:
    """The snapshot after the load: GPU 0's link 0 counters set to `counters` (the rest as before)."""
    smi = copy.deepcopy(doc["nvidia_smi"])
    smi["nvlink_errors"]["0"]["0"] = {"Replay Errors": counters.get("replay", 0),
                                      "Recovery Errors": counters.get("recovery", 0),
                                      "CRC Errors": counters.get("crc", 0)}
    doc["after"] = {"nvidia_smi": smi}
    return doc


def test_counts_during_the_run_are_after_minus_before() -> None:
    doc = _doc()
    _smi_errors(doc, **{"Replay Errors": 4, "Recovery Errors": 0, "CRC Errors": 1})
    _after(doc, replay=6, crc=1)
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.measured["errors"] == {"replay": 4, "recovery": 0, "crc": 1}
    assert r.measured["errors_after_load"] == {"replay": 6, "recovery": 0, "crc": 1}
    assert r.measured["errors_during_run"] == {"replay": 2, "recovery": 0, "crc": 0}
    assert r.status is S.WARN and r.reason == f"{G0}: 18 links up; since reset recovery=0 crc=1 replay=6"


def test_errors_only_before_the_run_warn_as_history() -> None:
    doc = _doc()
    _smi_errors(doc, **{"Replay Errors": 4, "Recovery Errors": 1, "CRC Errors": 2})
    _after(doc, replay=4, recovery=1, crc=2)
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.status is S.WARN
    assert r.reason == f"{G0}: 18 links up; since reset recovery=1 crc=2 replay=4, none during this run"
    ok = _by_gpu(nvlink.nvlink(doc, _h200()))[1]
    assert ok.status is S.PASS and ok.measured["errors_during_run"] == ZERO


@pytest.mark.parametrize(("crc", "replay", "status"), [(2, 3, S.WARN), (3, 3, S.FAIL), (0, 6, S.FAIL),
                                                       (6, 0, S.FAIL)])
def test_crc_plus_replay_during_the_run_against_the_limit(crc: int, replay: int, status: S) -> None:
    doc = _after(_doc(), crc=crc, replay=replay)
    r = _by_gpu(nvlink.nvlink(doc, _h200(nvlink_crc_replay=5)))[0]
    assert r.status is status, r.reason
    if status is S.FAIL:
        assert r.reason == (f"{G0}: NVLink errors during the certification run recovery=0 crc={crc} replay={replay} "
                            "(limit 5 CRC+replay, 0 recovery)")
        assert r.evidence == "raw.nvidia_smi_nvlink_e"


def test_one_recovery_during_the_run_fails() -> None:
    doc = _after(_doc(), recovery=1)
    r = _by_gpu(nvlink.nvlink(doc, _h200()))[0]
    assert r.status is S.FAIL
    assert r.reason == (f"{G0}: NVLink errors during the certification run recovery=1 crc=0 replay=0 (limit 1000 "
                        "CRC+replay, 0 recovery)")


def test_after_snapshot_without_gpu_rows_is_matched_by_index() -> None:
    doc = _doc()
    _after(doc, recovery=2)
    doc["after"]["nvidia_smi"] = {"nvlink_errors": doc["after"]["nvidia_smi"]["nvlink_errors"]}
    res = _by_gpu(nvlink.nvlink(doc, _h200()))
    assert res[0].status is S.FAIL and "recovery=2" in res[0].reason
    assert res[1].status is S.PASS and res[1].measured["errors_during_run"] == ZERO


def test_idle_nvml_counters_do_not_stand_in_for_the_snapshot_after_the_load() -> None:
    """nvidia-smi nvlink -e unread at idle and after the load: NVML's idle counters compared with themselves
    passed without any reading after the load."""
    doc = _doc()
    doc["nvml"] = {"gpus": [{"index": g["index"], "bus_id": g["bus_id"], "nvlink": {"links": {
        "0": {"errors": {"replay": 0, "recovery": 0, "crc_flit": 0}}}}} for g in measurements.gpus(doc)]}
    doc["nvidia_smi"].pop("nvlink_errors")
    doc["after"] = {"nvidia_smi": copy.deepcopy(doc["nvidia_smi"])}
    res = nvlink.nvlink(doc, _h200())
    assert [(r.status, r.reason) for r in res] == [
        (S.ERROR, f"{G0}: NVLink error counters not readable after the load"),
        (S.ERROR, f"{G1}: NVLink error counters not readable after the load")]


def test_counters_unreadable_after_the_load_are_an_error() -> None:
    doc = _doc()
    doc["nvml"] = {}
    doc["after"] = {"nvidia_smi": {k: v for k, v in doc["nvidia_smi"].items() if k != "nvlink_errors"}}
    res = nvlink.nvlink(doc, _h200())
    assert [(r.status, r.reason) for r in res] == [
        (S.ERROR, f"{G0}: NVLink error counters not readable after the load"),
        (S.ERROR, f"{G1}: NVLink error counters not readable after the load")]
