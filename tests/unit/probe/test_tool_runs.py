"""What the probe's tool runners (dcgmi, nccl-tests, gpu-burn, nvbandwidth) run and record, the tool replaced by a
recording runner that answers with real captured outputs (tests/fixtures)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import dcgm, gpu_burn, nccl_tests, nvbandwidth
from tests.unit.certify.fixtures_io import FIX, pub


def _res(argv: list[str], stdout: str = "", rc: int | None = 0, absent: bool = False,
         timed_out: bool = False) -> dict[str, Any]:
    """The shape tools.run returns."""
    return {"argv": argv, "rc": None if absent else rc, "stdout": stdout, "stderr": "", "wall_s": 0.5,
            "absent": absent, "timed_out": timed_out}


class Runner:
    """Stands in for tools.run: records each call and answers from `answer(argv)` (a result dict)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    def __call__(self, argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None) -> dict[str, Any]:
        self.calls.append({"argv": list(argv), "timeout_s": timeout_s, "env": env})
        res = self.answer(list(argv))
        self.results.append(res)
        return res


# ---- dcgmi diag ------------------------------------------------------------------------------------------

DCGM_PASS_3X = pub("dcgmi", "diag-r3-j__1xTesla-T4__DCGM3.x-pass")
DCGM_FAIL_4X = pub("dcgmi", "DCGM4.2.3")  # `software` fails (persistence mode off)
# the same 4.x document with the failing plugin being the one known to fail falsely (DCGM#272)
DCGM_FLAKY_4X = DCGM_FAIL_4X.replace('"name" : "software"', '"name" : "NVBandwidth"')


@pytest.mark.parametrize(("level", "precision", "outlier", "expected"), [
    (1, "hs", 5.0, {}),
    (2, "h", 0.0, {}),
    (3, None, 0.0, {}),
    (3, "h", 0.0, {"diagnostic.precision": "h"}),
    (4, "sd", 0.0, {"diagnostic.precision": "sd"}),
    (3, None, 2.5, {"diagnostic.clocks_tolerance_pcnt": "2.5", "diagnostic.power_tolerance_pcnt": "2.5"}),
    (3, "hs", 10.0, {"diagnostic.precision": "hs", "diagnostic.clocks_tolerance_pcnt": "10",
                     "diagnostic.power_tolerance_pcnt": "10"}),
    (3, "h", -1.0, {"diagnostic.precision": "h"}),
    (3, None, 0.5, {"diagnostic.clocks_tolerance_pcnt": "0.5", "diagnostic.power_tolerance_pcnt": "0.5"}),
    (3, None, 1.0, {"diagnostic.clocks_tolerance_pcnt": "1", "diagnostic.power_tolerance_pcnt": "1"}),
])
def test_dcgm_parameters_only_for_the_diagnostic_plugin(level: int, precision: str | None, outlier: float,
                                                        expected: dict[str, str]) -> None:
    assert dcgm.diag_parameters(level, precision, outlier) == expected


def test_dcgm_parameters_default_sets_no_tolerance() -> None:
    assert dcgm.diag_parameters(3, "h") == {"diagnostic.precision": "h"}


def test_dcgm_collect_runs_the_level_with_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_PASS_3X))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(3, 900.0, precision="hs", outlier_pcnt=5)
    assert runner.calls == [{"argv": ["dcgmi", "diag", "-r", "3", "-j", "-p",
                                      "diagnostic.precision=hs;diagnostic.clocks_tolerance_pcnt=5;"
                                      "diagnostic.power_tolerance_pcnt=5"],
                             "timeout_s": 900.0, "env": None}]
    assert out == {"level": 3, "run": runner.results[0], "parsed": dcgm.parse_json(DCGM_PASS_3X),
                   "parse_error": None, "retries": [],
                   "parameters": {"diagnostic.precision": "hs", "diagnostic.clocks_tolerance_pcnt": "5",
                                  "diagnostic.power_tolerance_pcnt": "5"}}
    assert out["parsed"]["schema"] == "3.x"


