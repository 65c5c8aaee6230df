"""`setup.sh` (issue 49, day-one facts): a controller gets its Python environment; the simulated fleet's system
packages (debootstrap, systemd-container, ...) only when asked with --sandbox (or in CI). Run on a copy, with
`id`, `apt-get`, `dpkg-query` and `python3` replaced by stubs that log what they were asked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUBS = {
    "id": "echo 0",
    "dpkg-query": "exit 1",  # nothing is installed
    "apt-get": 'echo "apt-get $*" >> "$LOG"',
    "python3": ('if [ "$1" = -c ]; then exit "${PY_OLD:-0}"; fi\n'
                'if [ "$1" = -V ]; then echo "Python 3.10.12"; exit 0; fi\n'
                'mkdir -p .venv/bin && printf "#!/bin/sh\\nexit 0\\n" > .venv/bin/python && chmod +x .venv/bin/python'),
}


def _setup(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    work = tmp_path / "repo"
    (work / "sandbox").mkdir(parents=True)
    shutil.copy2(REPO / "setup.sh", work / "setup.sh")
    shutil.copy2(REPO / "pyproject.toml", work / "pyproject.toml")
    shutil.copy2(REPO / "sandbox/pyproject.toml", work / "sandbox/pyproject.toml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STUBS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    run = subprocess.run(["bash", str(work / "setup.sh"), *args], capture_output=True, text=True, timeout=60,
                         env={**base, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), **env},
                         check=False)
    return run, log.read_text()


def test_a_controller_gets_no_sandbox_packages(tmp_path: Path) -> None:
    run, apt = _setup(tmp_path)
    assert run.returncode == 0, run.stderr
    assert "install" in apt and "python3-venv" in apt
    assert "debootstrap" not in apt and "systemd-container" not in apt


@pytest.mark.parametrize(("args", "env"), [(("--sandbox",), {}), ((), {"CI": "true"})])
def test_the_sandbox_packages_when_asked_or_in_ci(tmp_path: Path, args: tuple[str, ...], env: dict[str, str]) -> None:
    run, apt = _setup(tmp_path, *args, **env)
    assert run.returncode == 0, run.stderr
    assert "debootstrap" in apt and "systemd-container" in apt and "python3-venv" in apt


def test_an_unknown_option_and_an_old_python_exit_2(tmp_path: Path) -> None:
    run, apt = _setup(tmp_path, "--sandox")
    assert run.returncode == 2 and "unknown option --sandox" in run.stderr and apt == ""
    old, _ = _setup(tmp_path / "old", PY_OLD="1")
    assert old.returncode == 2 and "needs Python >= 3.11" in old.stderr and "3.10.12" in old.stderr
