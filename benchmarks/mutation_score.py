"""Mutation score of the modules that decide verdicts and arguments, per package, with mutmut (dev extra).

    nice -n 19 python benchmarks/mutation_score.py --until 06:45 --write docs/mutation.md
    python benchmarks/mutation_score.py --modules certify/pcie --report-only   # figures of a past run
    python3 benchmarks/mutation_score.py --one-run --max-children 14 --mutmut /tmp/site/bin/mutmut --until 20:40
        # a machine of 16 cores (benchmarks/mutation_device_run.sh: the lent H200 host, docs/mutation.md)

Not a CI gate (tens of minutes on two cores): a command to run before a change is done. The repository is copied
to --workdir (never the working tree; a second run reuses the copy and mutmut's results, and a changed source file
is mutated again); mutmut mutates the modules of MODULES there and runs, for each mutant, the tests of TESTS that
cover it (mutmut's per-function test selection). One `mutmut run` per module (ORDER first), stopped at --until (UTC):
figures are of the mutants run by then, and say how many were not run. With --one-run, one `mutmut run` over every
module instead of one per module: no per-module start-up (test listing, clean run), mutants in mutmut's order (fast
ones first), and a later run with the same work directory goes on with the mutants not run yet (a run per module
re-runs every mutant of that module).

Score = killed / (killed + survived + no tests + timeout + suspicious): a mutant no test reaches counts against it.
Goal (issue #35): 85% in certify/ and the probe's parsers, 75% in spec/ and serving/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")  # else --mutmut (pip --target puts it in <target>/bin)
# package -> modules, run in ORDER (the named modules first). certify's fabric/multinode/isolation are not
# measured yet. tests/unit/fabric (the tests of certify/hca, probe/hca, certify/quarantine) was once left out of TESTS
# as "comparing GateStatus with str in sets, which mutmut's trampolines break": wrong. The copy made by prepare()
# dropped every file named `state` (IGNORE), so the sysfs fixtures lost their ports' `state` files and mutmut's
# clean run failed (test_sysfs_saturated_link_downed_fails_mlx5_1_only: port state unreadable, ERROR not PASS).
MODULES = {
    "certify": ["nccl", "memory_errors", "thermal", "pcie", "nvlink", "xid", "compute", "software", "host_settings",
                "diagnostics", "judge", "result", "expectations", "measurements", "hca", "outliers", "quarantine",
                "inventory", "transfer"],
    "probe": ["nvsmi", "nccl_tests", "lspci", "dcgm", "hca", "kernel_log", "sysfs", "gpu_burn", "nvbandwidth"],
    "spec": ["rules"],
    "serving": ["vllm", "sglang"],
}
ORDER = [("probe", "nvsmi"), ("certify", "nccl"), ("certify", "memory_errors"), ("certify", "thermal"),
         ("certify", "pcie"), ("spec", "rules"), ("serving", "vllm"), ("serving", "sglang"), ("probe", "nccl_tests"),
         ("probe", "lspci"), ("probe", "kernel_log")]
GOAL = {"certify": 85, "probe": 85, "spec": 75, "serving": 75}
TESTS = ["tests/unit/certify/test_gate_boundaries.py", "tests/unit/certify/test_gates_h200x2.py",
         "tests/unit/certify/test_gates_public.py", "tests/unit/certify/test_judge.py",
         "tests/unit/certify/test_collective_floors.py", "tests/unit/certify/test_dcgm_precision.py",
         "tests/unit/certify/test_peermem_gate.py", "tests/unit/certify/test_roce_host_gates.py",
         "tests/unit/certify/test_sdc.py",  # joined after the run of record: judge_fleet's SDC consensus
         "tests/unit/probe", "tests/unit/fabric",
         "tests/unit/test_hf_id_rule.py", "tests/unit/test_inventory_errors.py",
         "tests/unit/serving/test_engine_edges.py", "tests/unit/serving/test_vllm_args.py",
         "tests/unit/serving_sglang/test_launch.py",
         # value tests per gate, parser and builder (issue 35)
         *(f"tests/unit/certify/test_{n}.py" for n in (
             "compute_gate_values", "dcgm_gate_values", "expectations_values", "host_settings_values",
             "inventory_gate_values", "judge_verdict_values", "measurements_values", "memory_errors_verdicts",
             "nccl_check_iters", "nccl_collective_verdicts",
             "nvlink_gate_values", "outlier_values", "pcie_link_values", "quarantine_outputs_values",
             "software_gate_values", "thermal_verdicts", "transfer_gate_values", "xid_gate_values")),
         "tests/unit/spec", "tests/unit/serving/test_vllm_hosts_extravars_values.py",
         "tests/unit/serving/test_vllm_k8s_config_values.py",
         "tests/unit/serving_sglang/test_sglang_config_values.py"]
# fails on this machine before any mutation: its simulated dcgmi subprocess imports the shared checkout's gridready,
# whose sandbox package is being moved (tests/unit/certify/test_shapes.py and test_simulated.py likewise, left out)
DESELECT = ["tests/unit/certify/test_dcgm_precision.py::test_the_report_says_which_precision_ran",
            # runs `invoke` in a subprocess from a temporary inventory, where mutmut's import hook finds no source
            "tests/unit/test_inventory_errors.py::test_invoke_exits_2_before_anything_runs"]
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", None: "not run", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", 37: "killed"}
# At any depth: caches. The repository's own outputs (artifacts/, build/, state/, mutants/) only at the top (TOP):
# a pattern here matches files too, and `state` dropped the `ports/1/state` files of the sysfs fixtures
# (tests/fixtures/public/sysfs-infiniband/...), so every HCA port read as unreadable in the copy.
IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")
TOP = (".git", ".venv", "mutants", "artifacts", "build", "state")


def module_path(pkg: str, mod: str) -> str:
    return f"gridready/{pkg}/{mod}.py"


def prepare(work: Path, paths: list[str]) -> None:
    """The repository at `work` (refreshed from the working tree), with mutmut's configuration appended."""
    work.mkdir(parents=True, exist_ok=True)
    for item in REPO.iterdir():
        if item.name in TOP:
            continue
        dst = work / item.name
        if item.is_dir():
            shutil.copytree(item, dst, ignore=IGNORE, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dst)
    also = [p.name for p in REPO.iterdir() if p.name not in (*TOP, "pyproject.toml") and not p.name.startswith(".")]
    cfg = "\n".join([
        "", "[tool.mutmut]",
        f"source_paths = {json.dumps(paths)}",  # mutmut 3.8 name (paths_to_mutate is deprecated)
        f"also_copy = {json.dumps(also)}",
        "pytest_add_cli_args = " + json.dumps(["-n", "0", "-p", "no:cacheprovider", "-q", "-m",
                                               "not extended and not sandbox",
                                               *(a for t in DESELECT for a in ("--deselect", t))]),
        f"pytest_add_cli_args_test_selection = {json.dumps(TESTS)}", ""])
    (work / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text() + cfg)


