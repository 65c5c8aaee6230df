"""The accuracy table's helpers, value by value: where a corpus line lands in its base capture (nvidia-smi -q by key
and section, nccl-tests by row size or line kind), the node each family is judged as, the worst verdict, the SKU of
a one-GPU run, and what `invoke certify --accuracy` prints (Markdown or JSON) and raises."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gridready.certify import accuracy
from gridready.certify import judge as judge_mod
from gridready.certify.result import GateResult
from gridready.certify.result import GateStatus as S
from gridready.errors import NotCertified
from gridready.spec.certification import Profile

ROOT = Path(__file__).resolve().parents[3]
XID_48 = ("NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) "
          "has been detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.")


def _r(gate: str, status: S) -> GateResult:
    return GateResult(gate=gate, node="n", status=status, reason="r")


def _case(**kw: Any) -> accuracy.Case:
    base = {"line": XID_48, "source": "https://example.invalid/source", "tool": "dmesg", "gate": "xid",
            "verdict": "fail", "reason": "documented reason"}
    return accuracy.Case.model_validate({**base, **kw})


# ---- _worst: by severity, not by the status's spelling ------------------------------------------------------------

@pytest.mark.parametrize(("statuses", "worst"), [
    ([S.FAIL, S.WARN], S.FAIL),  # "warn" > "fail" as strings: the rank decides
    ([S.PASS, S.SKIPPED], S.PASS),
    ([S.WARN, S.ERROR, S.FAIL], S.ERROR),
    ([], S.PASS),
])
def test_worst_is_the_most_severe_status(statuses: list[S], worst: S) -> None:
    assert accuracy._worst(_r("g", s) for s in statuses) is worst


# ---- _in_section: the line takes its key's place inside the named section ------------------------------------------

Q = ("GPU 00000000:00:06.0\n"
     "    Bus Id                                : 00000000:00:06.0\n"
     "    Pending                               : outside\n"
     "    Remapped Rows\n"
     "        Correctable Error                 : 0\n"
     "        Pending                           : No\n"
     "    Temperature\n"
     "        Pending                           : 5\n")


def test_in_section_replaces_the_key_inside_its_section_not_the_same_key_before_it() -> None:
    out = accuracy._in_section(Q, "Remapped Rows", "  Pending : Yes")
    assert out == Q.replace("        Pending                           : No", "        Pending : Yes")


def test_in_section_replaces_the_first_key_of_its_section() -> None:
    out = accuracy._in_section(Q, "Remapped Rows", "Correctable Error : 3")
    assert out == Q.replace("        Correctable Error                 : 0", "        Correctable Error : 3")


def test_in_section_adds_a_missing_key_at_the_top_of_an_empty_section_not_in_the_next() -> None:
    base = "GPU 0\n    Remapped Rows\n    Temperature\n        Pending : 5\n    Clocks\n"
    out = accuracy._in_section(base, "Remapped Rows", "Pending : Yes")
    assert out == "GPU 0\n    Remapped Rows\n        Pending : Yes\n    Temperature\n        Pending : 5\n    Clocks\n"


def test_in_section_without_section_replaces_the_first_line_too() -> None:
    assert accuracy._in_section("A : 1\nB : 2", None, "A : 9") == "A : 9\nB : 2\n"


def test_in_section_without_section_inserts_a_missing_key_after_the_first_line_at_indent_three() -> None:
    assert accuracy._in_section("A : 1\nB : 2\nC : 3", None, "D : 4") == "A : 1\n   D : 4\nB : 2\nC : 3\n"


def test_in_section_keys_on_the_text_before_the_first_colon() -> None:
    """A value holding colons (a PCI bus id) still replaces its key's line."""
    out = accuracy._in_section(Q, None, "Bus Id : 00000000:07:00.0")
    assert out == Q.replace("    Bus Id                                : 00000000:00:06.0",
                            "    Bus Id : 00000000:07:00.0")


# ---- _with_nccl_line: a row replaces its size's row; the out-of-bounds line its own; anything else after the rows --

ROW8 = ("           8             2     float     sum      -1    23.38    0.00    0.00       0    19.80    0.00"
        "    0.00       0")
ROW16 = ("          16             4     float     sum      -1    19.12    0.00    0.00       0    20.05    0.00"
         "    0.00       0")
