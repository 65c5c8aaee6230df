"""Make the router's hash-pinned LiteLLM locks: one per CPython the supported OSes ship, from one input.

    python tools/router_locks.py            # every lock of gridready.spec.router.ROUTER_PYTHON
    python tools/router_locks.py --check    # exit 1 when a lock is missing or was made from another input

Each lock is `uv pip compile` of roles/gridready_router/files/litellm-requirements.in for that interpreter
(its archive's patch release, so python_full_version markers resolve as on the host) and x86_64 manylinux 2.28,
wheels only (`--only-binary :all:`: the hosts install offline with pip --require-hashes, nothing is built there),
every file with its sha256 (`--generate-hashes`). The versions of an existing lock are kept (passed as
constraints, `--upgrade` drops them), its hashes never: uv carries the hashes of the output file it updates over to
the new one, so a lock seeded from another Python's would list wheels that do not install on this one.
Needs uv (https://docs.astral.sh/uv/reference/cli/#uv-pip-compile) on PATH or as `python -m uv`.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gridready.spec.router import ROUTER_PYTHON  # noqa: E402

FILES = ROOT / "roles" / "gridready_router" / "files"
INPUT = FILES / "litellm-requirements.in"
PLATFORM = "x86_64-manylinux_2_28"  # glibc 2.28 or newer: Ubuntu 22.04 has 2.35, Debian 12 has 2.36
INDEX = "https://pypi.org/simple"
INPUT_MARK = "# input sha256: "
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*==[^\s\\;]+)", re.MULTILINE)


def lock_path(minor: str) -> Path:
    return FILES / f"litellm-requirements-py{minor}.txt"


def input_digest() -> str:
    return hashlib.sha256(INPUT.read_bytes()).hexdigest()


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def compile_lock(full: str, upgrade: bool = False) -> Path:
    minor = ".".join(full.split(".")[:2])
    out = lock_path(minor)
    pins = "" if upgrade or not out.exists() else "\n".join(PIN.findall(out.read_text()))
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write(pins + "\n")
        constraints.flush()
        out.unlink(missing_ok=True)
        subprocess.run([*_uv(), "pip", "compile", str(INPUT.relative_to(ROOT)),
                        "--output-file", str(out.relative_to(ROOT)), "--constraint", constraints.name,
                        "--python-version", full, "--python-platform", PLATFORM, "--only-binary", ":all:",
                        "--generate-hashes", "--index-url", INDEX, "--quiet", "--no-annotate",
                        "--custom-compile-command", "python tools/router_locks.py"], check=True, cwd=ROOT)
    body = out.read_text()
    header = (f"# LiteLLM's proxy for CPython {full} (x86_64 manylinux_2_28), every wheel pinned by its sha256.\n"
              f"{INPUT_MARK}{input_digest()}\n")
    kept = [line for line in body.splitlines(keepends=True)
            if not line.startswith(INPUT_MARK) and not line.startswith("# LiteLLM's proxy for")]
    out.write_text(header + "".join(kept))
    return out


def stale() -> list[str]:
    problems = []
    for full in ROUTER_PYTHON.values():
        path = lock_path(".".join(full.split(".")[:2]))
        if not path.exists():
            problems.append(f"{path.relative_to(ROOT)}: missing")
        elif f"{INPUT_MARK}{input_digest()}" not in path.read_text():
            problems.append(f"{path.relative_to(ROOT)}: made from another {INPUT.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether every lock is current")
    parser.add_argument("--upgrade", action="store_true", help="resolve anew, not keeping the locks' versions")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    for full in sorted(set(ROUTER_PYTHON.values())):
        print(compile_lock(full, args.upgrade).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
