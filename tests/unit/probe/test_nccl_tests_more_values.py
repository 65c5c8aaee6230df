"""nccl-tests parsing by value, beyond test_nccl_tests_parse_values.py: every real captured run's summary and edge
rows, the `-J` JSON's fallbacks, binary lookup, and what malformed lines yield."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import nccl_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
PUBLIC = FIX / "public" / "nccl-tests"
NCCL_J = FIX / "h200x1" / "nccl-tests-J"

# parse_text's answer when nothing in the text is recognised
EMPTY = {"rows": [], "wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0, "hosts": [],
         "validation": None, "elided": False, "nccl_version": None, "collective": None, "errors": []}


def _row(size: int, count: int, oop: tuple[float, float, float, float | None],
         ip: tuple[float, float, float, float | None], type_: str = "float", redop: str = "sum") -> dict[str, Any]:
    keys = ("time_us", "algbw", "busbw", "wrong")
    return {"bytes": size, "count": count, "type": type_, "redop": redop, "oop": dict(zip(keys, oop, strict=True)),
            "ip": dict(zip(keys, ip, strict=True))}


# ---------------------------------------------------------------- real text outputs, whole summaries

# file -> (number of rows, summary without rows, first row, last row), values read off the files by eye
REAL = {
    "public/nccl-tests/all_reduce_perf__1node-8xA100-40GB__healthy-235GBps-validation-off__superbench.txt": (
        34, {"wrong_kind": "error", "out_of_bounds": 0, "avg_busbw": 68.4048, "ranks": 8, "hosts": ["localhost"],
             "validation": 0, "elided": False, "nccl_version": None, "collective": None, "errors": []},
        _row(0, 0, (35.2, 0.0, 0.0, None), (34.05, 0.0, 0.0, None)),
        _row(8589934592, 2147483648, (63896.0, 134.44, 235.26, None), (63959.0, 134.3, 235.03, None))),
    "public/nccl-tests/all_reduce_perf__1node-8xH100-NVLS__healthy-476GBps__nccl-tests-issue290.txt": (
        6, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 439.369, "ranks": 8, "hosts": ["node005"],
            "validation": 1, "elided": False, "nccl_version": None, "collective": None, "errors": []},
        _row(134217728, 33554432, (613.3, 218.85, 382.99, 0), (614.3, 218.48, 382.34, 0)),
        _row(4294967296, 1073741824, (15870.0, 270.63, 473.6, 0), (15773.0, 272.3, 476.53, 0))),
    "public/nccl-tests/all_reduce_perf__2node-16xA100-DGX-8xHDR200__healthy-188GBps__deepops.txt": (
        30, {"wrong_kind": "error", "out_of_bounds": 0, "avg_busbw": 53.7098, "ranks": 0, "hosts": [],
             "validation": None, "elided": False, "nccl_version": None, "collective": None, "errors": []},
        _row(8, 2, (38.63, 0.0, 0.0, 2e-07), (38.85, 0.0, 0.0, 1e-07)),
        _row(4294967296, 1073741824, (42715.0, 100.55, 188.53, 5e-07), (42677.0, 100.64, 188.7, 5e-07))),
    "public/nccl-tests/all_reduce_perf__2node-16xA100-p4de-EFA__healthy-78GBps__awsome-distributed-training.txt": (
        29, {"wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0, "hosts": [],
             "validation": None, "elided": False, "nccl_version": None, "collective": None, "errors": []},
        _row(8, 2, (164.3, 0.0, 0.0, 0), (163.3, 0.0, 0.0, 0)),
        _row(2147483648, 536870912, (51406.0, 41.78, 78.33, 0), (51406.0, 41.77, 78.33, 0))),
    "public/nccl-tests/all_reduce_perf__2node-16xH100-GCP-a3mega-TCPXO__healthy-339GBps__a3mega-fork.txt": (
        31, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 70.742, "ranks": 16,
             "hosts": ["ztan-mig-235z", "ztan-mig-gq73"], "validation": 1, "elided": False, "nccl_version": None,
             "collective": None, "errors": []},
        _row(8, 2, (135.8, 0.0, 0.0, 0), (123.5, 0.0, 0.0, 0)),
        _row(8589934592, 2147483648, (47535.0, 180.71, 338.82, 0), (47743.0, 179.92, 337.35, 0))),
    "public/nccl-tests/all_reduce_perf__2node-16xH100-IB-NDR__DEGRADED-155GBps-default-algo__nccl-tests-issue290.txt": (
        11, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 142.735, "ranks": 16,
             "hosts": ["node005", "node007"], "validation": 0, "elided": False, "nccl_version": None,
             "collective": None, "errors": []},
        _row(8388608, 2097152, (215.3, 38.96, 73.04, None), (180.0, 46.6, 87.38, None)),
        _row(8589934592, 2147483648, (103530.0, 82.97, 155.57, None), (103538.0, 82.96, 155.56, None))),
    "public/nccl-tests/all_reduce_perf__2node-RoCE-SRIOV-CX5-VF-k8s__LOW-23GBps-expected-for-hw__deepops.txt": (
        29, {"wrong_kind": "error", "out_of_bounds": 0, "avg_busbw": 7.76739, "ranks": 0, "hosts": [],
             "validation": None, "elided": False, "nccl_version": None, "collective": None, "errors": []},
        _row(8, 2, (2193.5, 0.0, 0.0, 2e-07), (132.2, 0.0, 0.0, 2e-07)),
        _row(2147483648, 536870912, (175667.0, 12.22, 22.92, 5e-07), (176189.0, 12.19, 22.85, 5e-07))),
    "public/nccl-tests/all_reduce_perf__8xGPU__FAIL-crashed-after-16G-rows-Test-NCCL-failure__EXCERPT__"
    "nccl-tests-issue322.txt": (
        5, {"wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0, "hosts": [],
            "validation": None, "elided": False, "nccl_version": None, "collective": None,
            "errors": ["HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO "
                       "for details) / '", ".. HCA-128 pid 757466: Test failure common.cu:915"]},
        _row(1073741824, 268435456, (19355.0, 55.48, 110.84, 0), (19189.0, 55.96, 111.8, 0)),
        _row(17179869184, 4294967296, (93457.0, 183.83, 367.29, 0), (93420.0, 183.9, 367.44, 0))),
    "public/nccl-tests/all_reduce_perf__DGX-H100-to-DGX-A100-100GbE__FAIL-wrong-nonzero-NCCL_PROTO-SIMPLE__EXCERPT__"
    "nccl-issue1184.txt": (
        3, {"wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0, "hosts": [],
            "validation": None, "elided": True, "nccl_version": None, "collective": None, "errors": []},
        _row(8, 2, (130.1, 0.0, 0.0, 0), (118.6, 0.0, 0.0, 0)),
        _row(524288, 131072, (663.1, 0.79, 0.79, 237858), (569.4, 0.92, 0.92, 238038))),
    "h200x1/nccl-tests-J/sendrecv_perf.txt": (
        3, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 49427.9, "ranks": 1, "hosts": ["vm"],
            "validation": 1, "elided": False, "nccl_version": 22809, "collective": "sendrecv", "errors": []},
        _row(67108864, 16777216, (41.29, 1625.2, 1625.2, 0), (1.56, 43143.0, 43143.0, None)),
        _row(268435456, 67108864, (158.85, 1689.9, 1689.9, 0), (1.6, 168066.0, 168066.0, None))),
    "h200x1/nccl-tests-J/alltoall_perf.txt": (
        3, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 0.0, "ranks": 1, "hosts": ["vm"],
            "validation": 1, "elided": False, "nccl_version": 22809, "collective": "alltoall", "errors": []},
        _row(67108864, 16777216, (34.87, 1924.4, 0.0, 0), (0.19, 347534.0, 0.0, None), redop="none"),
        _row(268435456, 67108864, (129.09, 2079.5, 0.0, 0), (0.38, 710053.0, 0.0, None), redop="none")),
    "h200x2/all_reduce_perf.txt": (
        31, {"wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 110.211, "ranks": 2, "hosts": ["vm"],
             "validation": 1, "elided": False, "nccl_version": 22809, "collective": "all_reduce", "errors": []},
        _row(8, 2, (23.38, 0.0, 0.0, 0), (19.8, 0.0, 0.0, 0)),
        _row(8589934592, 2147483648, (24905.7, 344.9, 344.9, 0), (25079.1, 342.51, 342.51, 0))),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_text_output_summary_and_end_rows(name: str) -> None:
    n_rows, summary, first, last = REAL[name]
    p = nccl_tests.parse_text((FIX / name).read_text())
    rows = p.pop("rows")
    assert p == summary
    assert (len(rows), rows[0], rows[-1]) == (n_rows, first, last)
    assert [r["bytes"] for r in rows] == sorted(r["bytes"] for r in rows)


def test_text_wrong_counts_are_exact_and_not_validated_is_none() -> None:
    p = nccl_tests.parse_text((NCCL_J / "sendrecv_perf.txt").read_text())
    assert [(r["oop"]["wrong"], r["ip"]["wrong"]) for r in p["rows"]] == [(0, None)] * 3
    assert [nccl_tests.validated_busbw(r) for r in p["rows"]] == [1625.2, 1612.9, 1689.9]  # in-place unchecked


# ---------------------------------------------------------------- text: what is read, what is skipped

HDR_WRONG = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
             "   busbw #wrong")
HDR_ERROR = ("#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw"
             "  error")
ROW = ("    1048576        262144     float     sum      -1    50.10   20.93   36.63      0    49.90   21.01   36.77"
       "      2")
ROW_PARSED = _row(1048576, 262144, (50.1, 20.93, 36.63, 0), (49.9, 21.01, 36.77, 2))


def test_empty_text_is_the_empty_summary() -> None:
    assert nccl_tests.parse_text("") == EMPTY
    assert nccl_tests.parse_text("#\n\n# Using devices\n") == EMPTY


@pytest.mark.parametrize(("lines", "kind"), [
    ([HDR_WRONG], "count"),
    ([HDR_ERROR], "error"),
    ([HDR_ERROR, HDR_WRONG], "count"),  # two runs in one log: the last header counts
    ([HDR_WRONG, HDR_ERROR], "error"),
    ([HDR_ERROR, "#       size    count   type   redop   time   algbw   busbw   time   algbw   busbw"], "error"),
    (["#       size    count   type   redop   time   algbw   busbw   time   algbw   busbw"], "count"),
    ([HDR_WRONG, "Warning: busbw below target, error margin 5%"], "count"),  # only a comment is a header
])
def test_wrong_column_kind_follows_the_last_column_header(lines: list[str], kind: str) -> None:
    assert nccl_tests.parse_text("\n".join(lines))["wrong_kind"] == kind


@pytest.mark.parametrize("bad", [
    "    1048576        262144     bogus     sum      -1    50.10   20.93   36.63      0    49.90   21.01   36.77 0",
    "    1048576        262144     float     sum    50.10   20.93   36.63      0    49.90   21.01   36.77",  # 11
    "    1048576        262144     float     sum      -1    50.10     n/a   36.63      0    49.90   21.01   36.77 0",
    "node1: 1048576 262144 float sum -1 50.10 20.93 36.63 0 49.90 21.01 36.77 0",  # a prefix it does not know
    "rank0 1048576 float sum -1 50.10 20.93 36.63 0 49.90 21.01 36.77 0",
    "#1048576 262144 float sum -1 50.10 20.93 36.63 0 49.90 21.01 36.77 0",  # a commented-out row
    ROW + " NCCL WARN Cuda failure 'out of memory'",  # a debug line interleaved with the row
    "1048576",
])
def test_a_line_that_is_not_a_row_is_skipped_and_the_next_row_read(bad: str) -> None:
    p = nccl_tests.parse_text("\n".join([HDR_WRONG, ROW, bad, ROW.replace("1048576", "2097152", 1)]))
    assert p["rows"] == [ROW_PARSED, {**ROW_PARSED, "bytes": 2097152}]
    assert p["errors"] == []


def test_summary_lines_after_each_other_all_read() -> None:
    text = "\n".join([HDR_WRONG, ROW, "# Out of bounds values : 2 FAILED", "# Avg bus bandwidth    : 36.63",
                      "# Collective test concluded: all_reduce_perf"])
    p = nccl_tests.parse_text(text)
    assert (p["out_of_bounds"], p["avg_busbw"], p["rows"]) == (2, 36.63, [ROW_PARSED])


def test_lines_after_the_summary_still_read() -> None:
    # a teardown failure printed after the summary, then a second run appended to the same log
    text = "\n".join([ROW, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 36.63",
                      "node1: Test NCCL failure common.cu:1300 'unhandled system error'",
                      "# Collective test starting: all_gather_perf", ROW, "# Avg bus bandwidth    : 40.5"])
    p = nccl_tests.parse_text(text)
    assert p["errors"] == ["node1: Test NCCL failure common.cu:1300 'unhandled system error'"]
    assert (p["collective"], p["avg_busbw"], p["rows"]) == ("all_gather", 40.5, [ROW_PARSED, ROW_PARSED])


@pytest.mark.parametrize(("lines", "ranks", "hosts"), [
    (["#  Rank  0 Pid 9 on bare", "#  Rank  1 Pid 9 on bare"], 2, []),  # no `device`: counted, host not known
    (["#  Rank  0 Group  0 Pid   1250 on         vm device  0 [0000:00:06] NVIDIA H200",
      "#  Rank  1 Pid 9", "#  rank  2 Pid 9", "# Ranks 3"], 2, ["vm"]),
    (["#  Rank  0 Group 0 Pid 1 on a device  7 [0x1] H100", "#  Rank  1 Group 0 Pid 2 on b device  7 [0x2] H100",
      "#  Rank  2 Group 0 Pid 3 on a device  6 [0x3] H100"], 3, ["a", "b"]),
])
def test_rank_lines_count_and_hosts(lines: list[str], ranks: int, hosts: list[str]) -> None:
    p = nccl_tests.parse_text("\n".join([*lines, ROW]))
    assert (p["ranks"], p["hosts"], p["rows"]) == (ranks, hosts, [ROW_PARSED])


def test_failure_lines_kept_word_for_word_and_the_table_read_on() -> None:
    text = "\n".join([HDR_WRONG, "node2: Test CUDA failure common.cu:892 'out of memory'", ROW,
                      "[1,0]<stdout>:node2: NCCL error in: enqueue.cc:1 'unhandled system error'",
                      "ORTE was unable to reliably start one or more daemons.", "plain NCCL INFO line"])
    p = nccl_tests.parse_text(text)
    assert p["errors"] == ["node2: Test CUDA failure common.cu:892 'out of memory'",
                           "node2: NCCL error in: enqueue.cc:1 'unhandled system error'",
                           "ORTE was unable to reliably start one or more daemons."]
    assert p["rows"] == [ROW_PARSED]


@pytest.mark.parametrize(("marker", "elided"), [("...", True), ("[...]", True), ("....", True), ("[..]", False)])
def test_elision_markers(marker: str, elided: bool) -> None:
    p = nccl_tests.parse_text("\n".join([ROW, marker, ROW]))
    assert (p["elided"], len(p["rows"])) == (elided, 2)


def test_a_row_whose_count_is_not_a_number_is_skipped() -> None:  # it raised ValueError before
    assert nccl_tests.parse_text("8 x float sum -1 1 2 3 0 1 2 3 0")["rows"] == []


# ---------------------------------------------------------------- JSON

JSON_DEFAULTS = {"rows": [], "wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0,
                 "hosts": [], "validation": None, "elided": False, "nccl_version": None, "collective": None,
                 "errors": []}


@pytest.mark.parametrize(("doc", "changed"), [
    ({}, {}),
    ({"results": []}, {}),
    ({"nccl_version": 22809, "version": 3}, {"nccl_version": 22809}),  # numbers of other keys are no bound count
    ({"config": {"nthreads": 1}}, {}),  # nor are dicts of other keys
    ({"out_of_bounds": {"count": 3, "okay": "false"}, "average_bus_bandwidth": {"bandwidth": 9.5, "okay": "true"}},
     {"out_of_bounds": 3, "avg_busbw": 9.5}),
    ({"out_of_bounds": {"count": 0, "value": 2}}, {"out_of_bounds": 2}),
    ({"out_of_bounds": {"value": 5}}, {"out_of_bounds": 5}),
    ({"out_of_bounds": {"okay": "true"}}, {"out_of_bounds": 0}),
    ({"out_of_bounds": 7.0, "config": {"validation": 0}}, {"out_of_bounds": 7, "validation": 0}),
    ({"args": ["/opt/nccl-tests/bin/all_reduce_perf"], "config": {"collective": "broadcast"}},
     {"collective": "broadcast"}),
    ({"args": ["mystery"]}, {}),
    ({"args": []}, {}),
    ({"errors": ["", "NCCL failure common.cu:1 'x'", ""]}, {"errors": ["NCCL failure common.cu:1 'x'"]}),
    ({"errors": None}, {}),
    ({"config": {"ngpus": 4}}, {"ranks": 4}),
    ({"config": {"ngpus": 4, "devices": [{"rank": 0, "hostname": "n1"}, {"rank": 1, "hostname": "n2"}]}},
     {"ranks": 2, "hosts": ["n1", "n2"]}),
])
def test_json_top_level_fields(doc: dict[str, Any], changed: dict[str, Any]) -> None:
    assert nccl_tests.parse_json(json.dumps(doc)) == {**JSON_DEFAULTS, **changed}


@pytest.mark.parametrize(("part", "want"), [
    ({"time": 41.29395, "cpu_time": 40.0, "alg_bw": 1.5, "bus_bw": 2.5, "nwrong": 0.0},
     {"time_us": 41.29395, "algbw": 1.5, "busbw": 2.5, "wrong": 0}),
    ({"cpu_time": 40.0, "alg_bw": 1.5, "bus_bw": 2.5, "nwrong": 3.0}, {"time_us": 40.0, "algbw": 1.5, "busbw": 2.5,
                                                                        "wrong": 3}),
    ({"alg_bw": 1.5}, {"time_us": None, "algbw": 1.5, "busbw": None, "wrong": None}),
    ({"time": 1.0, "nwrong": 0.5}, {"time_us": 1.0, "algbw": None, "busbw": None, "wrong": 0.5}),
    ({"time": 1.0, "nwrong": None}, {"time_us": 1.0, "algbw": None, "busbw": None, "wrong": None}),
])
def test_json_result_part_fields(part: dict[str, Any], want: dict[str, Any]) -> None:
    doc = {"results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "out_of_place": part,
                        "in_place": "absent"}]}
    (row,) = nccl_tests.parse_json(json.dumps(doc))["rows"]
    assert row == {"bytes": 8, "count": 2, "type": "float", "redop": "sum", "oop": want, "ip": None}
    assert type(row["oop"]["wrong"]) is type(want["wrong"])  # a whole 0.0 becomes the int 0


@pytest.mark.parametrize("name", ["all_gather", "all_reduce", "alltoall", "reduce_scatter", "sendrecv"])
def test_real_json_agrees_with_its_text_run(name: str) -> None:
    js = nccl_tests.parse_json((NCCL_J / f"{name}_perf.json").read_text())
    txt = nccl_tests.parse_text((NCCL_J / f"{name}_perf.txt").read_text())
    assert {k: v for k, v in js.items() if k not in ("rows", "avg_busbw")} == {
        k: v for k, v in txt.items() if k not in ("rows", "avg_busbw")}
    assert js["avg_busbw"] == pytest.approx(txt["avg_busbw"], abs=0.05)
    assert [(r["bytes"], r["count"], r["type"], r["redop"]) for r in js["rows"]] == [
        (r["bytes"], r["count"], r["type"], r["redop"]) for r in txt["rows"]]
    for j, t in zip(js["rows"], txt["rows"], strict=True):
        for side in ("oop", "ip"):
            assert j[side]["wrong"] == t[side]["wrong"]
            assert j[side]["busbw"] == pytest.approx(t[side]["busbw"], rel=5e-3, abs=0.01)


def test_real_sendrecv_json_values() -> None:
    p = nccl_tests.parse_json((NCCL_J / "sendrecv_perf.json").read_text())
    assert p["rows"][0] == {"bytes": 67108864, "count": 16777216, "type": "float", "redop": "sum",
                            "oop": {"time_us": 41.29395, "algbw": 1625.150028, "busbw": 1625.150028, "wrong": 0},
                            "ip": {"time_us": 1.5555, "algbw": 43142.953391, "busbw": 43142.953391, "wrong": None}}
    assert (p["avg_busbw"], p["out_of_bounds"], p["collective"], p["errors"]) == (49427.87681, 0, "sendrecv", [])


# ---------------------------------------------------------------- validated_busbw

@pytest.mark.parametrize(("row", "busbw"), [
    ({}, None),
    ({"oop": None, "ip": None}, None),
    ({"oop": {"busbw": "n/a", "wrong": 0}, "ip": {"busbw": 3.0, "wrong": None}}, 3.0),
    ({"oop": {"busbw": 1625.2, "wrong": 0}, "ip": {"busbw": 43143.0, "wrong": None}}, 1625.2),
    ({"oop": None, "ip": {"busbw": 7.5, "wrong": 1}}, 7.5),
])
def test_validated_busbw_values(row: dict[str, Any], busbw: float | None) -> None:
    assert nccl_tests.validated_busbw(row) == busbw


# ---------------------------------------------------------------- find_binary


def _exe(path: Path, executable: bool = True) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return str(path)


@pytest.fixture
def opt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two installed versions under tmp/opt/nccl-tests/<v>/bin, searched instead of the real /opt."""
    monkeypatch.setattr(nccl_tests, "which", lambda name: None)
    monkeypatch.setattr(nccl_tests, "SEARCH", (str(tmp_path / "opt/nccl-tests/*/bin"),))
    _exe(tmp_path / "opt/nccl-tests/2.18.3/bin/all_reduce_perf")
    _exe(tmp_path / "opt/nccl-tests/2.19.6/bin/all_reduce_perf")
    _exe(tmp_path / "opt/nccl-tests/2.19.6/bin/sendrecv_perf", executable=False)
    _exe(tmp_path / "opt/nccl-tests/2.18.3/bin/sendrecv_perf")
    return tmp_path


