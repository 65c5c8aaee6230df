"""dcgmi diag read value by value: statuses, GPUs and warning text from the real captures (tests/fixtures/public)."""

from __future__ import annotations

import json

import pytest

from gridready.probe import dcgm
from tests.unit.certify.fixtures_io import pub


@pytest.mark.parametrize(("raw", "status"), [
    ("Pass", "pass"), ("FAIL", "fail"), (" Skip ", "skip"), ("Warn", "warn"), ("Warning", "warn"),
    ("Not Run", "notrun"), ("notrun", "notrun"), ("Unknown-State", "unknown-state"), ("", "unknown"),
    (None, "unknown"),
])
def test_dcgm_status_words(raw: str | None, status: str) -> None:
    assert dcgm._status(raw) == status


def test_dcgm_text_table_4x_pass() -> None:
    p = dcgm.parse_text(pub("dcgmi", "DCGM4.0.0-pass-table"))
    assert p["schema"] == "text" and p["version"] is None
    assert [t["name"] for t in p["tests"]] == ["software", "memory", "diagnostic", "pcie", "memory_bandwidth",
                                               "targeted_stress", "targeted_power"]  # metadata rows are no tests
    # the test's own row, then DCGM 4.x's row per GPU ("GPU0: Pass")
    assert all(t["results"] == [{"gpus": g, "status": "pass", "warnings": [], "info": None}
                                for g in ([], [0], [1], [2], [3])] for t in p["tests"])
    assert dcgm.failed_tests(p) == []


def test_dcgm_text_failed_gpu_and_wrapped_warning() -> None:
    (t,) = dcgm.parse_text(pub("dcgmi", "FAIL-gpu-memory-thermal-violation"))["tests"]
    assert t["name"] == "GPU Memory" and t["summary"] is None
    passed, failed, warned = t["results"]
    assert (passed["gpus"], passed["status"]) == ([1, 2, 3, 4, 5, 6, 7], "pass")
    assert (failed["gpus"], failed["status"]) == ([0], "fail")
    assert (warned["gpus"], warned["status"]) == ([0], "warn")
    assert warned["warnings"][0].startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds "
                                            "into the test for GPU 0 Verify that the cooling on this machine is")


def test_dcgm_text_error_before_any_test_is_deployment() -> None:
    (t,) = dcgm.parse_text(pub("dcgmi", "FAIL-uncorrectable-mem-rowremap-pending"))["tests"]
    assert (t["name"], t["category"]) == ("Deployment", "Deployment")
    (r,) = t["results"]
    assert (r["gpus"], r["status"]) == ([3], "fail")
    assert r["warnings"][0].startswith("GPU 3 has uncorrectable memory errors and row")
    assert r["warnings"][0].endswith("remappings are pending")


def test_dcgm_text_ignores_what_is_not_a_table() -> None:
    assert dcgm.parse_text("Error: unable to connect to host engine\n") == {"schema": "text", "version": None,
                                                                            "tests": []}


def test_dcgm_3x_json_categories_and_names() -> None:
    p = dcgm.parse_json(pub("dcgmi", "diag-r1-j__1xTesla-T4__DCGM3.x-pass"))
    assert p["schema"] == "3.x"
    assert p["tests"][0] == {"name": "Denylist", "category": "Deployment",
                             "results": [{"gpus": [], "status": "pass", "warnings": [], "info": None}],
                             "summary": None}
    assert "Persistence Mode" in [t["name"] for t in p["tests"]]


def test_dcgm_4x_json_entity_warning_and_summary() -> None:
    p = dcgm.parse_json(pub("dcgmi", "DCGM4.2.3"))
    assert (p["schema"], p["version"]) == ("4.x", "4.2.3")
    (t,) = p["tests"]
    assert (t["name"], t["category"], t["summary"]) == ("software", "Deployment", "fail")
    assert t["results"] == [{"gpus": [0], "status": "fail", "info": None, "warnings": [
        "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "
        "\"nvidia-smi -i <gpuId> -pm 1 \" as root."]}]


def _doc4(results: list[dict], **body: object) -> str:
    return json.dumps({"DCGM Diagnostic": {"tests": [{"name": "memory", "category": "Hardware", "results": results}],
                                           **body}, "version": "4.1.0"})


@pytest.mark.parametrize(("result", "gpus", "warnings"), [
    ({"entity_group": "GPU", "entity_id": 2, "status": "Fail", "warnings": "DBE on GPU 2"}, [2], ["DBE on GPU 2"]),
    ({"entity_group": "gpu", "entity_id": "5", "status": "Pass"}, [5], []),
    ({"entity_group": "CPU", "entity_id": 1, "gpu_ids": [3], "status": "Pass"}, [3], []),
    ({"gpu_ids": "0, 1,7", "status": "Pass", "warnings": [{"error_id": 1, "warning": "w1"}, "w2"]}, [0, 1, 7],
     ["w1", "w2"]),
    ({"gpu_ids": " ", "status": "Skip", "warnings": 3}, [], []),
    ({"status": "Warn", "warnings": [{"error_id": 9}]}, [], ["{'error_id': 9}"]),
])
def test_dcgm_json_result_gpus_and_warnings(result: dict, gpus: list[int], warnings: list[str]) -> None:
    (t,) = dcgm.parse_json(_doc4([result, "not a result"]))["tests"]
    (r,) = t["results"]
    assert (r["gpus"], r["warnings"]) == (gpus, warnings)


def test_dcgm_json_flat_tests_with_summary_and_root_version() -> None:
    p = dcgm.parse_json(_doc4([{"entity_id": 0, "status": "Pass", "info": "ok"}]))
    (t,) = p["tests"]
    assert (p["schema"], p["version"], t["category"], t["summary"]) == ("4.x", "4.1.0", "Hardware", None)
    assert t["results"][0]["info"] == "ok"
    doc = json.loads(_doc4([]))
    doc["DCGM Diagnostic"]["tests"][0]["test_summary"] = {"status": "Fail"}
    doc["DCGM Diagnostic"]["metadata"] = {"version": "4.3.1"}
    doc["DCGM Diagnostic"]["tests"].append("junk")
    p = dcgm.parse_json(json.dumps(doc))
    assert p["version"] == "4.3.1" and [(t["name"], t["summary"]) for t in p["tests"]] == [("memory", "fail")]
    assert dcgm.failed_tests(p) == ["memory"]


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "dcgmi JSON root is not an object"),
    ('{"other": {}}', "no 'DCGM Diagnostic' (4.x) or 'DCGM GPU Diagnostic' (3.x) root key"),
    ('{"DCGM Diagnostic": []}', "malformed 4.x document: the root's value is a list, not an object"),
    ('{"DCGM GPU Diagnostic": {"x": 1}}', "malformed 3.x document: neither test_categories nor tests"),
])
def test_dcgm_json_refusals(text: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        dcgm.parse_json(text)
    assert str(exc.value) == message