def run_mutmut(work: Path, globs: list[str], deadline: float, max_children: int, mutmut: Path = MUTMUT) -> str:
    """One `mutmut run` over `globs` (every mutant when empty); interrupted at the deadline (mutmut keeps the results
    it has)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)
    log = (work / "mutation-run.log").open("a")
    proc = subprocess.Popen([str(mutmut), "run", "--max-children", str(max_children), *globs], cwd=work, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    while proc.poll() is None:
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            return "stopped at the deadline"
        time.sleep(2)
    return f"exit {proc.returncode}"


def figures(work: Path, path: str) -> Counter[str]:
    meta = work / "mutants" / f"{path}.meta"
    if not meta.exists():
        return Counter()
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return Counter(STATUS.get(code, "suspicious") for code in codes.values())


def score(c: Counter[str]) -> float | None:
    judged = sum(v for k, v in c.items() if k not in ("not run", "skipped"))
    return 100 * c["killed"] / judged if judged else None


def survivors(work: Path, path: str) -> list[str]:
    meta = work / "mutants" / f"{path}.meta"
    if not meta.exists():
        return []
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return sorted(k for k, v in codes.items() if STATUS.get(v, "suspicious") not in ("killed", "not run", "skipped"))


def survivors_by_function(work: Path, modules: dict[str, list[str]]) -> str:
    """Surviving mutants counted per function (mutmut names them `<module>.x_<function>__mutmut_<n>`)."""
    lines = []
    for pkg, mods in modules.items():
        for mod in mods:
            names = survivors(work, module_path(pkg, mod))
            if not names:
                continue
            per = Counter(n.rsplit(".", 1)[1].split("__mutmut_")[0].removeprefix("x_").removeprefix("xǁ")
                          for n in names)
            lines.append(f"- {pkg}/{mod}: " + ", ".join(f"`{f}` {k}" for f, k in per.most_common()))
    return "\n".join(lines) or "- none"


def table(work: Path, modules: dict[str, list[str]]) -> tuple[str, dict[str, Counter[str]]]:
    rows = ["| package | module | mutants | killed | survived | no tests | timeout/suspicious | not run | score |",
            "|---|---|---|---|---|---|---|---|---|"]
    per_pkg: dict[str, Counter[str]] = {}
    for pkg, mods in modules.items():
        total: Counter[str] = Counter()
        for mod in mods:
            c = figures(work, module_path(pkg, mod))
            if not c:
                continue
            total += c
            s = score(c)
            pct = f"{s:.1f}%" if s is not None else "-"
            rows.append(f"| {pkg} | {mod} | {sum(c.values())} | {c['killed']} | {c['survived']} | {c['no tests']} | "
                        f"{c['timeout'] + c['suspicious']} | {c['not run']} | {pct} |")
        per_pkg[pkg] = total
    head = ["| package | mutants run | killed | score | goal |", "|---|---|---|---|---|"]
    for pkg, c in per_pkg.items():
        s = score(c)
        run = sum(v for k, v in c.items() if k not in ("not run", "skipped"))
        head.append(f"| {pkg} | {run} | {c['killed']} | {f'{s:.1f}%' if s is not None else 'not run'} | "
                    f"{GOAL[pkg]}% |")
    return "\n".join(head) + "\n\n" + "\n".join(rows), per_pkg


MARK = "<!-- written by benchmarks/mutation_score.py above this line; by hand below -->"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/gridready-mutation"))
    ap.add_argument("--until", help="UTC HH:MM after which no mutant runs (default: no limit)")
    ap.add_argument("--packages", nargs="*", default=list(MODULES), choices=list(MODULES))
    ap.add_argument("--modules", nargs="*", help="only these modules, as package/module (certify/pcie)")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--mutmut", type=Path, default=MUTMUT, help="the mutmut script (default: beside the interpreter)")
    ap.add_argument("--one-run", action="store_true", help="one `mutmut run` over every module (resumable)")
    ap.add_argument("--command-note", help="--write: the sentence that says how and where the figures were made")
    ap.add_argument("--note", action="append", default=[], help="--write: a line of the run log (repeatable)")
    ap.add_argument("--report-only", action="store_true", help="figures of the mutants already run in --workdir")
    ap.add_argument("--write", type=Path, help="write the figures into this markdown file (docs/mutation.md)")
    args = ap.parse_args(argv)
    modules = {p: MODULES[p] for p in args.packages}
    if args.modules:
        wanted = {tuple(m.split("/", 1)) for m in args.modules}
        modules = {p: [m for m in mods if (p, m) in wanted] for p, mods in modules.items()}
        modules = {p: mods for p, mods in modules.items() if mods}
    deadline = float("inf")
    if args.until:
        now = dt.datetime.now(dt.UTC)
        hh, mm = map(int, args.until.split(":"))
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    started = dt.datetime.now(dt.UTC)
    notes = list(args.note)
    if not args.report_only and args.one_run:
        prepare(args.workdir, [module_path(p, m) for p, mods in modules.items() for m in mods])
        t0 = time.monotonic()
        how = run_mutmut(args.workdir, [], deadline, args.max_children, args.mutmut)
        notes.append(f"one mutmut run over every module, {args.max_children} children: mutmut {how} after "
                     f"{time.monotonic() - t0:.0f} s")
        print(notes[-1], flush=True)
    elif not args.report_only:
        prepare(args.workdir, [module_path(p, m) for p, mods in modules.items() for m in mods])
        todo = [pm for pm in ORDER if pm[1] in modules.get(pm[0], [])]
        todo += [(p, m) for p, mods in modules.items() for m in mods if (p, m) not in todo]
        for pkg, mod in todo:  # one run per module, so that a deadline leaves whole modules, the first ones first
            if time.time() > deadline:
                notes.append(f"{pkg}/{mod}: not started (deadline)")
                continue
            t0 = time.monotonic()
            how = run_mutmut(args.workdir, [f"gridready.{pkg}.{mod}.*"], deadline, args.max_children, args.mutmut)
            notes.append(f"{pkg}/{mod}: mutmut {how} after {time.monotonic() - t0:.0f} s")
            print(notes[-1], flush=True)
    text, _ = table(args.workdir, modules)
    print(text)
    if args.write:
        old = args.write.read_text() if args.write.exists() else ""
        hand = old.split(MARK, 1)[1] if MARK in old else "\n"
        how = args.command_note or (
            f"Command: `nice -n 19 {Path(sys.executable).name} benchmarks/mutation_score.py "
            f"{' '.join(argv if argv is not None else sys.argv[1:])}` (mutmut, {args.max_children} children), started "
            f"{started:%Y-%m-%d %H:%M} UTC.")
        head = ("# Mutation score\n\n" + how + " Score = killed / mutants run; `not run` = mutants the time "
                "budget did not reach.\n\n" + text + "\n\nSurvivors (and mutants no test reaches) per function; "
                "`mutmut show <name>` in the work directory prints each:\n\n"
                + survivors_by_function(args.workdir, modules) + "\n\nRun log:\n\n"
                + "\n".join(f"- {n}" for n in notes) + "\n\n")
        args.write.write_text(head + MARK + hand)
    return 0


if __name__ == "__main__":
    sys.exit(main())
