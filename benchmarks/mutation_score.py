"""Mutation score of every module of certify, probe, spec and serving (and ledger, evidence), per package, with
mutmut (dev extra). docs/mutation.md says how to run it; in short:

    python benchmarks/mutation_score.py --list                                  # modules and their test selection
    nice -n 10 python benchmarks/mutation_score.py --modules certify/xid --max-children 1 --until 22:40  # 2 cores
    python3 benchmarks/mutation_score.py --shard 1/4 --jobs 4 --max-children 4 --mutmut /tmp/site/bin/mutmut \
        --until 20:40     # one of four 9-minute commands on a 16-CPU lent machine (benchmarks/mutation_device_run.sh)
    python benchmarks/mutation_score.py --workdir /tmp/mut-all --report-only --write docs/mutation.md

Not a CI gate: a command to run before a change is done. The repository is copied to a folder per run under
--workdir (part-<shard or modules>-j<jobs>-<i>; never the working tree; a second command with the same parts reuses
the copy and mutmut's results, and a changed source file is mutated again); mutmut mutates the part's modules there
and runs, for each mutant, the tests of the part's selection that reached the mutated function (mutmut's per-function
test selection). Runs stop at --until (UTC): figures are of the mutants run by then, and say how many were not run.

Score = killed / all mutants generated (killed / (killed + survived + no tests + timeout + suspicious + not run)):
a mutant no test reaches or the time did not reach counts against it. Goal (issue 48): 90% in each package.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import functools
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")  # else --mutmut (pip --target puts it in <target>/bin)
# The packages whose every module is measured (issue 48), subpackages included; "core" holds the two top-level
# modules the gates write through. A module is named by its path under the package without ".py", a package's
# __init__ by its folder (serving/vllm, serving/triton, serving/triton/plan).
PACKAGES = ("certify", "probe", "spec", "serving")
CORE = ("ledger", "evidence")
GOAL = {"certify": 90, "probe": 90, "spec": 90, "serving": 90, "core": 90}


def discover() -> dict[str, list[str]]:
    """Every module of PACKAGES (recursive) and CORE, in path order."""
    found: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        root = REPO / "gridready" / pkg
        mods = []
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root).with_suffix("")
            if rel.parts == ("__init__",):
                continue  # the package's own __init__ (re-exports only; mutmut finds nothing there)
            mods.append("/".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
        found[pkg] = mods
    found["core"] = list(CORE)
    return found


MODULES = discover()


def module_path(pkg: str, mod: str) -> str:
    if pkg == "core":
        return f"gridready/{mod}.py"
    plain = f"gridready/{pkg}/{mod}.py"
    return plain if (REPO / plain).exists() else f"gridready/{pkg}/{mod}/__init__.py"


def dotted(pkg: str, mod: str) -> str:
    return module_path(pkg, mod).removesuffix(".py").removesuffix("/__init__").replace("/", ".")


# Tests that reach every module of a package (the value tests and fixtures named per gate, parser and builder),
# on top of those found per module by imports (tests_for). tests/unit/fabric is the home of certify/hca, probe/hca,
# certify/quarantine, multinode, isolation and fabric's tests.
BASE_TESTS = {
    "certify": ["tests/unit/certify", "tests/unit/fabric"],
    "probe": ["tests/unit/probe", "tests/unit/fabric"],
    "spec": ["tests/unit/spec", "tests/unit/test_hf_id_rule.py", "tests/unit/test_inventory_errors.py"],
    "serving": ["tests/unit/serving", "tests/unit/serving_sglang", "tests/unit/serving_triton"],
    "core": ["tests/unit/core"],
}
# Whole files left out: they start processes (the CLI, invoke, a simulated tool, ansible), and a process of its own
# imports gridready without mutmut's trampolines, or from the shared checkout, so under mutmut they fail or pass
# whatever the mutant (tests_for leaves out every file matching STARTS_PROCESSES, except KEEP_PROCESSES: files whose
# processes never import gridready, with the one test that does deselected below). The gates they reach have value
# tests in the files kept.
STARTS_PROCESSES = re.compile(r"\bsubprocess\b|\bPopen\b|sys\.executable|\bpexpect\b|ansible_runner")
KEEP_PROCESSES = {"tests/unit/test_inventory_errors.py", "tests/unit/certify/test_dcgm_precision.py"}
SKIP_FILES = {
    "tests/unit/certify/test_shapes.py": "runs the simulated probe in a subprocess of the shared checkout",
    "tests/unit/certify/test_simulated.py": "runs the simulated probe in a subprocess of the shared checkout",
}
DESELECT = ["tests/unit/certify/test_dcgm_precision.py::test_the_report_says_which_precision_ran",
            # runs `invoke` in a subprocess from a temporary inventory, where mutmut's import hook finds no source
            "tests/unit/test_inventory_errors.py::test_invoke_exits_2_before_anything_runs"]


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """The gridready modules a file imports (`from gridready.x import y` counts both gridready.x and gridready.x.y)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, UnicodeDecodeError):
        return frozenset()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("gridready"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gridready"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(out)


ONE_STEP = ("certify", "probe")  # spec and serving modules are imported everywhere: their direct importers only


def tests_for(pkg: str, mod: str) -> list[str]:
    """The test selection of one module: its package's BASE_TESTS and every unit test file that imports it, or
    imports a module of its own package that imports it (one step: a gate reached through certify.judge)."""
    name = dotted(pkg, mod)
    users = {name}
    for f in (REPO / "gridready" / pkg).rglob("*.py") if pkg in ONE_STEP else ():
        rel = f.relative_to(REPO).with_suffix("")
        user = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name in _imports(f):
            users.add(user)
    found: set[str] = set()
    for base in BASE_TESTS[pkg]:
        found |= {str(t.relative_to(REPO)) for t in sorted((REPO / base).rglob("test_*.py"))} if (
            REPO / base).is_dir() else {base}
    for t in (REPO / "tests/unit").rglob("test_*.py"):
        if _imports(t) & users:
            found.add(str(t.relative_to(REPO)))
    return sorted(t for t in found if t not in SKIP_FILES and not _starts_processes(t))


@functools.cache
def _starts_processes(test: str) -> bool:
    return test not in KEEP_PROCESSES and bool(STARTS_PROCESSES.search((REPO / test).read_text()))


def left_out(tests: list[str]) -> list[str]:
    """Test files of a selection's folders that tests_for leaves out (starting processes, or SKIP_FILES)."""
    return sorted(t for t in tests if t in SKIP_FILES or _starts_processes(t))


STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", None: "not run", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", 37: "killed"}
# At any depth: caches. The repository's own outputs (artifacts/, build/, state/, mutants/) only at the top (TOP):
# a pattern here matches files too, and `state` dropped the `ports/1/state` files of the sysfs fixtures
# (tests/fixtures/public/sysfs-infiniband/...), so every HCA port read as unreadable in the copy.
IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")
TOP = (".git", ".venv", "mutants", "artifacts", "build", "state", ".whl", ".devcarry", ".devrun-mut")