def test_dcgm_collect_level_1_has_no_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_PASS_3X))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(1, 120.0)
    assert runner.calls == [{"argv": ["dcgmi", "diag", "-r", "1", "-j"], "timeout_s": 120.0, "env": None}]
    assert out["parameters"] == {} and out["parse_error"] is None and out["parsed"]["tests"]


@pytest.mark.parametrize(("absent", "timed_out"), [(True, False), (False, True)])
def test_dcgm_collect_absent_or_timed_out_is_recorded_unparsed(monkeypatch: pytest.MonkeyPatch, absent: bool,
                                                               timed_out: bool) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_FLAKY_4X, absent=absent, timed_out=timed_out))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(3, 60.0)
    assert len(runner.calls) == 1  # never retried
    assert out == {"level": 3, "run": runner.results[0], "parsed": None, "parse_error": None, "retries": [],
                   "parameters": {}}


def test_dcgm_collect_unparsable_output_is_a_parse_error(monkeypatch: pytest.MonkeyPatch) -> None:
    text = pub("dcgmi", "DCGM4.0.0-pass-table")  # the text table where JSON was asked for
    runner = Runner(lambda argv: _res(argv, text))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(3, 60.0)
    assert out["parsed"] is None and out["retries"] == [] and len(runner.calls) == 1
    assert out["parse_error"].startswith("Expecting value")


def test_dcgm_collect_non_flaky_failure_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_FAIL_4X, rc=226))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(1, 60.0)
    assert dcgm.failed_tests(out["parsed"]) == ["software"]
    assert out["retries"] == [] and len(runner.calls) == 1


def test_dcgm_collect_retries_a_failed_flaky_plugin_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_FLAKY_4X if argv[3] == "3" else DCGM_PASS_3X))
    monkeypatch.setattr(dcgm, "run", runner)
    out = dcgm.collect(3, 600.0)
    assert dcgm.failed_tests(out["parsed"]) == ["NVBandwidth"]
    assert runner.calls[1] == {"argv": ["dcgmi", "diag", "-r", "nvbandwidth", "-j"], "timeout_s": 600.0,
                               "env": None}
    assert out["retries"] == [{"plugin": "NVBandwidth", "run": runner.results[1],
                               "parsed": dcgm.parse_json(DCGM_PASS_3X)}]


def test_dcgm_collect_unparsable_retry_keeps_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, DCGM_FLAKY_4X if argv[3] == "3" else "Error: unable to connect\n"))
    monkeypatch.setattr(dcgm, "run", runner)
    (entry,) = dcgm.collect(3, 60.0)["retries"]
    assert entry["plugin"] == "NVBandwidth" and entry["parsed"] is None and entry["run"] is runner.results[1]
    assert entry["parse_error"].startswith("Expecting value")


# ---- nccl-tests ------------------------------------------------------------------------------------------

NCCL_J = FIX / "h200x1" / "nccl-tests-J"
AR_TXT = (NCCL_J / "all_reduce_perf.txt").read_text()
AR_JSON = (NCCL_J / "all_reduce_perf.json").read_text()


def _nccl_runner(stdout: str, json_text: str | None, absent: bool = False) -> Runner:
    """The tool prints its table and writes the -J file named after `-J`."""
    def answer(argv: list[str]) -> dict[str, Any]:
        if json_text is not None and not absent:
            Path(argv[argv.index("-J") + 1]).write_text(json_text)
        return _res(argv, stdout, absent=absent)
    return Runner(answer)


def test_nccl_collect_argv_env_and_json_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = _nccl_runner(AR_TXT, AR_JSON)
    monkeypatch.setattr(nccl_tests, "run", runner)
    js_path = str(tmp_path / "ar.json")
    env = {"NCCL_ALGO": "Ring"}
    out = nccl_tests.collect(2, 1 << 20, 1 << 30, env, 300.0, js_path, check_iters=3)
    assert runner.calls == [{"argv": ["all_reduce_perf", "-b", "1048576", "-e", "1073741824", "-f", "2", "-g", "2",
                                      "-n", "20", "-w", "5", "-c", "3", "-J", js_path],
                             "timeout_s": 300.0, "env": env}]
    assert out["run"] is runner.results[0] and out["env"] == env
    assert out["parsed"] == nccl_tests.parse_text(AR_TXT)
    assert out["json"] == nccl_tests.parse_json(AR_JSON)  # no failure lines: errors [] in both
    assert "json_error" not in out


