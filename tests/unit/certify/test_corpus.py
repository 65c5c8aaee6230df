"""The corpus of real lines (tests/fixtures/corpus/*.yml), one case per line, judged through the real parsers and
gates: every line must get the verdict its source documents. Then the per-gate accuracy table over the corpus and
the recorded real healthy captures: no false fail there (issue 46)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gridready.certify import accuracy
from gridready.certify.result import GateStatus as S

ROOT = Path(__file__).resolve().parents[3]
CORPUS = accuracy.load_corpus(ROOT / "tests" / "fixtures" / "corpus")
BASE_Q = (ROOT / "tests" / "fixtures" / "h200x1" / "nvidia-smi-q.txt").read_text()


def _id(case: accuracy.Case) -> str:
    return f"{case.gate}-{case.verdict}-{case.line.splitlines()[0][-60:]}"


@pytest.mark.parametrize("case", CORPUS, ids=[_id(c) for c in CORPUS])
def test_each_real_line_is_judged_as_documented(case: accuracy.Case) -> None:
    assert accuracy.judge(case, BASE_Q).value == case.verdict, f"{case.source}: {case.reason}"


def test_the_corpus_covers_both_directions_of_every_gate() -> None:
    assert len(CORPUS) >= 180
    assert len({(c.line, c.section) for c in CORPUS}) == len(CORPUS)  # no line counted twice in one place
    seen = Counter((c.gate, c.verdict == "pass") for c in CORPUS)
    for gate in ("xid", "pcie_link", "row_remap", "ecc", "throttle", "nccl_allreduce"):
        assert seen[(gate, True)] and seen[(gate, False)], gate


def test_a_line_replaces_its_key_inside_its_own_section_only() -> None:
    text = accuracy._in_section(BASE_Q, "Remapped Rows", "        Pending                           : Yes")
    block = text[text.index("    Remapped Rows"):text.index("    Temperature")]
    assert "\n        Pending                           : Yes\n" in block
    assert text.count(": Yes") == BASE_Q.count(": Yes") + 1  # nothing else changed
    added = accuracy._in_section(BASE_Q, "Volatile", "            SRAM Uncorrectable            : 1")
    vol = added[added.index("        Volatile"):added.index("        Aggregate")]
    assert "\n            SRAM Uncorrectable            : 1\n" in vol  # an older driver's key, added to its section


CAPTURES = accuracy.load_captures([
    (ROOT / "tests/fixtures/h200x2/probe_quick.json", "H200-SXM-141GB", 2, "passthrough"),
    (ROOT / "tests/fixtures/h200x1/probe_quick_after.json", "H200-SXM-141GB", 1, "passthrough"),
    (ROOT / "docs/examples/h200x1/probe.json", "H200-SXM-141GB", 1, "passthrough"),
])


def test_accuracy_table_every_line_judged_as_documented_and_no_false_fail() -> None:
    rows = accuracy.table(CORPUS, BASE_Q, CAPTURES)
    by = {r.gate: r for r in rows}
    assert sum(r.fault_lines + r.noise_lines for r in rows) == len(CORPUS)
    assert all(r.detected == r.fault_lines and r.noise_passed == r.noise_lines for r in rows)
    assert len(CAPTURES) == 3 and by["xid"].healthy_runs == 3 and by["gemm_bf16"].healthy_runs == 3
    assert [r.gate for r in rows if r.false_fails] == []
    md = accuracy.markdown(rows)
    assert md.splitlines()[0].startswith("| gate | healthy runs judged | false fails |")
    assert "| xid | 3 | 0 |" in md


def test_a_false_fail_on_a_capture_is_counted() -> None:
    doc = {**CAPTURES[0][1], "kernel_log": {"source": "dmesg", "lines": 0}}
    rows = {r.gate: r for r in accuracy.table([], BASE_Q, [("edited", doc, "H200-SXM-141GB", 2, "passthrough")])}
    assert rows["xid"].false_fails == 1 and rows["xid"].healthy_runs == 1


def test_capture_gates_not_run_there_are_not_judged() -> None:
    results = accuracy.judge_capture(CAPTURES[0][1], "H200-SXM-141GB", 2, "passthrough")
    assert {"sdc", "training_goodput"}.isdisjoint({r.gate for r in results})
    assert all(r.status is not S.SKIPPED for r in results)


def test_report_names_each_misjudged_line_and_false_fail(tmp_path: Path) -> None:
    """`invoke certify --accuracy` on a copy of the repository whose corpus holds one line judged wrongly and whose
    quick runs hold one that fails: both are named, and print_report exits 5."""
    import json
    import shutil

    from gridready.errors import NotCertified

    for rel in ("tests/fixtures/h200x1/nvidia-smi-q.txt", "tests/fixtures/h200x2/probe_quick.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "tests/fixtures/corpus").mkdir(parents=True)
    wrong = CORPUS[0].model_copy(update={"verdict": "fail"})
    (tmp_path / "tests/fixtures/corpus/c.yml").write_text(json.dumps({"cases": [wrong.model_dump(exclude_none=True)]}))
    run = tmp_path / "docs/examples/h200x1/accuracy/run-01/probe.json"
    run.parent.mkdir(parents=True)
    doc = json.loads((ROOT / "tests/fixtures/h200x1/probe_quick_after.json").read_text())
    run.write_text(json.dumps({**doc, "kernel_log": {"source": "dmesg", "lines": 0}}))
    rows, problems = accuracy.report(tmp_path)
    assert [p.split(":")[0] for p in problems] == ["corpus", "docs/examples/h200x1/accuracy/run-01/probe.json"]
    assert {r.gate: r.healthy_runs for r in rows}["(healthy runs)"] == 2
    with pytest.raises(NotCertified):
        accuracy.print_report(tmp_path)


def test_the_table_in_docs_is_the_one_the_command_prints() -> None:
    """docs/certification.md publishes `invoke certify --accuracy` as committed: regenerate it when the corpus or the
    recorded runs change."""
    doc = (ROOT / "docs" / "certification.md").read_text()
    rows, problems = accuracy.report(ROOT)
    assert problems == [] and accuracy.markdown(rows) in doc