def copied_beside(paths: list[str]) -> list[str]:
    """mutmut's also_copy: the repository's top level, with the mutated files left out. mutmut copies also_copy over
    its mutants folder on every run; a mutated file copied over reads as not yet mutated, so mutmut would generate its
    mutants again and keep a result only where its hash of the function matches (it differs between Python 3.11 and
    3.12: results carried between machines were all reset). So the folders that hold a mutated file are listed file
    by file, and every other folder whole."""
    mutated = {Path(p) for p in paths}
    holders = {parent for p in mutated for parent in p.parents if parent != Path(".")}

    def walk(folder: Path) -> list[str]:
        out: list[str] = []
        for item in sorted(folder.iterdir()):
            rel = item.relative_to(REPO)
            top = folder == REPO and item.name in (*TOP, "pyproject.toml")
            if top or item.name.startswith(".") or item.name == "__pycache__" or rel in mutated:
                continue
            out += walk(item) if rel in holders else [str(rel)]
        return out

    return walk(REPO)


def prepare(work: Path, paths: list[str], tests: list[str] | None = None) -> None:
    """The repository at `work` (refreshed from the working tree), with mutmut's configuration appended: `paths`
    mutated, `tests` (default: the selection of every module of `paths`) run."""
    work.mkdir(parents=True, exist_ok=True)
    for item in REPO.iterdir():
        if item.name in TOP:
            continue
        dst = work / item.name
        if item.is_dir():
            shutil.copytree(item, dst, ignore=IGNORE, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dst)
    if tests is None:
        by_path = {module_path(p, m): (p, m) for p, ms in MODULES.items() for m in ms}
        tests = sorted({t for path in paths for t in tests_for(*by_path[path])})
    also = copied_beside(paths)
    deselect = [*DESELECT, *(f"--ignore={f}" for f in SKIP_FILES)]
    cfg = "\n".join([
        "", "[tool.mutmut]",
        f"source_paths = {json.dumps(paths)}",  # mutmut 3.8 name (paths_to_mutate is deprecated)
        f"also_copy = {json.dumps(also)}",
        "pytest_add_cli_args = " + json.dumps(["-n", "0", "-p", "no:cacheprovider", "-q", "-m",
                                               "not extended and not sandbox",
                                               *(a for t in deselect for a in (
                                                   (t,) if t.startswith("--") else ("--deselect", t)))]),
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}", ""])
    (work / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text() + cfg)


def shards(modules: dict[str, list[str]], n: int) -> list[list[tuple[str, str]]]:
    """The modules in n parts of about equal size (source lines, largest first to the smallest part): the same
    parts on every machine for the same sources."""
    sized = sorted(((len((REPO / module_path(p, m)).read_text().splitlines()), p, m)
                    for p, ms in modules.items() for m in ms), key=lambda x: (-x[0], x[1], x[2]))
    parts: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    load = [0] * n
    for lines, p, m in sized:
        i = load.index(min(load))
        parts[i].append((p, m))
        load[i] += lines
    return parts


def mutmut_env() -> dict[str, str]:
    """The environment of every `mutmut run`: no bytecode written into the part folders, CI unset."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)
    return env


def run_mutmut(work: Path, globs: list[str], deadline: float, max_children: int, mutmut: Path = MUTMUT) -> str:
    """One `mutmut run` over `globs` (every mutant when empty); interrupted at the deadline (mutmut keeps the results
    it has)."""
    log = (work / "mutation-run.log").open("a")
    proc = subprocess.Popen([str(mutmut), "run", "--max-children", str(max_children), *globs], cwd=work,
                            env=mutmut_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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


def meta_files(work: Path, path: str) -> list[Path]:
    """mutmut's results of one module: in the work directory itself (a record unpacked there) or in one of its
    parts (part-*: a shard or job of --shard/--jobs), newest first."""
    found = [m for m in [work / "mutants" / f"{path}.meta", *work.glob(f"*/mutants/{path}.meta")] if m.exists()]
    return sorted(found, key=lambda m: m.stat().st_mtime, reverse=True)


def codes_of(work: Path, path: str) -> dict[str, int | None]:
    metas = meta_files(work, path)
    return json.loads(metas[0].read_text())["exit_code_by_key"] if metas else {}


def merge(out: Path, sources: list[Path]) -> int:
    """The per-mutant results of several work folders of one commit (a run resumed on another machine, parts run on
    different machines) as one folder for --report-only, out/run/mutants: per mutant, the first decided result in
    `sources` order wins, with its duration. Returns how many modules had results."""
    shutil.rmtree(out / "run", ignore_errors=True)
    written = 0
    for pkg, mods in MODULES.items():
        for mod in mods:
            path = module_path(pkg, mod)
            merged: dict | None = None
            for meta in (m for src in sources for m in meta_files(src, path)):
                found = json.loads(meta.read_text())
                if merged is None:
                    merged = found
                    continue
                for key, code in found["exit_code_by_key"].items():
                    if merged["exit_code_by_key"].get(key) is None and code is not None:
                        merged["exit_code_by_key"][key] = code
                        if key in found.get("durations_by_key", {}):
                            merged.setdefault("durations_by_key", {})[key] = found["durations_by_key"][key]
            if merged is not None:
                dst = out / "run" / "mutants" / f"{path}.meta"
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(json.dumps(merged))
                written += 1
    return written


def _settled(f: Path) -> bytes:
    """A file of a work folder as it is between two writes: a running mutmut rewrites its JSON files in place."""
    for _ in range(50):
        data = f.read_bytes()
        try:
            if f.suffix in (".meta", ".json"):
                json.loads(data)
            return data
        except ValueError:
            time.sleep(0.1)
    raise ValueError(f"{f}: not complete JSON after 5 s")


def pack(work: Path, dest: Path) -> list[str]:
    """What a resumed run needs of `work`, small enough to carry (STATE= of mutation_device_run.sh): per part, the
    mutated modules (the mutants' source, `.meta` results, `.spans`) and mutmut-stats.json, without the copies of
    the rest of the tree. Unpacked into the same --workdir (`tar -xzmf`: newer than the sources), the same command
    line goes on with the mutants not run yet."""
    names = sorted(str(f.relative_to(work)) for meta in work.glob("part-*/mutants/gridready/**/*.py.meta")
                   for f in (meta.with_suffix(""), meta, meta.with_suffix(".spans")) if f.exists())
    names += sorted(str(f.relative_to(work)) for f in work.glob("part-*/mutants/mutmut-stats.json"))
    with tarfile.open(dest, "w:gz") as tar:
        for name in names:
            data = _settled(work / name)
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return names


def figures(work: Path, path: str) -> Counter[str]:
    return Counter(STATUS.get(code, "suspicious") for code in codes_of(work, path).values())


def score(c: Counter[str]) -> float | None:
    """killed / all generated: `not run` counts against it (a budget that ran out measured nothing there)."""
    generated = sum(v for k, v in c.items() if k != "skipped")
    return 100 * c["killed"] / generated if generated else None


def survivors(work: Path, path: str) -> list[str]:
    return sorted(k for k, v in codes_of(work, path).items()
                  if STATUS.get(v, "suspicious") not in ("killed", "not run", "skipped"))


EXPLAINED = REPO / "docs/examples/mutation/explained"
# A mutant named in an explanation: `x_f__mutmut_3`, `f__mutmut_3`, the dotted full name, `xǁClassǁmethod__mutmut_3`,
# and lists of numbers after one name (`f__mutmut_3/5/9`, `f__mutmut_3, 5`).
NAMED = re.compile(r"(\w+?)__mutmut_(\d+(?:\s*[/,]\s*\d+)*)")


def plain_name(mutant: str) -> str:
    """`gridready.certify.judge.x_judge_node__mutmut_53` -> `judge_node__mutmut_53` (class methods keep `xǁ`)."""
    return mutant.rsplit(".", 1)[-1].removeprefix("x_")


KILLED_NOTE = re.compile(r"\W*killed\b", re.IGNORECASE)


def explaining(text: str) -> str:
    """An explanation file without its notes of mutants killed (a section or a paragraph whose first word is
    "Killed"): a mutant named only there is not explained."""
    kept: list[str] = []
    section = paragraph = False
    before = ""  # the line above, as written
    for line in text.splitlines():
        words = line.strip()
        if not words:
            paragraph = False
        elif words.startswith("#"):
            section, paragraph = bool(KILLED_NOTE.match(words.lstrip("#"))), False
        elif not before or before.startswith("#"):
            paragraph = bool(KILLED_NOTE.match(words))
        kept.append("" if section or paragraph else line)
        before = words
    return "\n".join(kept)


def explained_names(text: str) -> set[str]:
    out: set[str] = set()
    for m in NAMED.finditer(explaining(text)):
        base = m.group(1).removeprefix("x_")
        out |= {f"{base}__mutmut_{n}" for n in re.split(r"\s*[/,]\s*", m.group(2))}
    return out


def explanation_file(pkg: str, mod: str) -> Path:
    return EXPLAINED / f"{pkg}_{mod.replace('/', '_')}.md"


def unexplained(work: Path, modules: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per module, the mutants run and not killed that its explanation file never names."""
    out: dict[str, list[str]] = {}
    for pkg, mods in modules.items():
        for mod in mods:
            f = explanation_file(pkg, mod)
            named = explained_names(f.read_text()) if f.exists() else set()
            missing = [n for n in survivors(work, module_path(pkg, mod)) if plain_name(n) not in named]
            if missing:
                out[f"{pkg}/{mod}"] = missing
    return out


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
    missing: list[str] = []
    for pkg, mods in modules.items():
        total: Counter[str] = Counter()
        for mod in mods:
            c = figures(work, module_path(pkg, mod))
            if not c:
                missing.append(f"{pkg}/{mod}")
                continue
            total += c
            s = score(c)
            pct = f"{s:.1f}%" if s is not None else "-"
            rows.append(f"| {pkg} | {mod} | {sum(c.values())} | {c['killed']} | {c['survived']} | {c['no tests']} | "
                        f"{c['timeout'] + c['suspicious']} | {c['not run']} | {pct} |")
        per_pkg[pkg] = total
    head = ["| package | mutants | run | killed | score | goal |", "|---|---|---|---|---|---|"]
    for pkg, c in per_pkg.items():
        s = score(c)
        run = sum(v for k, v in c.items() if k not in ("not run", "skipped"))
        head.append(f"| {pkg} | {sum(c.values())} | {run} | {c['killed']} | "
                    f"{f'{s:.1f}%' if s is not None else 'not run'} | {GOAL[pkg]}% |")
    tail = (f"\n\nNo results (not run, or no mutant in them): {', '.join(missing)}" if missing else "")
    return "\n".join(head) + "\n\n" + "\n".join(rows) + tail, per_pkg


MARK = "<!-- written by benchmarks/mutation_score.py above this line; by hand below -->"


def commit_of() -> str:
    """The commit measured (GRIDREADY_COMMIT where the copy has no .git, as on a lent machine), `+dirty` when the
    measured sources or tests differ from it."""
    if os.environ.get("GRIDREADY_COMMIT"):
        return os.environ["GRIDREADY_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "gridready", "tests"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def jobs_of(modules: dict[str, list[str]], n: int) -> list[list[tuple[str, str]]]:
    """The modules cut into n runs of about equal size, in package order, so that a run holds few packages and its
    test selection (the union of its modules') stays small."""
    flat = [(p, m, len((REPO / module_path(p, m)).read_text().splitlines())) for p, ms in modules.items() for m in ms]
    total = sum(lines for _, _, lines in flat) or 1
    parts: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    done = 0
    for p, m, lines in flat:
        parts[min(n - 1, int(n * (done + lines / 2) / total))].append((p, m))
        done += lines
    return parts


def run_parts(work: Path, parts: list[list[tuple[str, str]]], tag: str, deadline: float, children: int,
              mutmut: Path) -> list[str]:
    """One `mutmut run` per part, all at once, each in its own folder work/part-<tag>-<i> with its own test
    selection (resumable: a second command with the same parts goes on with the mutants not run yet)."""
    procs = []
    for i, part in enumerate(parts, 1):
        if not part:
            continue
        sub = work / f"part-{tag}-{i}"
        prepare(sub, [module_path(p, m) for p, m in part])
        log = (sub / "mutation-run.log").open("a")
        procs.append((sub, part, time.monotonic(), subprocess.Popen(
            [str(mutmut), "run", "--max-children", str(children)], cwd=sub, env=mutmut_env(), stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)))
    notes = []
    while procs:
        for item in list(procs):
            sub, part, t0, proc = item
            if proc.poll() is None and time.time() <= deadline:
                continue
            how = f"exit {proc.returncode}" if proc.poll() is not None else "stopped at the deadline"
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)  # mutmut keeps the results it has
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            mods = " ".join(f"{p}/{m}" for p, m in part)
            notes.append(f"{sub.name} ({mods}): mutmut {how} after {time.monotonic() - t0:.0f} s, {children} children")
            print(notes[-1], flush=True)
            procs.remove(item)
        time.sleep(2)
    return notes


def timed_out(part: Path) -> list[str]:
    """The mutants of one part folder whose result is a timeout."""
    return sorted(name for meta in part.glob("mutants/gridready/**/*.py.meta")
                  for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()
                  if STATUS.get(code) == "timeout")


def rerun_timeouts(work: Path, deadline: float, mutmut: Path) -> list[str]:
    """Each part's timeouts run once more, alone (one child). mutmut 3.8's timeout thread (workers/timeout.py) never
    cancels a deadline: when a finished child's process number is reused by a later child, that child gets the old
    deadline's SIGXCPU and reads as a timeout within seconds (2026-12-07: spec/rules field_patterns 44 and
    serving/topology read_certification 36, killed when run alone). A mutant that loops times out again."""
    notes = []
    for part in sorted(work.glob("part-*")):
        names = timed_out(part)
        if not names or time.time() > deadline:
            continue
        with (part / "mutation-run.log").open("a") as log:
            subprocess.run([str(mutmut), "run", "--max-children", "1", *names], cwd=part, env=mutmut_env(),
                           stdout=log, stderr=subprocess.STDOUT, check=False)
        still = set(timed_out(part))
        notes.append(f"{part.name}: {len(names)} timeout(s) run again alone, {len(still)} timed out again"
                     + (f" ({', '.join(plain_name(n) for n in names if n in still)})" if still else ""))
        print(notes[-1], flush=True)
    return notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/gridready-mutation"))
    ap.add_argument("--until", help="UTC HH:MM after which no mutant runs (default: no limit)")
    ap.add_argument("--packages", nargs="*", default=list(MODULES), choices=list(MODULES))
    ap.add_argument("--modules", nargs="*", help="only these modules, as package/module (certify/pcie, serving/triton/"
                                                 "plan)")
    ap.add_argument("--shard", help="K/N: only the K-th of N parts of about equal size (one command each)")
    ap.add_argument("--jobs", type=int, default=1, help="run the modules as this many mutmut runs at once")
    ap.add_argument("--max-children", type=int, default=2, help="mutmut's children per job")
    ap.add_argument("--mutmut", type=Path, default=MUTMUT, help="the mutmut script (default: beside the interpreter)")
    ap.add_argument("--one-run", action="store_true", help="kept for old command lines: every job is one run")
    ap.add_argument("--list", action="store_true", help="print the modules (of --shard) with their tests; run nothing")
    ap.add_argument("--command-note", help="--write: the sentence that says how and where the figures were made")
    ap.add_argument("--note", action="append", default=[], help="--write: a line of the run log (repeatable)")
    ap.add_argument("--report-only", action="store_true", help="figures of the mutants already run in --workdir")
    ap.add_argument("--write", type=Path, help="write the figures into this markdown file (docs/mutation.md)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="SRC",
                    help="merge these work folders' results (the first decided result per mutant wins) into --workdir "
                         "and report them; runs nothing")
    ap.add_argument("--pack", type=Path, metavar="TAR_GZ",
                    help="write --workdir's results and mutated modules, to carry and resume elsewhere; runs nothing")
    ap.add_argument("--unexplained", action="store_true",
                    help="run nothing: list the survivors of --workdir that docs/examples/mutation/explained "
                         "never names; exit 1 if any")
    args = ap.parse_args(argv)
    modules = {p: MODULES[p] for p in args.packages}
    if args.modules:
        wanted = {tuple(m.split("/", 1)) for m in args.modules}
        unknown = wanted - {(p, m) for p, ms in MODULES.items() for m in ms}
        if unknown:
            ap.error(f"--modules: no such module {', '.join(sorted('/'.join(u) for u in unknown))}")
        modules = {p: [m for m in mods if (p, m) in wanted] for p, mods in modules.items()}
        modules = {p: mods for p, mods in modules.items() if mods}
    tag = "all"
    if args.shard:
        k, n = map(int, args.shard.split("/"))
        if not 1 <= k <= n:
            ap.error(f"--shard {args.shard}: K must be 1 to N")
        mine = set(shards(modules, n)[k - 1])
        modules = {p: [m for m in mods if (p, m) in mine] for p, mods in modules.items()}
        modules = {p: mods for p, mods in modules.items() if mods}
        tag = f"{k}of{n}"
    if args.list:
        for p, mods in modules.items():
            for m in mods:
                print(f"{p}/{m}: {' '.join(tests_for(p, m))}")
        return 0
    for folder in [*(args.merge or []), *([args.workdir] if args.pack else [])]:
        if not folder.is_dir():
            ap.error(f"{folder}: no such work folder")
    if args.pack:
        try:
            print(f"{args.pack}: {len(pack(args.workdir, args.pack))} files of {args.workdir}")
        except ValueError as e:  # a result file mutmut never finished writing: nothing is packed
            args.pack.unlink(missing_ok=True)
            ap.error(str(e))
        return 0
    if args.merge:
        print(f"{merge(args.workdir, args.merge)} modules merged from {len(args.merge)} folders into {args.workdir}")
        args.report_only = True
    if args.unexplained:
        missing = unexplained(args.workdir, modules)
        for where, names in missing.items():
            print(f"{where} ({explanation_file(*where.split('/', 1)).name}): {' '.join(map(plain_name, names))}")
        print(f"{sum(map(len, missing.values()))} survivor(s) not named in {EXPLAINED.relative_to(REPO)}")
        return 1 if missing else 0
    deadline = float("inf")
    if args.until:
        now = dt.datetime.now(dt.UTC)
        hh, mm = map(int, args.until.split(":"))
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    started = dt.datetime.now(dt.UTC)
    notes = list(args.note)
    if not args.report_only:
        parts = jobs_of(modules, args.jobs)
        if args.modules and args.jobs == 1:
            tag = "-".join(f"{p}.{m}".replace("/", ".") for p, ms in modules.items() for m in ms)[:80]
        notes += run_parts(args.workdir, parts, f"{tag}-j{args.jobs}", deadline, args.max_children, args.mutmut)
        notes += rerun_timeouts(args.workdir, deadline, args.mutmut)
    text, _ = table(args.workdir, modules)
    print(text)
    if args.write:
        old = args.write.read_text() if args.write.exists() else ""
        hand = old.split(MARK, 1)[1] if MARK in old else "\n"
        how = args.command_note or (
            f"Commit {commit_of()}. Command: `nice -n 19 {Path(sys.executable).name} benchmarks/mutation_score.py "
            f"{' '.join(argv if argv is not None else sys.argv[1:])}` (mutmut, {args.jobs} job(s) of "
            f"{args.max_children} children), started {started:%Y-%m-%d %H:%M} UTC.")
        head = ("# Mutation score\n\n" + how + " Score = killed / all mutants generated; `not run` = mutants the "
                "time budget did not reach (they count against the score).\n\n" + text
                + "\n\nSurvivors (and mutants no test reaches) per function; `mutmut show <name>` in the module's "
                "part folder prints each:\n\n" + survivors_by_function(args.workdir, modules) + "\n\nRun log:\n\n"
                + "\n".join(f"- {n}" for n in notes) + "\n\n")
        args.write.write_text(head + MARK + hand)
    return 0


if __name__ == "__main__":
    sys.exit(main())