@pytest.mark.parametrize(("check_iters", "flag"), [(0, "1"), (1, "1"), (5, "5")])
def test_nccl_collect_checks_each_size_at_least_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     check_iters: int, flag: str) -> None:
    runner = _nccl_runner(AR_TXT, AR_JSON)
    monkeypatch.setattr(nccl_tests, "run", runner)
    nccl_tests.collect(1, 64, 128, {}, 10.0, str(tmp_path / "j"), binary="sendrecv_perf", check_iters=check_iters)
    argv = runner.calls[0]["argv"]
    assert argv[0] == "sendrecv_perf" and argv[argv.index("-c") + 1] == flag


def test_nccl_collect_defaults_to_all_reduce_checked_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = _nccl_runner(AR_TXT, AR_JSON)
    monkeypatch.setattr(nccl_tests, "run", runner)
    nccl_tests.collect(8, 8, 16, {}, 10.0, str(tmp_path / "j"))
    argv = runner.calls[0]["argv"]
    assert argv[0] == "all_reduce_perf" and argv[argv.index("-c") + 1] == "1" and argv[argv.index("-g") + 1] == "8"


def test_nccl_collect_failure_lines_from_stdout_join_the_json(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    crashed = AR_TXT + "vm: Test NCCL failure common.cu:1005 'unhandled cuda error'\n"
    monkeypatch.setattr(nccl_tests, "run", _nccl_runner(crashed, AR_JSON))
    out = nccl_tests.collect(1, 64, 128, {}, 10.0, str(tmp_path / "j"))
    assert out["parsed"]["errors"] == ["vm: Test NCCL failure common.cu:1005 'unhandled cuda error'"]
    assert out["json"]["errors"] == out["parsed"]["errors"]
    assert out["json"]["rows"] == nccl_tests.parse_json(AR_JSON)["rows"]


def test_nccl_collect_without_json_file_keeps_the_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nccl_tests, "run", _nccl_runner(AR_TXT, None))
    out = nccl_tests.collect(1, 64, 128, {}, 10.0, str(tmp_path / "missing.json"))
    assert out["json"] is None and "missing.json" in out["json_error"]
    assert out["parsed"] == nccl_tests.parse_text(AR_TXT)


@pytest.mark.parametrize("doc", [
    {"results": []},  # no rows
    {"results": [{"size": 64, "out_of_place": {"time": 1.0}}]},  # a row without busbw
    {"results": [{"size": 64, "out_of_place": {"bus_bw": 1.0}}, {"size": 128}]},
])
def test_nccl_collect_json_without_every_busbw_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          doc: dict[str, Any]) -> None:
    monkeypatch.setattr(nccl_tests, "run", _nccl_runner(AR_TXT, json.dumps(doc)))
    out = nccl_tests.collect(1, 64, 128, {}, 10.0, str(tmp_path / "j"))
    assert out["json"] is None and "json_error" not in out and out["parsed"]["rows"]


def test_nccl_collect_absent_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "j").write_text(AR_JSON)  # a stale file of an earlier run is not read
    runner = _nccl_runner("", None, absent=True)
    monkeypatch.setattr(nccl_tests, "run", runner)
    out = nccl_tests.collect(1, 64, 128, {"A": "1"}, 10.0, str(tmp_path / "j"))
    assert out == {"run": runner.results[0], "parsed": None, "json": None, "env": {"A": "1"}}


# ---- gpu-burn --------------------------------------------------------------------------------------------

