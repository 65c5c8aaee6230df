"""More dcgmi diag values from the real captures (tests/fixtures/public/dcgmi): the whole parsed document of each text
table and JSON schema, the refusals' exact words, and the `-p` parameters."""

from __future__ import annotations

import json
import re

import pytest

from gridready.probe import dcgm
from tests.unit.certify.fixtures_io import pub

THERMAL = pub("dcgmi", "FAIL-gpu-memory-thermal-violation")  # 3.x table, a warning cut into 45-character pieces
ROWREMAP = pub("dcgmi", "FAIL-uncorrectable-mem-rowremap-pending")  # an Error before any test row
TABLE_4X = pub("dcgmi", "DCGM4.0.0-pass-table")


def _r(gpus: list[int], status: str, warnings: list[str] | None = None) -> dict:
    return {"gpus": gpus, "status": status, "warnings": warnings or [], "info": None}


# ---- text table ------------------------------------------------------------------------------------------------
def test_text_3x_thermal_whole_document() -> None:
    assert dcgm.parse_text(THERMAL) == {"schema": "text", "version": None, "tests": [{
        "name": "GPU Memory", "category": None, "summary": None, "results": [
            _r([1, 2, 3, 4, 5, 6, 7], "pass"), _r([0], "fail"),
            _r([0], "warn", ["GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test "
                             "for GPU 0 Verify that the cooling on this machine is functional, including external, "
                             "thermal material interface, fans, and any other componen"]),  # "ts." lacks its "|"
        ]}]}
    assert dcgm.failed_tests(dcgm.parse_text(THERMAL)) == ["GPU Memory"]


def test_text_error_before_any_test_is_a_failing_deployment() -> None:
    p = dcgm.parse_text(ROWREMAP)
    assert (p["schema"], p["version"]) == ("text", None)
    (t,) = p["tests"]
    assert {k: v for k, v in t.items() if k != "results"} == {"name": "Deployment", "category": "Deployment",
                                                               "summary": None}
    (r,) = t["results"]
    assert {k: v for k, v in r.items() if k != "warnings"} == {"gpus": [3], "status": "fail", "info": None}


def test_text_metadata_rows_are_no_tests() -> None:
    head = TABLE_4X.split("|-----  Deployment")[0]
    assert dcgm.parse_text(head) == {"schema": "text", "version": None, "tests": []}


def test_text_lowercase_gpu_in_a_warning_names_no_gpu() -> None:
    text = THERMAL.replace("| Warning                   | GPU 0 Thermal", "| Warning                   | gpu 0 Thermal")
    warned = dcgm.parse_text(text)["tests"][0]["results"][2]
    assert (warned["gpus"], warned["status"]) == ([], "warn")


# ---- JSON ------------------------------------------------------------------------------------------------------
def test_json_3x_r3_categories_and_skip() -> None:
    p = dcgm.parse_json(pub("dcgmi", "diag-r3-j__1xTesla-T4__DCGM3.x-pass"))
    assert (p["schema"], p["version"]) == ("3.x", p["version"])
    cats = [(t["category"], t["name"]) for t in p["tests"]]
    assert len({c for c, _ in cats}) > 1 and all(c for c, _ in cats)
    assert all(set(t) == {"name", "category", "results", "summary"} and t["summary"] is None for t in p["tests"])
    assert all(set(r) == {"gpus", "status", "warnings", "info"} for t in p["tests"] for r in t["results"])
    assert dcgm.failed_tests(p) == []


def test_json_4x_gb10_exact() -> None:
    p = dcgm.parse_json(pub("dcgmi", "DCGM4.2.3"))
    (t,) = p["tests"]
    assert (t["category"], t["summary"]) == ("Deployment", "fail")
    assert t["results"][0]["info"] is None


