"""The nvlink gate at the edges the other nvlink tests leave open: the 98% speed floor exactly on a 25 GB/s-per-link
SKU (24.5 GB/s, which `nvidia-smi nvlink -s` prints with its three decimals), two slow links named together, a single
error since reset, an unreadable GPU before a readable one, and more than ten GPUs known from `nvlink -s` alone
(ordered by number, not by text)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import nvlink
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_gates_public import exp

G0 = "GPU 0 (0000:00:06.0)"
G1 = "GPU 1 (0000:00:07.0)"


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def _h200(gbps: float | None = None) -> Expectations:
    base = exp("h200", 2, "passthrough")
    if gbps is None:
        return base
    return Expectations(node=base.node, sku=base.sku.model_copy(update={"nvlink_link_gbps": gbps}), gpus=2,
                        spec=base.spec, platform="passthrough")


@pytest.mark.parametrize(("speed", "status"), [(24.5, S.PASS), (24.499, S.FAIL), (24.501, S.PASS)])
def test_the_speed_floor_is_inclusive_at_98_percent_of_25_gbps(speed: float, status: S) -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]["links"] = {str(n): 25.0 for n in range(18)} | {"4": speed}
    r = next(r for r in nvlink.nvlink(doc, _h200(25.0)) if r.gpu == 0)
    assert r.status is status


def test_two_slow_links_are_named_together() -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_status"]["gpus"]["1"]["links"].update({"2": 13.281, "11": 20.0})
    r = next(r for r in nvlink.nvlink(doc, _h200()) if r.gpu == 1)
    assert (r.status, r.reason) == (S.FAIL, f"{G1}: slow links link 2 13.281 GB/s, link 11 20.0 GB/s")


def test_a_single_error_since_reset_warns() -> None:
    doc = _doc()
    doc["nvidia_smi"]["nvlink_errors"]["0"]["0"] = {"Replay Errors": 1, "Recovery Errors": 0, "CRC Errors": 0}
    r = next(r for r in nvlink.nvlink(doc, _h200()) if r.gpu == 0)
    assert r.status is S.WARN
    assert r.reason == (f"{G0}: 18 links up; since reset recovery=0 crc=0 replay=1 (no snapshot after the load to "
                        "count this run's)")


def test_an_unreadable_gpu_does_not_hide_the_next() -> None:
    doc = _doc()
    del doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]
    doc["nvml"]["gpus"][0]["nvlink"] = {}
    res = [(r.gpu, r.status) for r in nvlink.nvlink(doc, _h200())]
    assert res == [(0, S.ERROR), (1, S.PASS)]


def test_more_than_ten_gpus_from_nvlink_status_alone_are_in_number_order() -> None:
    doc = _doc()
    links = doc["nvidia_smi"]["nvlink_status"]["gpus"]["0"]
    errors = doc["nvidia_smi"]["nvlink_errors"]["0"]
    only = {"nvidia_smi": {"nvlink_status": {"gpus": {str(i): links for i in range(12)}},
                           "nvlink_errors": {str(i): errors for i in range(12)}}}
    base = exp("h200", 8, "baremetal")  # the gate reads its shape's link count; the GPU count is the document's
    assert [r.gpu for r in nvlink.nvlink(only, base)] == list(range(12))


def test_gpus_from_nvlink_status_alone_are_judged_over_a_snapshot_after_the_load() -> None:
    doc = _doc()
    smi = {"nvlink_status": doc["nvidia_smi"]["nvlink_status"], "nvlink_errors": doc["nvidia_smi"]["nvlink_errors"]}
    res = nvlink.nvlink({"nvidia_smi": smi, "after": {"nvidia_smi": copy.deepcopy(smi)}}, _h200())
    assert [(r.gpu, r.status, r.measured["errors_during_run"]) for r in res] == [
        (0, S.PASS, {"replay": 0, "recovery": 0, "crc": 0}), (1, S.PASS, {"replay": 0, "recovery": 0, "crc": 0})]


def test_the_snapshot_after_the_load_is_matched_by_bus_id_not_by_index() -> None:
    """After the load nvidia-smi numbered the two GPUs the other way round: each GPU's counters after the load are
    those of its own bus id."""
    doc = _doc()
    smi = copy.deepcopy(doc["nvidia_smi"])
    for row in smi["query"]:
        row["index"] = 1 - row["index"]
    smi["nvlink_errors"]["0"]["0"] = {"Replay Errors": 0, "Recovery Errors": 1, "CRC Errors": 0}  # bus 07 now
    doc["after"] = {"nvidia_smi": smi}
    res = {r.gpu: r for r in nvlink.nvlink(doc, _h200())}
    assert (res[0].status, res[1].status) == (S.PASS, S.FAIL)
    assert res[1].reason.startswith(f"{G1}: NVLink errors during the certification run recovery=1")