BURN_OK = pub("gpu-burn", "ok-all-GPUs")
BURN_FAULTY = pub("gpu-burn", "FAIL-all-FAULTY-but-exit-0")


def test_gpu_burn_collect_reads_verdicts_not_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, BURN_FAULTY, rc=0))
    monkeypatch.setattr(gpu_burn, "run", runner)
    out = gpu_burn.collect(120, 300.0)
    assert runner.calls == [{"argv": ["gpu_burn", "-d", "-tc", "120"], "timeout_s": 300.0, "env": None}]
    assert out["present"] is True and out["rc"] == 0 and out["timed_out"] is False
    assert set(out["parsed"]["gpus"].values()) == {"FAULTY"} and out["parsed"]["tested"] == 16
    assert out["parsed"]["warnings"] == 7  # the negative error counts gpu-burn marks `(WARNING!)`


def test_gpu_burn_collect_keeps_the_output_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(BURN_OK) > 4000
    monkeypatch.setattr(gpu_burn, "run", Runner(lambda argv: _res(argv, BURN_OK, rc=0)))
    out = gpu_burn.collect(60, 90.0)
    assert out["stdout_tail"] == BURN_OK[-4000:] and out["stdout_tail"].endswith("GPU 7: OK\n")
    assert out["parsed"] == gpu_burn.parse(BURN_OK) and out["parsed"]["tested"] == 8


def test_gpu_burn_collect_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    partial = BURN_OK.split("Killing processes")[0]
    monkeypatch.setattr(gpu_burn, "run", Runner(lambda argv: _res(argv, partial, rc=None, timed_out=True)))
    out = gpu_burn.collect(60, 90.0)
    assert out["timed_out"] is True and out["rc"] is None and out["present"] is True
    assert out["parsed"] == {"tested": None, "gpus": {}, "warnings": 0}


def test_gpu_burn_collect_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_burn, "run", Runner(lambda argv: _res(argv, absent=True)))
    assert gpu_burn.collect(60, 90.0) == {"present": False, "rc": None, "timed_out": False, "parsed": None,
                                          "stdout_tail": ""}


# ---- nvbandwidth -----------------------------------------------------------------------------------------

NVB = pub("nvbandwidth", "GH200")


def _nvb_section(tc: str) -> str:
    """What `nvbandwidth -t <tc>` prints: the header and that testcase's block of the captured full run."""
    m = re.search(rf"Running {tc}\..*?SUM {tc} [\d.]+\n", NVB, re.S)
    head = NVB.split("Running ", 1)[0]
    return head + (m.group(0) if m else "Waived:\n")


def test_nvbandwidth_collect_runs_each_testcase(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(lambda argv: _res(argv, _nvb_section(argv[2])))
    monkeypatch.setattr(nvbandwidth, "run", runner)
    out = nvbandwidth.collect(45.0)
    assert runner.calls == [{"argv": ["nvbandwidth", "-t", tc], "timeout_s": 45.0, "env": None}
                            for tc in nvbandwidth.TESTCASES]
    assert out["present"] is True
    assert set(out["tests"]) == {"host_to_device_memcpy_ce", "device_to_host_memcpy_ce"}  # d2d waived on one GPU
    assert out["tests"]["host_to_device_memcpy_ce"]["sum"] == 1985.60
    assert out["tests"]["device_to_host_memcpy_ce"]["matrix"] == {"0": {"0": 295.15, "1": 312.11}}
    assert out["raw"] == "\n".join(_nvb_section(tc) for tc in nvbandwidth.TESTCASES)


@pytest.mark.parametrize("missing_from", [0, 1])
def test_nvbandwidth_collect_absent(monkeypatch: pytest.MonkeyPatch, missing_from: int) -> None:
    runner = Runner(lambda argv: _res(argv, _nvb_section(argv[2]),
                                      absent=len(runner.calls) > missing_from))
    monkeypatch.setattr(nvbandwidth, "run", runner)
    assert nvbandwidth.collect(45.0) == {"present": False}
    assert len(runner.calls) == missing_from + 1