def test_json_4x_info_and_categories_kept() -> None:
    doc = {"DCGM Diagnostic": {"test_categories": [
        {"category": "Hardware", "tests": [{"name": "memory", "results": [
            {"entity_group": "GPU", "entity_id": 1, "status": "Pass", "info": "Allocated 95% of memory"}],
            "test_summary": {"status": "Pass"}}]},
        {"category": "Stress", "tests": [{"name": "targeted_power", "results": [
            {"entity_group": "GPU", "entity_id": 1, "status": "Fail"}], "test_summary": {"status": "Fail"}}]},
        {"category": "Empty"}]},
        "metadata": {"version": "4.4.1"}}
    p = dcgm.parse_json(json.dumps(doc))
    assert p == {"schema": "4.x", "version": "4.4.1", "tests": [
        {"name": "memory", "category": "Hardware", "summary": "pass",
         "results": [{"gpus": [1], "status": "pass", "warnings": [], "info": "Allocated 95% of memory"}]},
        {"name": "targeted_power", "category": "Stress", "summary": "fail",
         "results": [{"gpus": [1], "status": "fail", "warnings": [], "info": None}]}]}
    assert dcgm.failed_tests(p) == ["targeted_power"]


def test_json_summary_fail_alone_fails_the_test() -> None:
    doc = {"DCGM Diagnostic": {"tests": [{"name": "pcie", "category": "Integration", "results": [],
                                          "test_summary": {"status": "Fail"}}]}}
    p = dcgm.parse_json(json.dumps(doc))
    assert p["tests"] == [{"name": "pcie", "category": "Integration", "results": [], "summary": "fail"}]
    assert dcgm.failed_tests(p) == ["pcie"]


def test_json_test_without_results() -> None:
    doc = {"DCGM Diagnostic": {"tests": [{"name": "software", "category": "Deployment"}]}}
    assert dcgm.parse_json(json.dumps(doc))["tests"] == [{"name": "software", "category": "Deployment",
                                                          "results": [], "summary": None}]


def test_json_version_from_the_body_metadata() -> None:
    doc = {"DCGM Diagnostic": {"tests": [], "metadata": {"version": "4.5.0"}}}
    assert dcgm.parse_json(json.dumps(doc)) == {"schema": "4.x", "version": "4.5.0", "tests": []}
    assert dcgm.parse_json(json.dumps({"DCGM Diagnostic": {"tests": []}, "version": "4.0.0"}))["version"] == "4.0.0"


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "dcgmi JSON root is not an object"),
    ('{"other": {}}', "no 'DCGM Diagnostic' (4.x) or 'DCGM GPU Diagnostic' (3.x) root key"),
    ('{"DCGM GPU Diagnostic": "x"}', "malformed 3.x document: the root's value is a str, not an object"),
    ('{"DCGM Diagnostic": {"tests": 1}}', "malformed 4.x document: neither test_categories nor tests"),
])
def test_json_refusal_words(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        dcgm.parse_json(text)


@pytest.mark.parametrize(("result", "gpus"), [
    ({"entity_group": "GPU", "entity_id": 4}, [4]),
    ({"entity_id": 6}, [6]),  # no entity_group: a GPU
    ({"entity_group": "CPU", "entity_id": 6}, []),
    ({"entity_group": "Gpu", "entity_id": "2"}, [2]),
    ({"gpu_ids": [0, "3"]}, [0, 3]),
])
def test_json_result_gpus(result: dict, gpus: list[int]) -> None:
    assert dcgm._gpus(result) == gpus


@pytest.mark.parametrize(("raw", "warnings"), [
    ([{"error_id": 29, "warning": "Persistence mode disabled"}, "plain"], ["Persistence mode disabled", "plain"]),
    ([{"error_id": 7}], ["{'error_id': 7}"]),
    ("one", ["one"]),
    (None, []),
])
def test_json_result_warnings(raw: object, warnings: list[str]) -> None:
    assert dcgm._warnings({"warnings": raw}) == warnings


@pytest.mark.parametrize(("raw", "status"), [
    ("PASS", "pass"), ("Fail", "fail"), ("SKIP", "skip"), ("WARN", "warn"), ("WARNING", "warn"),
    ("Not Run", "notrun"), ("NOTRUN", "notrun"), ("", "unknown"), (None, "unknown"), (0, "unknown"),
    ("Disabled", "disabled"),
])
def test_status_words_any_case(raw: object, status: str) -> None:
    assert dcgm._status(raw) == status


# ---- -p parameters ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("level", "precision", "outlier", "expected"), [
    (3, None, 0.0, {}),
    (3, None, 0.5, {"diagnostic.clocks_tolerance_pcnt": "0.5", "diagnostic.power_tolerance_pcnt": "0.5"}),
    (4, "hsd", 1, {"diagnostic.precision": "hsd", "diagnostic.clocks_tolerance_pcnt": "1",
                   "diagnostic.power_tolerance_pcnt": "1"}),
    (3, "", -2.0, {}),
])
def test_diag_parameters_values(level: int, precision: str | None, outlier: float, expected: dict) -> None:
    assert dcgm.diag_parameters(level, precision, outlier) == expected