NCCL = "\n".join(["# nccl-tests", ROW8, ROW16, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 110.211 "])


def test_a_result_row_replaces_the_row_of_its_size() -> None:
    new = ROW16.replace("19.12", "99.99")
    assert accuracy._with_nccl_line(NCCL, new) == NCCL.replace(ROW16, new) + "\n"


def test_the_out_of_bounds_line_replaces_its_own_line() -> None:
    new = "# Out of bounds values : 3 FAILED"
    assert accuracy._with_nccl_line(NCCL, new) == NCCL.replace("# Out of bounds values : 0 OK", new) + "\n"


def test_any_other_line_goes_right_after_the_last_row() -> None:
    new = "node1: Test NCCL failure common.cu:1005 'unhandled cuda error'"
    lines = NCCL.splitlines()
    assert accuracy._with_nccl_line(NCCL, new) == "\n".join([*lines[:3], new, *lines[3:]]) + "\n"


def test_a_line_goes_at_the_end_of_a_capture_without_rows() -> None:
    assert accuracy._with_nccl_line("# a\n# b", "x") == "# a\n# b\nx\n"


# ---- the node each family is judged as ----------------------------------------------------------------------------

def test_exp_is_the_corpus_node_of_the_named_shape() -> None:
    e = accuracy._exp("h200", 1, "passthrough")
    assert (e.node, e.sku.name, e.gpus, e.platform) == ("corpus", "H200-SXM-141GB", 1, "passthrough")


def test_kernel_doc_is_a_log_from_boot_from_the_corpus() -> None:
    doc = accuracy._kernel_doc(_case())
    assert doc["system"] == {}
    assert (doc["kernel_log"]["source"], doc["kernel_log"]["from_boot"]) == ("corpus", True)
    assert [e["xid"] for e in doc["kernel_log"]["xid"]] == [48]


def _recorder(calls: list[tuple[dict[str, Any], Any]], out: list[GateResult]) -> Any:
    def gate(doc: dict[str, Any], exp: Any) -> list[GateResult]:
        calls.append((doc, exp))
        return out
    return gate


def _shape(exp: Any) -> tuple[str, str, int, str]:
    return exp.node, exp.sku.name, exp.gpus, exp.platform


def test_kernel_log_lines_are_judged_on_an_8_gpu_bare_metal_h100(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[dict[str, Any], Any]] = []
    monkeypatch.setattr(accuracy.xid, "xid", _recorder(calls, [_r("xid", S.WARN)]))
    monkeypatch.setattr(accuracy.pcie, "pcie_link", _recorder(calls, [
        _r("pcie_link", S.FAIL), GateResult(gate="pcie_link", node="n", hca="mlx5_0", status=S.WARN, reason="r")]))
    assert accuracy._xid(_case(), "") is S.WARN
    assert accuracy._pcie(_case(gate="pcie_link"), "") is S.WARN  # only the HCA's verdicts count
    assert [_shape(e) for _, e in calls] == [("corpus", "H100-SXM5-80GB", 8, "baremetal")] * 2


def test_smi_lines_are_judged_in_a_present_q_document_of_one_passthrough_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[dict[str, Any], Any]] = []
    monkeypatch.setitem(accuracy._GATES_Q, "ecc", _recorder(calls, [_r("ecc", S.FAIL)]))
    assert accuracy._smi(_case(gate="ecc", line="A : 1"), "A : 0\nB : 2\n") is S.FAIL
    (doc, exp), = calls
    assert doc["nvidia_smi"]["present"] is True and doc["nvidia_smi"]["query"] == []
    assert _shape(exp) == ("corpus", "H200-SXM-141GB", 1, "passthrough")


def test_nccl_lines_are_judged_as_one_completed_run_of_two_passthrough_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[dict[str, Any], Any]] = []
    monkeypatch.setattr(accuracy.nccl, "nccl_allreduce", _recorder(calls, [_r("nccl_allreduce", S.PASS)]))
    assert accuracy._nccl(_case(gate="nccl_allreduce", line="# Out of bounds values : 0 OK"), "") is S.PASS
    (doc, exp), = calls
    assert doc["nccl_tests"]["present"] is True
    run, = doc["nccl_tests"]["collectives"]["all_reduce"]["runs"]
    assert (run["rc"], run["timed_out"]) == (0, False)
    assert _shape(exp) == ("corpus", "H200-SXM-141GB", 2, "passthrough")


# ---- judge_capture and table --------------------------------------------------------------------------------------

def test_judge_capture_judges_the_quick_profile_with_absent_steps_not_applicable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def judge_node(spec: Any, group: Any, doc: Any, node: str) -> Any:
        seen.update(spec=spec, group=group, node=node)
        return SimpleNamespace(gates=[_r("xid", S.SKIPPED), _r("ecc", S.PASS)])

    monkeypatch.setattr(judge_mod, "judge_node", judge_node)
    doc = {"goodput": {"present": True}, "dcgm": {"present": True}, "sdc": {"present": False}}
    assert [r.gate for r in accuracy.judge_capture(doc, "H200-SXM-141GB", 2, "passthrough")] == ["ecc"]
    assert seen["spec"].profile is Profile.QUICK and seen["spec"].not_applicable == ["sdc"]
    assert seen["node"] == "capture"
    assert (seen["group"].gpus_per_node, seen["group"].platform) == (2, "passthrough")
    accuracy.judge_capture({}, "H200-SXM-141GB", 2, "passthrough")
    assert seen["spec"].not_applicable == ["sdc", "training_goodput", "dcgm"]


