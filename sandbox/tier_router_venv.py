"""vllm-router (the tier router) in a venv on the controller, from the same hash-pinned lock the gridready_router
role ships (roles/gridready_router/files/tier-router-requirements.txt): wheels downloaded once with
`pip download --require-hashes`, the venv built offline from them and cached per lock digest (as litellm_venv)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sandbox import paths
from sandbox.litellm_venv import PLATFORMS, PYTHON

LOCK = paths.repo_root() / "roles" / "gridready_router" / "files" / "tier-router-requirements.txt"


def ensure_venv(lock: Path = LOCK) -> Path:
    """The venv's bin folder (vllm-router in it), built once per lock digest."""
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:12]
    root = paths.cache_dir() / "tier-router" / digest
    done = root / ".complete"
    if done.exists():
        return root / "venv" / "bin"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".build.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a concurrent build waits here
        if done.exists():
            return root / "venv" / "bin"
        home = Path(os.environ.get("HOME", "/root"))
        wheels = home / ".cache/gridready/wheelhouse" / f"vllm-router-cp{PYTHON.replace('.', '')}-{digest}"
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--require-hashes", "--only-binary=:all:", "--python-version", PYTHON,
                        "--implementation", "cp", *[a for plat in PLATFORMS for a in ("--platform", plat)],
                        "--dest", str(wheels), "--requirement", str(lock)], check=True)
        shutil.rmtree(root / "venv", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        subprocess.run([str(root / "venv/bin/pip"), "install", "--quiet", "--disable-pip-version-check",
                        "--no-index", "--find-links", str(wheels), "--require-hashes", "--no-compile",
                        "--requirement", str(lock)], check=True)
        done.write_text("vllm-router\n")
    return root / "venv" / "bin"
