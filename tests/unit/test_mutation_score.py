"""benchmarks/mutation_score.py's bookkeeping: every module of the measured packages is found (subpackages and the
two core modules included), the shards and jobs cover each module exactly once, the score counts what was not run
against it, and a test file that starts processes never joins a selection."""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import mutation_score as ms

REPO = Path(__file__).resolve().parents[2]


def test_every_module_is_found():
    found = {ms.module_path(p, m) for p, mods in ms.MODULES.items() for m in mods}
    on_disk = {str(f.relative_to(REPO)) for pkg in ms.PACKAGES for f in (REPO / "gridready" / pkg).rglob("*.py")
               if f.parent != REPO / "gridready" / pkg or f.name != "__init__.py"}
    assert found == on_disk | {"gridready/ledger.py", "gridready/evidence.py"}
    assert {"vllm", "sglang", "triton", "triton/plan"} <= set(ms.MODULES["serving"])
    assert ms.dotted("serving", "triton") == "gridready.serving.triton"
    assert ms.dotted("core", "ledger") == "gridready.ledger"


@pytest.mark.parametrize("n", [1, 3, 4])
def test_shards_and_jobs_cover_each_module_once(n):
    every = [(p, m) for p, mods in ms.MODULES.items() for m in mods]
    parts = ms.shards(ms.MODULES, n)
    assert sorted(x for part in parts for x in part) == sorted(every) and len(parts) == n
    jobs = ms.jobs_of(ms.MODULES, n)
    assert sorted(x for job in jobs for x in job) == sorted(every)
    assert ms.shards(ms.MODULES, n) == parts  # the same parts on every call


def test_score_counts_mutants_not_run_against_it():
    assert ms.score(Counter(killed=9, survived=1)) == 90.0
    assert ms.score(Counter(killed=9, survived=0, **{"not run": 1})) == 90.0
    assert ms.score(Counter(killed=9, skipped=5, **{"no tests": 1})) == 90.0
    assert ms.score(Counter()) is None


def test_selections_leave_out_tests_that_start_processes():
    tests = ms.tests_for("spec", "rules")
    assert "tests/unit/spec/test_rule_named_groups.py" in tests
    assert "tests/unit/test_inventory_errors.py" in tests  # kept: its one such test is deselected
    assert not any(ms._starts_processes(t) for t in tests)
    assert "tests/unit/certify/test_shapes.py" not in ms.tests_for("certify", "judge")


def test_an_explanation_names_mutants_in_each_written_form():
    text = ("- gridready.certify.judge.x_judge_node__mutmut_53 (dotted), `x_units__mutmut_60`, `pod_args__mutmut_13`\n"
            "- `triton_nodes__mutmut_16/20/21`, `parse__mutmut_25, 27` and `xǁProbeǁkernel__mutmut_30`; "
            "`x_cap__mutmut_7`: 3 of them")
    assert ms.explained_names(text) == {
        "judge_node__mutmut_53", "units__mutmut_60", "pod_args__mutmut_13", "triton_nodes__mutmut_16",
        "triton_nodes__mutmut_20", "triton_nodes__mutmut_21", "parse__mutmut_25", "parse__mutmut_27",
        "xǁProbeǁkernel__mutmut_30", "cap__mutmut_7"}
    assert ms.plain_name("gridready.certify.judge.x_judge_node__mutmut_53") == "judge_node__mutmut_53"
    assert ms.plain_name("gridready.probe.collect.xǁProbeǁkernel__mutmut_30") == "xǁProbeǁkernel__mutmut_30"


def test_a_survivor_no_explanation_names_is_listed(tmp_path, monkeypatch):
    meta = tmp_path / "part-x/mutants/gridready/certify/judge.py.meta"
    meta.parent.mkdir(parents=True)
    names = [f"gridready.certify.judge.x_judge_node__mutmut_{n}" for n in (1, 2, 3, 4)]
    meta.write_text(json.dumps({"exit_code_by_key": dict(zip(names, (1, 0, 0, None), strict=True))}))
    (tmp_path / "certify_judge.md").write_text("- `judge_node__mutmut_2`: equivalent\n")
    monkeypatch.setattr(ms, "EXPLAINED", tmp_path)
    # 1 killed, 4 not run: neither needs a word; 2 is named; 3 survived unnamed
    assert ms.unexplained(tmp_path, {"certify": ["judge"]}) == {"certify/judge": [names[2]]}


def test_mutmut_copies_everything_beside_the_mutated_files_once():
    paths = ["gridready/certify/judge.py", "gridready/serving/triton/plan.py"]
    entries = [Path(e) for e in ms.copied_beside(paths)]
    covered = {f.relative_to(REPO) for e in entries for f in ([REPO / e] if (REPO / e).is_file() else
                                                               (REPO / e).rglob("*")) if f.is_file()}
    for f in (REPO / "gridready").rglob("*.py"):
        rel = f.relative_to(REPO)
        if "__pycache__" not in rel.parts:
            assert (rel in covered) == (str(rel) not in paths), rel
    assert Path("tests") in entries and Path("gridready/data") in entries  # whole folders where nothing is mutated
    assert Path("gridready/serving/triton/pbtxt.py") in entries and Path("gridready/certify") not in entries
    assert not any(e.parts[0] in ms.TOP or e == Path("pyproject.toml") for e in entries)
    assert len(entries) == len(set(entries))


def _meta(path: Path, codes: dict[str, int | None], durations: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes, "durations_by_key": durations}))


