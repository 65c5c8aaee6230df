"""Survivors of a mutation run, listed and re-checked against the tests as they are now, without a new mutmut run.

    python benchmarks/survivors.py --workdir /tmp/mw setup                     # a work directory from the record
    python benchmarks/survivors.py --workdir /tmp/mw list certify/nccl --diff  # survivors of a module, with diffs
    python benchmarks/survivors.py --workdir /tmp/mw check certify/nccl -f nccl_collective \
        --tests tests/unit/certify/test_nccl_gate_values.py                   # which survivors the tests kill now

`setup` copies the repository to the work directory as benchmarks/mutation_score.py does, has mutmut write its
mutants there, and lays the recorded results (docs/examples/mutation/results-meta.tar.gz) over them, so mutant names
match the record as long as the mutated sources are unchanged (`setup` refuses otherwise). `check` copies the
working tree's tests into the work directory and runs the given tests once per survivor with MUTANT_UNDER_TEST set,
the switch mutmut's own trampolines read: killed when the tests fail. A developer's aid while writing tests; the
figures of docs/mutation.md come from full `mutmut run`s (benchmarks/mutation_device_run.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_score  # the sibling script: MODULES, prepare, module_path

REPO = mutation_score.REPO
RECORD = REPO / "docs/examples/mutation/results-meta.tar.gz"
RECORD_COMMIT = "f9a9f7d"  # the commit whose sources the recorded mutants were made from (docs/mutation.md)
OPEN = {"survived", "no tests"}


def setup(work: Path) -> None:
    changed = subprocess.run(["git", "diff", "--name-only", RECORD_COMMIT, "--", "gridready/certify", "gridready/probe",
                              "gridready/spec/rules.py", "gridready/serving"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    modules = {mutation_score.module_path(p, m) for p, ms in mutation_score.MODULES.items() for m in ms}
    if stale := sorted(modules & set(changed)):
        sys.exit(f"{stale[0]}: changed since {RECORD_COMMIT}, so its mutants no longer match the record; "
                 "measure it again with benchmarks/mutation_score.py")
    mutation_score.prepare(work, sorted(modules))
    code = ("from mutmut.utils.file_utils import copy_src_dir, copy_also_copy_files\n"
            "from mutmut.__main__ import create_mutants\n"
            "copy_src_dir(); copy_also_copy_files(); create_mutants(2)\n")  # mutmut's order: copies, then mutants
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=work, check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(RECORD) as tar:
        tar.extractall(work, filter="data")


def statuses(work: Path, path: str) -> dict[str, str]:
    """mutant name -> status, from mutmut's .meta file of one mutated source."""
    meta = json.loads((work / "mutants" / f"{path}.meta").read_text())
    return {name: mutation_score.STATUS.get(code, f"exit {code}") for name, code in meta["exit_code_by_key"].items()}


def survivors(work: Path, module: str, function: str | None) -> list[str]:
    pkg, mod = module.split("/")
    names = [n for n, s in statuses(work, mutation_score.module_path(pkg, mod)).items() if s in OPEN]
    if function:
        names = [n for n in names if n.rsplit(".", 1)[1].startswith(f"x_{function}__mutmut_")
                 or f"ǁ{function}__mutmut_" in n]
    return sorted(names, key=lambda n: (n.rsplit("_", 1)[0], int(n.rsplit("_", 1)[1])))


def show(work: Path, name: str) -> str:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([str(mutation_score.MUTMUT), "show", name], cwd=work, capture_output=True, text=True,
                         env=env)
    return out.stdout


class ForkPerMutant:
    """A pytest plugin: the tests are collected once, then run in a forked child per mutant with the mutant switched
    on (mutmut's own runner works so); a child that fails a test, or runs past TIMEOUT s, kills its mutant."""

    TIMEOUT = 60

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.killed: dict[str, bool] = {}

    def pytest_runtestloop(self, session: Any) -> bool:
        from _pytest.runner import runtestprotocol

        for name in self.names:
            pid = os.fork()
            if pid == 0:
                os.environ["MUTANT_UNDER_TEST"] = name
                signal.alarm(self.TIMEOUT)
                items = session.items
                for i, item in enumerate(items):
                    reports = runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items) else None, log=False)
                    if any(r.failed for r in reports):
                        os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            self.killed[name] = status != 0
        return True


def run_forked(work: Path, names: list[str], tests: list[str]) -> dict[str, bool]:
    """Run in the work directory's mutants/ (imported from there, not from the repository)."""
    import pytest

    os.chdir(work / "mutants")
    sys.path.insert(0, str(work / "mutants"))
    os.environ.pop("CI", None)
    plugin = ForkPerMutant(names)
    pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", "-m",
                 "not extended and not sandbox", *tests], plugins=[plugin])
    return plugin.killed


def check(work: Path, module: str, function: str | None, tests: list[str]) -> int:
    shutil.copytree(REPO / "tests", work / "mutants" / "tests", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    names = survivors(work, module, function)
    out = subprocess.run([sys.executable, __file__, "--workdir", str(work), "_forked", *tests],
                         input=json.dumps(["", *names]), capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result.pop(""):
        sys.exit(f"{' '.join(tests)}: fail without any mutant; fix them first")
    left = [n for n, k in result.items() if not k]
    for n in left:
        print(f"survives: {n}")
    print(f"{module}{'/' + function if function else ''}: {len(names) - len(left)} of {len(names)} recorded "
          f"survivors killed by {' '.join(tests)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/gridready-survivors"))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    ls = sub.add_parser("list")
    ls.add_argument("module", help="package/module, as certify/nccl")
    ls.add_argument("-f", "--function")
    ls.add_argument("--diff", action="store_true")
    ck = sub.add_parser("check")
    ck.add_argument("module")
    ck.add_argument("-f", "--function")
    ck.add_argument("--tests", nargs="+", required=True)
    fk = sub.add_parser("_forked")  # internal: mutant names on stdin, {name: killed} as the last stdout line
    fk.add_argument("tests", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "setup":
        setup(args.workdir)
        return 0
    if args.cmd == "list":
        for name in survivors(args.workdir, args.module, args.function):
            print(show(args.workdir, name) if args.diff else name)
        return 0
    if args.cmd == "_forked":
        killed = run_forked(args.workdir, json.loads(sys.stdin.read()), args.tests)
        print("\n" + json.dumps(killed))
        return 0
    return check(args.workdir, args.module, args.function, args.tests)


if __name__ == "__main__":
    sys.exit(main())
