"""The dcgm gate's verdicts, value by value: status, the reason an operator reads, what it expected and measured.

Inputs are the probe's `dcgm` section (what gridready.probe.dcgm.parse_json makes of `dcgmi diag -j`), written out
per case, plus the real DCGM 3.x level-3 pass on a Tesla T4 (tests/fixtures/public/dcgmi)."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import diagnostics
from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from gridready.probe import dcgm as dcgm_probe
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import pub

EVERY_PLUGIN_3 = Expected(equals="level 3: every plugin pass", source="spec")


def _exp(level: int = 3, sku: str = "h200") -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup(sku), gpus=8,  # type: ignore[arg-type]
                        spec=CertificationSpec(profile="standard", dcgm_level=level))


def _res(status: str, gpus: list[int] | None = None, warning: str | None = None) -> dict[str, Any]:
    return {"gpus": gpus if gpus is not None else [0], "status": status, "warnings": [warning] if warning else [],
            "info": None}


def _test(name: str, *results: dict[str, Any], summary: str | None = None) -> dict[str, Any]:
    return {"name": name, "category": None, "results": list(results) or [_res("pass")], "summary": summary}


def _doc(tests: list[dict[str, Any]], level: int | None = 3, rc: int | None = 0,
         retries: list[dict[str, Any]] | None = None, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"present": True, "level": level, "rc": rc, "retries": retries or [],
                         "parsed": {"schema": "4.x", "version": "4.5.0", "tests": tests}}
    if parameters is not None:
        d["parameters"] = parameters
    return {"dcgm": d}


LEVEL3 = ["software", "memory", "pcie", "diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"]


def _level3(**fail: dict[str, Any]) -> list[dict[str, Any]]:
    return [fail.get(n) or _test(n) for n in LEVEL3]


def _one(doc: dict[str, Any], exp: Expectations | None = None):
    (r,) = diagnostics.dcgm(doc, exp or _exp())
    assert r.gate == "dcgm" and r.node == "n1"
    return r


@pytest.mark.parametrize(("dcgm", "reason", "evidence"), [
    ({}, "dcgmi is not installed on this node", "tools.dcgmi"),
    ({"present": False}, "dcgmi is not installed on this node", "tools.dcgmi"),
    ({"present": True, "timed_out": True, "level": 3}, "dcgmi diag -r 3 timed out", "raw.dcgmi_diag"),
    ({"present": True, "parse_error": "bad json", "rc": 1},
     "dcgmi diag output not parseable: bad json (rc=1)", "raw.dcgmi_diag"),
    ({"present": True, "parsed": None, "rc": 0}, "dcgmi diag output not parseable: None (rc=0)", "raw.dcgmi_diag"),
])
def test_no_usable_run_is_an_error(dcgm: dict[str, Any], reason: str, evidence: str) -> None:
    r = _one({"dcgm": dcgm})
    assert (r.status, r.reason, r.evidence, r.expected) == (S.ERROR, reason, evidence, EVERY_PLUGIN_3)
    assert r.measured is None


def test_a_missing_section_is_an_error() -> None:
    assert _one({}).reason == "dcgmi is not installed on this node"


def test_full_level3_pass_reports_what_ran_and_how() -> None:
    doc = _doc(_level3(), parameters={"diagnostic.precision": "hs", "diagnostic.clocks_tolerance_pcnt": "10"})
    r = _one(doc)
    assert r.status is S.PASS and r.evidence == "raw.dcgmi_diag" and r.expected == EVERY_PLUGIN_3
    assert r.reason == ("DCGM level 3: 7 tests pass (4.x schema); diagnostic plugin at FP16 (tensor cores) + FP32, "
                        "cross-GPU clocks/power tolerance 10%; ran diagnostic, memory, memory_bandwidth, pcie, "
                        "software, targeted_power, targeted_stress")
    assert r.measured == {"level": 3, "rc": 0, "schema": "4.x", "version": "4.5.0",
                          "diagnostic_precision": "FP16 (tensor cores) + FP32", "tests": 7, "failed": [],
                          "skipped_required": [], "flaky_passed_alone": [], "ran": sorted(LEVEL3),
                          "parameters": {"diagnostic.precision": "hs", "diagnostic.clocks_tolerance_pcnt": "10"}}


def test_pass_without_parameters_names_the_dcgm_default_precision() -> None:
    r = _one(_doc(_level3()))
    assert r.status is S.PASS
    assert r.measured["diagnostic_precision"] == "DCGM default (FP16+FP32, FP64 where fast)"
    assert r.measured["parameters"] == {}
    assert "; diagnostic plugin at DCGM default (FP16+FP32, FP64 where fast); ran diagnostic," in r.reason
    assert "tolerance" not in r.reason


def test_level1_pass_lists_neither_precision_nor_plugins() -> None:
    r = _one(_doc([_test("Denylist"), _test("NVML Library")], level=1), _exp(1))
    assert r.status is S.PASS and r.reason == "DCGM level 1: 2 tests pass (4.x schema)"
    assert r.measured["ran"] == ["software"]


@pytest.mark.parametrize(("name", "canonical"), [
    ("Memory", "memory"), ("GPU Memory", "memory"), ("SM Stress", "targeted_stress"), ("Memory Test", "memtest"),
    ("pulse", "pulse_test"), ("  Targeted  Power ", "targeted_power"), ("Persistence Mode", "software"),
    ("Page Retirement/Row Remap", "software"), ("Permissions and OS-related Blocks", "software"),
    ("Fabric Manager", "software"), ("nvbandwidth", "nvbandwidth"), ("", ""),
])
def test_plugin_names_normalise(name: str, canonical: str) -> None:
    assert diagnostics.plugin_name(name) == canonical


def test_a_failed_plugin_fails_with_gpus_and_first_warning() -> None:
    bad = _test("Memory", _res("pass", [0]), _res("fail", [3], "x" * 250), _res("fail", [1], "second"))
    r = _one(_doc(_level3(memory=bad), rc=226))
    assert r.status is S.FAIL and r.evidence == "raw.dcgmi_diag" and r.expected == EVERY_PLUGIN_3
    assert r.reason == "DCGM level 3: Memory failed on GPU 1, 3: " + "x" * 200
    assert r.measured["failed"] == ["Memory failed on GPU 1, 3: " + "x" * 200]
    assert r.measured["rc"] == 226


def test_a_failed_summary_without_a_failed_result_fails_without_gpu_or_detail() -> None:
    r = _one(_doc(_level3(pcie=_test("PCIe", _res("pass", [0]), summary="fail"))))
    assert r.status is S.FAIL and r.reason == "DCGM level 3: PCIe failed"


def test_a_failure_without_gpus_or_warnings_names_only_the_plugin() -> None:
    r = _one(_doc(_level3(software=_test("Denylist", _res("fail", [])))))
    assert r.reason == "DCGM level 3: Denylist failed"


def test_fails_and_skips_are_listed_together() -> None:
    tests = _level3(memory=_test("Memory", _res("fail", [2])), pcie=_test("PCIe", _res("skip", [0]), _res("skip", [1])))
    r = _one(_doc(tests))
    assert r.reason == "DCGM level 3: Memory failed on GPU 2; required plugin PCIe skipped"
    assert r.measured["skipped_required"] == ["required plugin PCIe skipped"]


@pytest.mark.parametrize(("plugin", "level", "fails"), [
    ("PCIe", 2, True),            # required from level 2
    ("PCIe", 1, False),           # a level-1 run does not require it
    ("Diagnostic", 3, True),
    ("Diagnostic", 2, False),
    ("Memtest", 4, True),
    ("Memtest", 3, False),
    ("EUD", 4, False),            # optional plugins never required
])
def test_required_plugin_that_skips_fails_from_its_level(plugin: str, level: int, fails: bool) -> None:
    tests = [_test("Denylist"), _test(plugin, _res("skip", [0]), _res("skip", [1]))]
    if level >= 4:
        tests += [_test("memtest"), _test("pulse_test")] if plugin != "Memtest" else [_test("pulse_test")]
    r = _one(_doc(tests, level=level), _exp(level))
    if fails:
        assert r.status is S.FAIL and r.reason == f"DCGM level {level}: required plugin {plugin} skipped"
    else:
        assert r.status is S.PASS and r.measured["skipped_required"] == []


def test_a_partial_skip_is_not_a_required_skip() -> None:
    r = _one(_doc(_level3(pcie=_test("PCIe", _res("skip", [0]), _res("pass", [1])))))
    assert r.status is S.PASS


def test_the_run_level_decides_which_plugins_are_required_when_recorded() -> None:
    # a level-3 run on a spec asking level 2: the run's own level decides that the diagnostic plugin is required
    tests = [_test("Denylist"), _test("Memory"), _test("PCIe"), _test("Diagnostic", _res("skip", [0]))]
    r = _one(_doc(tests, level=3), _exp(2))
    assert r.status is S.FAIL and r.reason == "DCGM level 3: required plugin Diagnostic skipped"
    # without a recorded level the spec's level decides
    r = _one(_doc(tests, level=None), _exp(3))
    assert r.status is S.FAIL and r.reason == "DCGM level None: required plugin Diagnostic skipped"


def test_warned_plugins_warn_with_their_gpus() -> None:
    tests = _level3(memory_bandwidth=_test("Memory Bandwidth", _res("warn", [5]), _res("pass", [1]), _res("warn", [2])))
    r = _one(_doc(tests))
    assert r.status is S.WARN and r.reason == "DCGM level 3 passed; Memory Bandwidth warned on GPU 2, 5"


def test_a_flaky_plugin_that_passed_alone_warns() -> None:
    nvbw = _test("nvbandwidth", _res("fail", [0], "MCUTIL > 10%"))
    retry = {"plugin": "nvbandwidth", "rc": 0, "parsed": {"tests": [_test("nvbandwidth")]}}
    r = _one(_doc([*_level3(), nvbw], rc=226, retries=[retry]))
    assert r.status is S.WARN
    assert r.reason == "DCGM level 3 passed; nvbandwidth failed on GPU 0: MCUTIL > 10% (passed when retried alone)"
    assert r.measured["flaky_passed_alone"] == ["nvbandwidth failed on GPU 0: MCUTIL > 10%"]
    assert r.measured["failed"] == []


@pytest.mark.parametrize("retry", [
    {"plugin": "nvbandwidth", "rc": 1, "parsed": {"tests": [_test("nvbandwidth")]}},
    {"plugin": "nvbandwidth", "rc": 0, "parsed": None},
    {"plugin": "nvbandwidth", "rc": 0, "parsed": {"tests": [_test("nvbandwidth", _res("pass"), _res("fail", [1]))]}},
    {"plugin": "memory", "rc": 0, "parsed": {"tests": [_test("memory")]}},
])
def test_a_retry_that_did_not_pass_cleanly_leaves_the_failure(retry: dict[str, Any]) -> None:
    nvbw = _test("nvbandwidth", _res("fail", [0]))
    r = _one(_doc([*_level3(), nvbw], retries=[retry]))
    assert r.status is S.FAIL and r.reason == "DCGM level 3: nvbandwidth failed on GPU 0"


@pytest.mark.parametrize(("rc", "reason"), [
    (226, "dcgmi diag exited 226 (DCGM_ST_NVVS_ERROR) with no failed plugin listed"),
    (1, "dcgmi diag exited 1 with no failed plugin listed"),
])
def test_a_nonzero_exit_without_a_failed_plugin_fails(rc: int, reason: str) -> None:
    r = _one(_doc(_level3(), rc=rc))
    assert r.status is S.FAIL and r.reason == reason and r.evidence == "raw.dcgmi_diag"
    assert r.expected == EVERY_PLUGIN_3


def test_an_unknown_exit_code_is_not_a_failure() -> None:
    assert _one(_doc(_level3(), rc=None)).status is S.PASS


@pytest.mark.parametrize(("ran", "asked", "status"), [(2, 3, S.ERROR), (3, 3, S.PASS), (4, 3, S.PASS)])
def test_a_run_below_the_spec_level_is_an_error(ran: int, asked: int, status: S) -> None:
    tests = _level3() + ([_test("memtest"), _test("pulse_test")] if ran >= 4 else [])
    r = _one(_doc(tests, level=ran), _exp(asked))
    assert r.status is status
    if status is S.ERROR:
        assert r.reason == "DCGM ran at level 2, the spec asks for 3"
        assert r.measured["level"] == 2 and r.expected == EVERY_PLUGIN_3


def test_level4_requires_memtest_on_every_sku() -> None:
    r = _one(_doc([*_level3(), _test("pulse_test")], level=4), _exp(4))
    assert r.status is S.FAIL
    assert r.reason == "DCGM level 4: level-4 plugin memtest did not run (not in the JSON)"
    assert r.expected == Expected(equals="level 4: every plugin pass", source="spec")


@pytest.mark.parametrize(("sku", "reason"), [
    ("h100", "DCGM level 4: level-4 plugin pulse_test did not run (not in the JSON)"),
    ("h200", "DCGM level 4: level-4 plugin pulse_test did not run (not in the JSON)"),
])
def test_level4_requires_pulse_test_on_h100_sxm_and_h200(sku: str, reason: str) -> None:
    r = _one(_doc([*_level3(), _test("memtest")], level=4), _exp(4, sku))
    assert r.status is S.FAIL and r.reason == reason


def test_level4_on_a_sku_without_pulse_test_passes_without_it() -> None:
    r = _one(_doc([*_level3(), _test("memtest")], level=4), _exp(4, "h100-pcie"))
    assert r.status is S.PASS and r.reason.startswith("DCGM level 4: 8 tests pass (4.x schema)")


@pytest.mark.parametrize(("letters", "names"), [
    ("h", "FP16 (tensor cores)"), ("s", "FP32"), ("d", "FP64"),
    ("hsd", "FP16 (tensor cores) + FP32 + FP64"), ("DS", "FP64 + FP32"), ("hx", "FP16 (tensor cores)"),
])
def test_precision_letters_are_named(letters: str, names: str) -> None:
    r = _one(_doc(_level3(), parameters={"diagnostic.precision": letters}))
    assert r.measured["diagnostic_precision"] == names
    assert f"; diagnostic plugin at {names}; ran " in r.reason


def test_real_dcgm3_level3_pass_on_a_t4() -> None:
    parsed = dcgm_probe.parse_json(pub("dcgmi", "r3-j__1xTesla-T4"))
    r = _one({"dcgm": {"present": True, "level": 3, "rc": 0, "parsed": parsed}})
    assert r.status is S.PASS and r.measured["schema"] == "3.x"
    assert r.reason.startswith(f"DCGM level 3: {len(parsed['tests'])} tests pass (3.x schema); diagnostic plugin at "
                               "DCGM default")
