"""The merged per-GPU view over a probe document (gridready.certify.measurements): which source gives the index, the
bus id, the name and the device id, how rows of nvidia-smi `-q`, NVML, torch and sysfs join by bus id, and the view
after the load phases. Bus ids in the forms nvidia-smi (8-digit domain), NVML and lspci print them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import measurements as m
from tests.unit.certify.fixtures_io import h200_doc


@pytest.mark.parametrize(("raw", "want"), [
    ("00000000:19:00.0", "0000:19:00.0"),  # nvidia-smi: 8-digit domain
    ("00000001:1B:00.0", "0001:1b:00.0"),  # the domain's last four digits, lower case
    ("0000:19:00.0", "0000:19:00.0"),  # NVML / sysfs
    (" 0000:9A:00.0\n", "0000:9a:00.0"),
    ("19:00.0", "0000:19:00.0"),  # lspci without -D
    ("gpu0", "gpu0"),  # no colon: kept as given (lower case)
    ("A:B:C:D", "a:b:c:d"),
    ("", None),
    (None, None),
])
def test_bus_ids_in_every_form(raw: str | None, want: str | None) -> None:
    assert m._bus(raw) == want


Q_ROWS = [{"index": 1, "pci.bus_id": "00000000:1B:00.0", "name": "query-1", "pci.device_id": "0x233510DE"},
          {"index": 0, "pci.bus_id": "00000000:19:00.0", "name": "query-0"},
          {"index": "2", "pci.bus_id": "00000000:1C:00.0", "name": "not an int index"}]
Q_GPUS = [{"bus_id": "00000000:19:00.0", "name": "q-0", "device_id": "0x2335-q0"},
          {"bus_id": "00000000:1B:00.0", "name": "q-1", "device_id": "0x2335-q1"}]
NVML = [{"index": "0", "bus_id": "0000:19:00.0", "name": "nvml-0", "device_id": "nvml-dev-0"}]
TORCH = [{"index": 1, "h2d_gbps": 55.2}, {"index": 0, "h2d_gbps": 54.9}]
EPS = [{"bdf": "0000:19:00.0", "kind": "gpu", "current_width": 16},
       {"bdf": "0000:1b:00.0", "kind": "nic", "current_width": 16}]


def _doc(query: list[dict[str, Any]] | None = None, q: list[dict[str, Any]] | None = None,
         nvml: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return copy.deepcopy({"nvidia_smi": {"query": query, "q": {"gpus": q}}, "nvml": {"gpus": nvml},
                          "torch": {"gpus": TORCH}, "system": {"pcie_endpoints": EPS}})


def test_query_rows_give_index_and_bus_and_the_other_sources_join_by_bus() -> None:
    rows = m.gpus(_doc(Q_ROWS, Q_GPUS, NVML))
    assert [(r["index"], r["bus_id"], r["name"], r["device_id"]) for r in rows] == [
        (0, "0000:19:00.0", "query-0", "0x2335-q0"),  # no device id in the query row: -q's
        (1, "0000:1b:00.0", "query-1", "0x233510DE")]  # the string index "2" is not a query row
    zero, one = rows
    assert zero["query"] == Q_ROWS[1] and one["query"] == Q_ROWS[0]
    assert zero["q"] == Q_GPUS[0] and one["q"] == Q_GPUS[1]
    assert zero["nvml"] == NVML[0] and one["nvml"] == {}
    assert zero["torch"] == {"index": 0, "h2d_gbps": 54.9} and one["torch"] == {"index": 1, "h2d_gbps": 55.2}
    assert zero["sysfs"] == EPS[0] and one["sysfs"] is None  # sysfs rows of GPUs only


def test_with_query_rows_a_q_gpu_joins_only_by_bus() -> None:
    q = [{"bus_id": "00000000:AA:00.0", "name": "elsewhere"}, {"bus_id": "00000000:BB:00.0", "name": "elsewhere"}]
    rows = m.gpus(_doc(Q_ROWS, q))
    assert [r["q"] for r in rows] == [{}, {}]
    assert [r["device_id"] for r in rows] == [None, "0x233510DE"]


def test_without_query_rows_the_q_gpus_are_indexed_in_order() -> None:
    rows = m.gpus(_doc(None, Q_GPUS, NVML))
    assert [(r["index"], r["bus_id"], r["name"], r["device_id"], r["query"]) for r in rows] == [
        (0, "0000:19:00.0", "q-0", "0x2335-q0", {}), (1, "0000:1b:00.0", "q-1", "0x2335-q1", {})]
    assert rows[0]["nvml"] == NVML[0] and rows[1]["q"] == Q_GPUS[1]


def test_a_q_gpu_without_bus_id_joins_by_its_position() -> None:
    q = [{"name": "q-0", "device_id": 0x2335}]
    (row,) = m.gpus(_doc(None, q))
    assert (row["index"], row["bus_id"], row["q"], row["device_id"], row["sysfs"]) == (0, None, q[0], "9013", None)


def test_q_gpus_without_bus_ids_keep_their_own_counters() -> None:
    q = [{"name": "q-0", "device_id": "a"}, {"name": "q-1", "device_id": "b"}]
    rows = m.gpus(_doc(None, q))
    assert [(r["index"], r["bus_id"], r["q"], r["device_id"]) for r in rows] == [(0, None, q[0], "a"),
                                                                                  (1, None, q[1], "b")]
    nvml = [{"index": 0, "name": "nvml-0"}, {"index": 1, "name": "nvml-1"}]
    assert [r["nvml"] for r in m.gpus(_doc(None, None, nvml))] == [{}, {}]  # NVML joins by bus id only


def test_rows_follow_the_index_not_the_bus_order() -> None:
    query = [{"index": 1, "pci.bus_id": "00000000:19:00.0"}, {"index": 0, "pci.bus_id": "00000000:1B:00.0"},
             {"index": 2}]
    rows = m.gpus(_doc(query))
    assert [(r["index"], r["bus_id"]) for r in rows] == [(0, "0000:1b:00.0"), (1, "0000:19:00.0"), (2, None)]
    twice = m.gpus(_doc([Q_ROWS[1], Q_ROWS[1]]))  # a row printed twice stays two rows of one GPU
    assert [(r["index"], r["bus_id"]) for r in twice] == [(0, "0000:19:00.0"), (0, "0000:19:00.0")]


def test_nvml_alone_gives_the_rows() -> None:
    nvml = [{"index": "1", "bus_id": "0000:1B:00.0", "name": "nvml-1", "device_id": "nvml-dev-1"}, *NVML]
    rows = m.gpus(_doc(None, None, nvml))
    assert [(r["index"], r["bus_id"], r["name"], r["device_id"], r["q"]) for r in rows] == [
        (0, "0000:19:00.0", "nvml-0", "nvml-dev-0", {}), (1, "0000:1b:00.0", "nvml-1", "nvml-dev-1", {})]
    assert rows[1]["nvml"] == nvml[0] and rows[1]["torch"] == {"index": 1, "h2d_gbps": 55.2}


def test_name_and_device_id_fall_back_from_query_to_q_to_nvml() -> None:
    query = [{"index": 0, "pci.bus_id": "00000000:19:00.0"}]
    q = [{"bus_id": "00000000:19:00.0"}]
    (row,) = m.gpus(_doc(query, q, NVML))
    assert (row["name"], row["device_id"]) == ("nvml-0", "nvml-dev-0")
    (row,) = m.gpus(_doc(query, q, None))
    assert (row["name"], row["device_id"]) == (None, None)


def test_an_empty_document_has_no_gpus() -> None:
    assert m.gpus({}) == []
    assert m.gpus({"nvidia_smi": None, "nvml": None, "torch": None, "system": None}) == []


def test_the_real_h200_pair() -> None:
    rows = m.gpus(h200_doc())
    assert [(r["index"], r["bus_id"], r["name"], r["device_id"]) for r in rows] == [
        (0, "0000:00:06.0", "NVIDIA H200", "0x233510DE"), (1, "0000:00:07.0", "NVIDIA H200", "0x233510DE")]
    assert [r["sysfs"]["bdf"] for r in rows] == ["0000:00:06.0", "0000:00:07.0"]
    assert [r["torch"]["index"] for r in rows] == [0, 1] and all(r["nvml"] == {} for r in rows)
    assert m.by_bus(rows) == {"0000:00:06.0": rows[0], "0000:00:07.0": rows[1]}


@pytest.mark.parametrize(("row", "label"), [({"index": 3, "bus_id": "0000:1b:00.0"}, "GPU 3 (0000:1b:00.0)"),
                                            ({"index": 3, "bus_id": None}, "GPU 3"), ({"index": 0}, "GPU 0")])
def test_gpu_label(row: dict[str, Any], label: str) -> None:
    assert m.gpu_label(row) == label


def test_after_load_replaces_nvidia_smi_and_the_kernel_log_only() -> None:
    doc = _doc(Q_ROWS, Q_GPUS)
    doc["kernel_log"] = {"lines": ["idle"]}
    later_q = [{**Q_GPUS[0], "name": "q-0 later"}]
    doc["after"] = {"nvidia_smi": {"query": None, "q": {"gpus": later_q}}, "kernel_log": {"lines": ["loaded"]}}
    after = m.after_load(doc)
    assert after is not None
    assert after["nvidia_smi"] == doc["after"]["nvidia_smi"] and after["kernel_log"] == {"lines": ["loaded"]}
    assert after["torch"] is doc["torch"] and after["system"] is doc["system"]
    later = m.later_rows(doc)
    assert later is not None and list(later) == ["0000:19:00.0"]
    assert later["0000:19:00.0"]["name"] == "q-0 later"


@pytest.mark.parametrize("after", [None, [], "snapshot"])
def test_no_snapshot_after_the_load(after: Any) -> None:
    doc = _doc(Q_ROWS)
    if after is not None:
        doc["after"] = after
    assert m.after_load(doc) is None and m.later_rows(doc) is None