def test_table_counts_a_capture_whose_gate_fails_on_one_gpu_and_passes_on_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accuracy, "judge_capture", lambda *a: [_r("xid", S.FAIL), _r("xid", S.PASS),
                                                               _r("ecc", S.WARN), _r("ecc", S.PASS)])
    rows = {r.gate: r for r in accuracy.table([], "", [("p", {}, "H200-SXM-141GB", 1, "passthrough")])}
    assert (rows["xid"].healthy_runs, rows["xid"].false_fails) == (1, 1)
    assert (rows["ecc"].healthy_runs, rows["ecc"].false_fails) == (1, 0)


# ---- _sku_of: the GPU of a one-GPU run ----------------------------------------------------------------------------

def _run(tmp_path: Path, doc: Any) -> Path:
    p = tmp_path / "probe.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize(("device_id", "sku"), [
    ("0x233010DE", "H100-SXM5-80GB"),  # nvidia-smi's form: device id then vendor id
    ("0x233510DE", "H200-SXM-141GB"),
    ("xx2330", "H200-SXM-141GB"),  # not a 0x id: unreadable
    ("0xffff10DE", "H200-SXM-141GB"),  # not in the catalog
])
def test_sku_of_reads_the_pci_device_id(tmp_path: Path, device_id: str, sku: str) -> None:
    path = _run(tmp_path, {"nvidia_smi": {"query": [{"pci.device_id": device_id}]}})
    assert accuracy._sku_of(path) == sku


def test_sku_of_an_unreadable_run_is_h200(tmp_path: Path) -> None:
    assert accuracy._sku_of(tmp_path / "missing.json") == "H200-SXM-141GB"
    assert accuracy._sku_of(_run(tmp_path, {"nvidia_smi": {"query": []}})) == "H200-SXM-141GB"


# ---- report and print_report ----------------------------------------------------------------------------------------

def _repo(tmp_path: Path, cases: list[accuracy.Case]) -> Path:
    q = tmp_path / "tests/fixtures/h200x1/nvidia-smi-q.txt"
    q.parent.mkdir(parents=True)
    q.write_text((ROOT / "tests/fixtures/h200x1/nvidia-smi-q.txt").read_text())
    corpus = tmp_path / "tests/fixtures/corpus"
    corpus.mkdir(parents=True)
    (corpus / "c.yml").write_text(json.dumps({"cases": [c.model_dump(exclude_none=True) for c in cases]}))
    return tmp_path


def test_report_names_a_misjudged_line_by_its_first_100_characters(tmp_path: Path) -> None:
    wrong = _case(verdict="pass")  # Xid 48 fails
    rows, problems = accuracy.report(_repo(tmp_path, [wrong]))
    assert problems == [f"corpus: xid gives fail where pass is documented (https://example.invalid/source): "
                        f"{XID_48[:100]}"]
    assert {r.gate: (r.fault_lines, r.noise_lines, r.noise_passed) for r in rows}["xid"] == (0, 1, 0)


def test_print_report_prints_markdown_by_default_and_passes_a_clean_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path, [_case()])
    accuracy.print_report(root)
    out = capsys.readouterr().out
    assert out == accuracy.markdown(accuracy.report(root)[0]) + "\n"
    assert "| xid | 0 | 0 | 1 | 1 | 0 | 0 |" in out


def test_print_report_json_is_indented_and_names_gates_and_problems(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path, [_case()])
    accuracy.print_report(root, as_json=True)
    out = capsys.readouterr().out
    rows = accuracy.report(root)[0]
    assert out == json.dumps({"gates": [r.model_dump() for r in rows], "problems": []}, indent=2) + "\n"
    assert json.loads(out)["gates"][0]["gate"] == "xid"


def test_print_report_raises_with_one_line_per_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path, [_case(verdict="pass"), _case(verdict="warn", line=XID_48 + " ")])
    with pytest.raises(NotCertified) as raised:
        accuracy.print_report(root)
    assert [ln.split(":")[0] for ln in str(raised.value).split("\n")] == ["corpus", "corpus"]
    assert "xid gives fail where warn is documented" in str(raised.value).split("\n")[1]