# ---- fixed defects (each test fails on the parser before its fix) ----------------------------------------------
def _rows(name: str, message: str) -> str:
    """A message as dcgmi prints it: cut into 45-character pieces, one row each (NVIDIA/DCGM dcgmi/Diag.cpp,
    Diag::DisplayVerboseInfo and DATA_INFO_TAG_LEN; the rows' widths as in the captures)."""
    pieces = [message[i:i + 45] for i in range(0, len(message), 45)]
    return "".join(f"| {name if i == 0 else '':<25} | {p:<46} |\n" for i, p in enumerate(pieces))


def test_wrapped_message_keeps_the_space_at_a_cut() -> None:
    # the ml-engineering capture: the cut falls before a space, which opens the next row ("|  remappings")
    (r,) = dcgm.parse_text(ROWREMAP)["tests"][0]["results"]
    assert r["warnings"] == ["GPU 3 has uncorrectable memory errors and row remappings are pending"]
    # a cut right after a space, where the table's padding hides the piece's last character: the real warning of
    # the DCGM 4.2.3 GB10 capture (its JSON), as the text table cuts it
    (msg,) = dcgm.parse_json(pub("dcgmi", "DCGM4.2.3"))["tests"][0]["results"][0]["warnings"]
    assert msg[44] == " "
    (t,) = dcgm.parse_text("| software                  | Fail                                           |\n"
                           + _rows("Error", msg))["tests"]
    assert t["results"][1] == _r([0], "fail", [msg])


def test_4x_entity_rows_name_the_failing_gpu() -> None:
    # the DCGM 4.0.0 table of the DCGM docs (tests/fixtures/public/dcgmi), its memory plugin failing on GPU2 as
    # dcgmi 4.x prints it (dcgmi/Diag.cpp HelperDisplayEntityResults: "GPU2: Fail", then "Warning: GPU2" rows)
    msg = "Error using CUDA API cudaMalloc: out of memory while allocating 79 GB on GPU 2"
    memory = TABLE_4X.index("| memory ")
    head, tail = TABLE_4X[:memory], TABLE_4X[memory:]
    tail = tail.replace("| Pass ", "| Fail ", 1).replace("| GPU2: Pass", "| GPU2: Fail", 1)
    end = tail.index("\n", tail.index("| GPU2: Fail")) + 1
    tail = tail[:end] + _rows("Warning: GPU2", msg) + tail[end:]
    p = dcgm.parse_text(head + tail)
    t = next(t for t in p["tests"] if t["name"] == "memory")
    assert t["results"] == [_r([], "fail"), _r([0], "pass"), _r([1], "pass"), _r([2], "fail"),
                            _r([2], "warn", [msg]), _r([3], "pass")]
    assert dcgm.failed_tests(p) == ["memory"]
    assert [t["name"] for t in p["tests"]] == ["software", "memory", "diagnostic", "pcie", "memory_bandwidth",
                                               "targeted_stress", "targeted_power"]