def test_path_wins_and_the_default_name_is_all_reduce(opt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_tests, "which", {"all_reduce_perf": "/usr/bin/all_reduce_perf"}.get)
    assert nccl_tests.find_binary() == "/usr/bin/all_reduce_perf"
    assert nccl_tests.find_binary("all_reduce_perf", str(opt)) == "/usr/bin/all_reduce_perf"


def test_highest_version_directory_first(opt: Path) -> None:
    assert nccl_tests.find_binary() == str(opt / "opt/nccl-tests/2.19.6/bin/all_reduce_perf")


def test_a_file_that_is_not_executable_is_passed_over(opt: Path) -> None:
    assert nccl_tests.find_binary("sendrecv_perf") == str(opt / "opt/nccl-tests/2.18.3/bin/sendrecv_perf")


def test_extra_dir_before_the_usual_places(opt: Path) -> None:
    own = _exe(opt / "mybuild/all_reduce_perf")
    assert nccl_tests.find_binary("all_reduce_perf", str(opt / "mybuild")) == own
    assert nccl_tests.find_binary("all_reduce_perf", str(opt / "empty")) == str(
        opt / "opt/nccl-tests/2.19.6/bin/all_reduce_perf")


def test_not_found_anywhere_is_none(opt: Path) -> None:
    assert nccl_tests.find_binary("alltoall_perf", str(opt)) is None
    assert os.access(opt / "opt/nccl-tests/2.19.6/bin/all_reduce_perf", os.X_OK)