def test_merged_results_take_each_mutants_first_decided_result(tmp_path):
    judge = "gridready/certify/judge.py.meta"
    a, b = tmp_path / "a", tmp_path / "b"
    _meta(a / "part-all-j4-2/mutants" / judge, {"j_1": 1, "j_2": None, "j_3": None}, {"j_1": 0.5})
    _meta(b / "run/mutants" / judge, {"j_1": 0, "j_2": 0, "j_3": None}, {"j_1": 9.0, "j_2": 2.0})
    _meta(b / "run/mutants/gridready/ledger.py.meta", {"l_1": 36}, {"l_1": 30.0})
    out = tmp_path / "all"
    assert ms.merge(out, [a, b]) == 2
    merged = json.loads((out / "run/mutants" / judge).read_text())
    # killed on the first machine stays killed; run only on the second: its result and duration; run nowhere: not run
    assert merged["exit_code_by_key"] == {"j_1": 1, "j_2": 0, "j_3": None}
    assert merged["durations_by_key"] == {"j_1": 0.5, "j_2": 2.0}
    assert ms.figures(out, "gridready/ledger.py") == Counter(timeout=1)


def test_a_packed_state_holds_the_mutated_modules_and_stats_only(tmp_path, monkeypatch):
    work = tmp_path / "work"
    mutants = work / "part-all-j2-1/mutants"
    _meta(mutants / "gridready/certify/judge.py.meta", {"j_1": 1}, {})
    for name in ("gridready/certify/judge.py", "gridready/certify/judge.py.spans", "gridready/certify/xid.py",
                 "tests/unit/certify/test_xid.py", "mutmut-stats.json"):
        (mutants / name).parent.mkdir(parents=True, exist_ok=True)
        (mutants / name).write_text("{}" if name.endswith(".json") else "# " + name)
    (work / "part-all-j2-1/pyproject.toml").write_text("")
    names = ms.pack(work, tmp_path / "state.tar.gz")
    assert names == [f"part-all-j2-1/mutants/{n}" for n in (
        "gridready/certify/judge.py", "gridready/certify/judge.py.meta", "gridready/certify/judge.py.spans",
        "mutmut-stats.json")]
    with tarfile.open(tmp_path / "state.tar.gz") as tar:
        tar.extractall(tmp_path / "there", filter="data")
    assert all((tmp_path / "there" / n).read_bytes() == (work / n).read_bytes() for n in names)
    # a result file caught half-written is read again, and never packed broken
    (mutants / "gridready/certify/judge.py.meta").write_text('{"exit_code_by_key": {"j_1"')
    monkeypatch.setattr(ms.time, "sleep", lambda _s: None)
    with pytest.raises(ValueError, match=r"judge\.py\.meta: not complete JSON"):
        ms.pack(work, tmp_path / "again.tar.gz")


def test_a_mutant_named_only_among_the_killed_is_not_explained():
    text = ("# certify/xid: 3 survivors\n\n## Not killed yet: a test would need two entries\n\n"
            "- `xid_gate__mutmut_1`: two Xid rows of one GPU\n  Killed by nothing yet; `xid_gate__mutmut_2` too.\n\n"
            "Killed in this run (survived before): `xid_gate__mutmut_3/4`,\n`xid_gate__mutmut_5`.\n\n"
            "**Killed** now: `xid_gate__mutmut_6`\n\n"
            "## Killed by a test added after the run\n\n- `xid_gate__mutmut_7`\n\n"
            "## Equivalent\n\n- `xid_gate__mutmut_8`: the caller sorts first\n")
    assert ms.explained_names(text) == {f"xid_gate__mutmut_{n}" for n in (1, 2, 8)}


def test_timeouts_run_again_alone_once(tmp_path, monkeypatch):
    part = tmp_path / "part-all-j2-1"
    meta = part / "mutants/gridready/spec/rules.py.meta"
    _meta(meta, {"r_1": -24, "r_2": 1, "r_3": 152, "r_4": None}, {})
    _meta(tmp_path / "part-all-j2-2/mutants/gridready/ledger.py.meta", {"l_1": 0}, {})
    calls = []

    def mutmut_run(argv, cwd, **_kw):  # the loop (r_3) times out again; r_1 was a stray SIGXCPU
        calls.append((argv, cwd))
        _meta(meta, {"r_1": 1, "r_2": 1, "r_3": -24, "r_4": None}, {})

    monkeypatch.setattr(ms.subprocess, "run", mutmut_run)
    notes = ms.rerun_timeouts(tmp_path, float("inf"), Path("/x/mutmut"))
    assert calls == [(["/x/mutmut", "run", "--max-children", "1", "r_1", "r_3"], part)]  # no timeout in part 2
    assert notes == ["part-all-j2-1: 2 timeout(s) run again alone, 1 timed out again (r_3)"]
    assert ms.rerun_timeouts(tmp_path, 0.0, Path("/x/mutmut")) == []  # past the deadline: nothing runs


def test_a_missing_work_folder_is_one_line_and_exit_2(tmp_path, capsys):
    for argv in (["--workdir", str(tmp_path / "all"), "--merge", str(tmp_path / "gone")],
                 ["--workdir", str(tmp_path / "gone"), "--pack", str(tmp_path / "state.tar.gz")]):
        with pytest.raises(SystemExit) as stop:
            ms.main(argv)
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(f"{tmp_path / 'gone'}: no such work folder")
    assert not (tmp_path / "state.tar.gz").exists() and not (tmp_path / "all").exists()
