"""nccl-tests output read value by value: the real 2.19.6 H200 run (tests/fixtures/h200x1/nccl-tests-J), its lines
as srun and mpirun print them, and the JSON file's layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridready.probe import nccl_tests

NCCL_J = Path(__file__).resolve().parents[2] / "fixtures" / "h200x1" / "nccl-tests-J"
AR = (NCCL_J / "all_reduce_perf.txt").read_text()
AR_ROW0 = {"bytes": 67108864, "count": 16777216, "type": "float", "redop": "sum",
           "oop": {"time_us": 35.01, "algbw": 1916.7, "busbw": 0.0, "wrong": 0},
           "ip": {"time_us": 0.34, "algbw": 197060.0, "busbw": 0.0, "wrong": 0}}


def test_text_h200_header_facts_and_rows() -> None:
    p = nccl_tests.parse_text(AR)
    assert p["rows"][0] == AR_ROW0 and [r["bytes"] for r in p["rows"]] == [64 << 20, 128 << 20, 256 << 20]
    assert {k: v for k, v in p.items() if k != "rows"} == {
        "wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 0.0, "ranks": 1, "hosts": ["vm"], "validation": 1,
        "elided": False, "nccl_version": 22809, "collective": "all_reduce", "errors": []}


@pytest.mark.parametrize("prefix", ["0: ", "  12: ", "[1,0]<stdout>: ", "[1,3]<stderr>:"])
def test_text_launcher_prefixes_read_as_the_plain_output(prefix: str) -> None:
    tagged = "\n".join(prefix + ln for ln in AR.splitlines())
    assert nccl_tests.parse_text(tagged) == nccl_tests.parse_text(AR)


def test_text_ranks_on_two_hosts() -> None:
    lines = ["#  Rank  0 Group  0 Pid   1206 on      node1 device  0 [0x19] NVIDIA H100",
             "#  Rank  1 Group  0 Pid   1207 on      node1 device  1 [0x3b] NVIDIA H100",
             "#  Rank  2 Group  0 Pid   2206 on      node2 device  0 [0x19] NVIDIA H100",
             "#  Rank  3 Pid 9 unparsed layout"]
    p = nccl_tests.parse_text("\n".join(lines))
    assert (p["ranks"], p["hosts"]) == (4, ["node1", "node2"])


def test_text_failures_validation_off_and_elision() -> None:
    text = "\n".join([
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 0",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong",
        "           8             2     float     sum      -1    10.00    0.00    0.00    N/A    10.00    0.00    0.00"
        "    N/A",
        "...",
        "node1: Test NCCL failure common.cu:1005 'unhandled system error'",
        "node1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 8",
        "# Out of bounds values : 3 FAILED",
        "# Avg bus bandwidth    : 12.5 ",
    ])
    p = nccl_tests.parse_text(text)
    assert p["validation"] == 0 and p["elided"] is True and p["out_of_bounds"] == 3 and p["avg_busbw"] == 12.5
    assert p["errors"] == ["node1: Test NCCL failure common.cu:1005 'unhandled system error'"]
    (row,) = p["rows"]
    assert row["oop"] == {"time_us": 10.0, "algbw": 0.0, "busbw": 0.0, "wrong": None}
    assert row["ip"]["wrong"] is None


def test_text_rows_without_root_and_old_error_column() -> None:
    text = "\n".join([
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "  1048576        262144     float     sum    50.10   20.93   36.63  5e-07    49.90   21.01   36.77  4e-07",
        "  2097152        524288      half    prod    60.00   34.95   61.16  0e+00    59.00   35.54   62.20  0e+00",
        "  4194304       1048576     bogus     sum    60.00   34.95   61.16  0e+00    59.00   35.54   62.20  0e+00",
        "  8388608       2097152     float     sum    60.00   n/a     61.16  0e+00    59.00   35.54   62.20  0e+00",
        "  8388608       2097152     float     sum    60.00   34.95",
        "[...]",
    ])
    p = nccl_tests.parse_text(text)
    assert p["wrong_kind"] == "error" and p["elided"] is True
    assert [(r["bytes"], r["count"], r["type"], r["redop"]) for r in p["rows"]] == [
        (1048576, 262144, "float", "sum"), (2097152, 524288, "half", "prod")]
    assert p["rows"][0]["oop"] == {"time_us": 50.1, "algbw": 20.93, "busbw": 36.63, "wrong": 5e-07}
    assert p["rows"][0]["ip"] == {"time_us": 49.9, "algbw": 21.01, "busbw": 36.77, "wrong": 4e-07}


def test_text_rooted_collective_row() -> None:
    row = ("     1024       256     float     sum       3    12.00    0.09    0.08      1"
           "    11.00    0.09    0.09      0")
    (r,) = nccl_tests.parse_text("# Collective test starting: reduce_perf\n" + row)["rows"]
    assert (r["oop"]["time_us"], r["oop"]["wrong"], r["ip"]["time_us"], r["ip"]["busbw"]) == (12.0, 1, 11.0, 0.09)
    assert nccl_tests.parse_text("# Collective test starting: reduce_perf\n")["collective"] == "reduce"


def test_json_h200_matches_its_header() -> None:
    p = nccl_tests.parse_json((NCCL_J / "all_reduce_perf.json").read_text())
    assert p["rows"][0]["oop"] == {"time_us": 35.0135, "algbw": 1916.656832, "busbw": 0.0, "wrong": 0}
    assert isinstance(p["rows"][0]["oop"]["wrong"], int)
    assert {k: v for k, v in p.items() if k != "rows"} == {
        "wrong_kind": "count", "out_of_bounds": 0, "avg_busbw": 0.0, "ranks": 1, "hosts": ["vm"], "validation": 1,
        "elided": False, "nccl_version": 22809, "collective": "all_reduce", "errors": []}


@pytest.mark.parametrize(("extra", "key", "value"), [
    ({"out_of_bounds": 4}, "out_of_bounds", 4),
    ({"out_of_bounds": {"value": 2, "okay": False}}, "out_of_bounds", 2),
    ({"out_of_bounds": {"count": 0, "okay": True}}, "out_of_bounds", 0),
    ({"average_bus_bandwidth": 88.5}, "avg_busbw", 88.5),
    ({"average_bus_bandwidth": {"bandwidth": 77.25, "okay": True}}, "avg_busbw", 77.25),
    ({"errors": ["", "NCCL failure x"]}, "errors", ["NCCL failure x"]),
    ({"config": {"ngpus": 8, "collective": "broadcast"}}, "ranks", 8),
    ({"config": {"collective": "broadcast"}}, "collective", "broadcast"),
    ({"config": {"devices": [{"hostname": "a"}, {"hostname": "b"}, {"hostname": "a"}, {"rank": 3}]}}, "hosts",
     ["a", "b"]),
    ({"config": {"devices": [{"hostname": "a"}, {"hostname": "b"}, {"rank": 3}]}}, "ranks", 3),
    ({"args": ["/opt/nccl-tests/bin/alltoall_perf"]}, "collective", "alltoall"),
    ({"args": ["/usr/bin/mystery"]}, "collective", None),
    ({}, "ranks", 0),
])
def test_json_layouts(extra: dict, key: str, value: object) -> None:
    doc = {"results": [{"size": "1024", "count": 256, "type": "float", "redop": "sum",
                        "out_of_place": {"cpu_time": 9.5, "alg_bw": 1.5, "bus_bw": 2.5, "nwrong": 1.0},
                        "in_place": None}], **extra}
    p = nccl_tests.parse_json(json.dumps(doc))
    assert p[key] == value
    assert p["rows"] == [{"bytes": 1024, "count": 256, "type": "float", "redop": "sum",
                          "oop": {"time_us": 9.5, "algbw": 1.5, "busbw": 2.5, "wrong": 1}, "ip": None}]


@pytest.mark.parametrize(("row", "busbw"), [
    ({"oop": {"busbw": 10.0, "wrong": 0}, "ip": {"busbw": 12.0, "wrong": None}}, 10.0),
    ({"oop": {"busbw": 10.0, "wrong": None}, "ip": {"busbw": 12.0, "wrong": None}}, 12.0),
    ({"oop": {"busbw": 10.0, "wrong": 0}, "ip": {"busbw": 11.0, "wrong": 0}}, 11.0),
    ({"oop": None, "ip": {"busbw": "x", "wrong": 0}}, None),
])
def test_validated_busbw_prefers_checked_columns(row: dict, busbw: float | None) -> None:
    assert nccl_tests.validated_busbw(row) == busbw
