"""The wrong edits named in issue #35, each applied to a copy of the repository, and the tests that must notice.

    python benchmarks/named_mutants.py             # every mutant: killed or survived, exit 1 if any survived
    python benchmarks/named_mutants.py --before    # also run the tests as they were before #35 (the new files left
                                                   # out), to show those are what kill each mutant
    python benchmarks/named_mutants.py -k pcie     # only mutants whose id contains "pcie"

The working tree is never edited: the tree is copied (without .git) to a temporary folder, each mutant is written
into the copy, its tests run there with PYTHONPATH on the copy (so subprocesses import the mutant too), and the
original file is put back. A baseline run of every test set on the unmutated copy must pass first; a mutant is
killed when its tests then fail. The edit's original text must occur exactly once in its file, so a refactor that
moves the code makes this script fail loudly instead of testing nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CERTIFY_TESTS = ("tests/unit/certify/test_gate_boundaries.py", "tests/unit/certify/test_gates_h200x2.py",
                 "tests/unit/certify/test_gates_public.py", "tests/unit/certify/test_judge.py",
                 "tests/unit/probe/test_parsers.py")
SPEC_TESTS = ("tests/unit/test_hf_id_rule.py", "tests/unit/test_inventory_errors.py")
SERVING_TESTS = ("tests/unit/serving/test_engine_edges.py", "tests/unit/serving/test_vllm_args.py",
                 "tests/unit/serving_sglang/test_launch.py")
# The test files #35 added; --before runs each mutant's tests without them.
NEW = {"tests/unit/certify/test_gate_boundaries.py", "tests/unit/test_hf_id_rule.py",
       "tests/unit/serving/test_engine_edges.py"}


@dataclass(frozen=True)
class Mutant:
    id: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    what: str


MUTANTS = [
    Mutant("nccl-min-bytes-strict", "gridready/certify/nccl.py",
           'p["bytes"] >= ns.min_bytes and', 'p["bytes"] > ns.min_bytes and', CERTIFY_TESTS,
           "certify/nccl: bytes >= min_bytes changed to >"),
    Mutant("ecc-dram-ce-limit-dropped", "gridready/certify/memory_errors.py",
           '        if (c.get("volatile_dram_ce") or 0) > lim.dram_ce_volatile:\n'
           '            bad.append(f"DRAM correctable {c[\'volatile_dram_ce\']} > {lim.dram_ce_volatile}")\n', "",
           CERTIFY_TESTS, "memory_errors.ecc: the DRAM-correctable limit dropped"),
    Mutant("ecc-sram-ce-limit-dropped", "gridready/certify/memory_errors.py",
           '        if (c.get("aggregate_sram_ce") or 0) > lim.sram_ce_aggregate:\n'
           '            bad.append(f"aggregate SRAM correctable {c[\'aggregate_sram_ce\']} > '
           '{lim.sram_ce_aggregate}")\n', "", CERTIFY_TESTS, "memory_errors.ecc: the SRAM-correctable limit dropped"),
    Mutant("temperature-memory-dropped", "gridready/certify/thermal.py",
           "elif t > gmax or (tm is not None and tm > exp.sku.max_mem_temp_c):", "elif t > gmax:", CERTIFY_TESTS,
           "thermal.temperature: the memory-temperature check dropped"),
    Mutant("pcie-replay-limit-dropped", "gridready/certify/pcie.py",
           "        if delta > limit:", "        if False:", CERTIFY_TESTS,
           "pcie: the replay limit dropped"),
    Mutant("pcie-nic-width-dropped", "gridready/certify/pcie.py",
           ' or (e.get("width_current") or 0) < e["width_max"]:', ":", CERTIFY_TESTS,
           "pcie: the NIC width check dropped"),
    Mutant("power-tolerance-0.9", "gridready/certify/thermal.py", "lim < want * 0.99", "lim < want * 0.9",
           CERTIFY_TESTS, "thermal.power: tolerance 0.99 to 0.9"),
    Mutant("nvsmi-retired-pending-key-dropped", "gridready/probe/nvsmi.py",
           '_yes(retired.get("Pending Page Blacklist") or retired.get("Pending"))',
           '_yes(retired.get("Pending Page Blacklist"))', CERTIFY_TESTS,
           "probe/nvsmi.parse_q: the pending retired-pages key dropped"),
    Mutant("hf-id-lookahead-dropped", "gridready/spec/rules.py", r'HF_ID = re.compile(r"(?!.*(--|\.\.))',
           r'HF_ID = re.compile(r"', SPEC_TESTS, "spec/rules: the ../-- lookahead of the model id pattern dropped"),
    Mutant("vllm-nccl-ib-disable-dropped", "gridready/serving/vllm/__init__.py",
           '    elif plan.nodes_per_replica > 1:\n        env["NCCL_IB_DISABLE"] = "1"\n    env.update(weights',
           "    env.update(weights", SERVING_TESTS, "serving/vllm.node_env: NCCL_IB_DISABLE dropped"),
    Mutant("sglang-nccl-ib-disable-dropped", "gridready/serving/sglang/__init__.py",
           '    elif plan.nodes_per_replica > 1:\n        env["NCCL_IB_DISABLE"] = "1"\n', "", SERVING_TESTS,
           "serving/sglang.node_env: NCCL_IB_DISABLE dropped"),
    Mutant("vllm-min-replicas-default-1", "gridready/serving/vllm/__init__.py",
           "min_r = auto.min_replicas or tier.replicas", "min_r = auto.min_replicas or 1", SERVING_TESTS,
           "vllm.llm_config: min replicas defaulting to 1"),
    Mutant("sglang-false-extra-arg-emitted", "gridready/serving/sglang/__init__.py",
           "            if value:\n                args.append(_flag(key))\n", "            args.append(_flag(key))\n",
           SERVING_TESTS, "sglang.launch_args: a false extra argument still emitting its flag"),
    Mutant("sglang-node-rank-off-by-one", "gridready/serving/sglang/__init__.py",
           "if not 0 <= node_rank < nnodes:", "if not 0 <= node_rank <= nnodes:", SERVING_TESTS,
           "sglang: the node-rank bound off by one"),
]


def _copy_tree(dst: Path) -> None:
    shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(
        ".git", ".venv", "artifacts", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", "state"))


def _pytest(root: Path, tests: list[str], timeout: int) -> tuple[bool, str]:
    """(passed, last lines) of pytest over `tests` in `root`, one process, no xdist, stop at the first failure."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)  # a skip here is not what is measured
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", "-m", "not extended",
           *tests]
    try:
        run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    tail = [ln for ln in run.stdout.splitlines() if ln.strip()][-1:] or [run.stderr.strip()[-200:]]
    return run.returncode == 0, tail[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", default="", help="only mutants whose id contains this")
    ap.add_argument("--before", action="store_true", help="also run each mutant's tests without #35's new files")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per pytest run")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if args.k in m.id]
    with tempfile.TemporaryDirectory(prefix="named-mutants-") as tmp:
        root = Path(tmp) / "repo"
        _copy_tree(root)
        probe = subprocess.run([sys.executable, "-c", "import gridready; print(gridready.__file__)"], cwd=root,
                               env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(root)):
            print(f"the copy's gridready is not the one imported: {probe.stdout or probe.stderr}", file=sys.stderr)
            return 2
        for tests in sorted({m.tests for m in chosen}):
            ok, tail = _pytest(root, list(tests), args.timeout)
            if not ok:
                print(f"baseline fails before any mutation ({' '.join(tests)}): {tail}", file=sys.stderr)
                return 2
        rows = []
        for m in chosen:
            target = root / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                print(f"{m.id}: the edit's text occurs {original.count(m.old)} times in {m.path}", file=sys.stderr)
                return 2
            target.write_text(original.replace(m.old, m.new))
            try:
                t0 = time.monotonic()
                passed, tail = _pytest(root, list(m.tests), args.timeout)
                secs = time.monotonic() - t0
                before = None
                if args.before:
                    before = _pytest(root, [t for t in m.tests if t not in NEW], args.timeout)[0]
            finally:
                target.write_text(original)
            rows.append((m, not passed, tail, secs, before))
            print(f"{'killed  ' if not passed else 'SURVIVED'} {m.id:36s} {secs:5.1f}s  {tail}", flush=True)
    killed = sum(r[1] for r in rows)
    print(f"\n{killed} of {len(rows)} named mutants killed")
    if args.before:
        print("| mutant | issue #35 | before #35 | now |\n|---|---|---|---|")
        for m, k, _tail, _s, before in rows:
            print(f"| {m.id} | {m.what} | {'survived' if before else 'killed'} | {'killed' if k else 'SURVIVED'} |")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
