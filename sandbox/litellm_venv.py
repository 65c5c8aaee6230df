"""LiteLLM's proxy in a venv on the controller, from the same hash-pinned lock the gridready_router role ships.

Used by the router tests and benchmarks to run the real router on loopback in front of simulated engines. The
wheels are downloaded once (`pip download --require-hashes`) into the wheelhouse the role also packs for the hosts;
the venv is cached per lock digest. Measured on the shared 2-core controller: 118 wheels, 170 MB of wheels, a
746 MB venv, several minutes to install (docs/layer3.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sandbox import paths

PYTHON = "3.11"  # the controller's CPython; the role picks the lock of the host's python3 the same way
LOCK = paths.repo_root() / "roles" / "gridready_router" / "files" / f"litellm-requirements-py{PYTHON}.txt"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64", "any")


def lock_version(lock: Path = LOCK) -> str:
    for line in lock.read_text().splitlines():
        if line.startswith("litellm=="):
            return line.split("==", 1)[1].split()[0]
    raise ValueError(f"{lock}: no litellm== line")


def wheelhouse(lock: Path = LOCK) -> Path:
    """The controller's wheelhouse of the lock, under the role's gridready_router_wheelhouse default (the role keys
    its own copy by the lock's digest as well)."""
    py = PYTHON.replace(".", "")
    home = Path(os.environ.get("HOME", "/root"))
    return home / ".cache/gridready/wheelhouse" / f"litellm-{lock_version(lock)}-cp{py}"


def download(lock: Path = LOCK) -> Path:
    dest = wheelhouse(lock)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--require-hashes", "--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp",
           *[arg for plat in PLATFORMS for arg in ("--platform", plat)],
           "--dest", str(dest), "--requirement", str(lock)]
    subprocess.run(cmd, check=True)
    return dest


def ensure_venv(lock: Path = LOCK) -> Path:
    """The `litellm` executable of a venv built from the lock (built once per lock digest)."""
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:12]
    root = paths.cache_dir() / "litellm" / digest
    exe, done = root / "venv" / "bin" / "litellm", root / ".complete"
    if done.exists():
        return exe
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".build.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a concurrent build waits here
        if done.exists():
            return exe
        wheels = download(lock)
        shutil.rmtree(root, ignore_errors=True)  # a venv is not relocatable: built in place, marked when complete
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        subprocess.run([str(root / "venv/bin/pip"), "install", "--quiet", "--disable-pip-version-check",
                        "--no-index", "--find-links", str(wheels), "--require-hashes", "--no-compile",
                        "--requirement", str(lock)], check=True)
        done.write_text(f"litellm {lock_version(lock)}\n")
    return exe
