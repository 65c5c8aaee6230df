"""nvbandwidth output edge cases: waived testcases, a SUM line alone, output without a version banner."""

from __future__ import annotations

from gridready.probe import nvbandwidth
from tests.unit.certify.fixtures_io import pub


def test_waived_testcase_has_no_matrix_and_no_sum() -> None:
    p = nvbandwidth.parse("nvbandwidth Version: v0.6\nRunning device_to_device_memcpy_write_ce.\nWaived:\n")
    assert p == {"version": "v0.6", "tests": {"device_to_device_memcpy_write_ce": {"matrix": {}, "sum": None}}}


def test_sum_line_without_its_running_line() -> None:
    p = nvbandwidth.parse("SUM host_to_device_memcpy_ce 1985.60\n")
    assert p == {"version": None, "tests": {"host_to_device_memcpy_ce": {"matrix": {}, "sum": 1985.6}}}


def test_numbers_before_any_testcase_are_not_a_matrix() -> None:
    text = "0 1\n0 5.00 6.00\n" + pub("nvbandwidth", "GH200")
    assert nvbandwidth.parse(text) == nvbandwidth.parse(pub("nvbandwidth", "GH200"))


def test_matrix_rows_and_the_diagonal() -> None:
    text = ("Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           0         1\n 0       N/A    389.50\n 1    388.25       N/A\n\n"
            "SUM device_to_device_memcpy_read_ce 777.75\n")
    t = nvbandwidth.parse(text)["tests"]["device_to_device_memcpy_read_ce"]
    assert t == {"matrix": {"0": {"0": None, "1": 389.5}, "1": {"0": 388.25, "1": None}}, "sum": 777.75}


def test_short_row_reads_the_columns_it_has() -> None:
    text = "Running host_to_device_memcpy_ce.\n           0         1         2\n 0    369.36    269.33\n"
    assert nvbandwidth.parse(text)["tests"]["host_to_device_memcpy_ce"]["matrix"] == {"0": {"0": 369.36,
                                                                                            "1": 269.33}}


def test_per_gpu_of_a_missing_waived_or_empty_testcase_is_empty() -> None:
    assert nvbandwidth.per_gpu({}, "host_to_device_memcpy_ce") == {}
    assert nvbandwidth.per_gpu({"host_to_device_memcpy_ce": {"sum": 5.0}}, "host_to_device_memcpy_ce") == {}
    waived = nvbandwidth.parse("Running host_to_device_memcpy_ce.\nWaived:\n")["tests"]
    assert nvbandwidth.per_gpu(waived, "host_to_device_memcpy_ce") == {}
    assert nvbandwidth.per_gpu({"device_to_host_memcpy_ce": {"matrix": {"0": {"0": 295.15, "1": None}}}},
                               "device_to_host_memcpy_ce") == {0: 295.15}
