"""Start the simulated engine as a subprocess on 127.0.0.1 (any free port) for the bench tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@dataclass
class RunningEngine:
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_engine(tmp: Path, *args: str, python: str = sys.executable, module: str = "sandbox.engine",
                 cwd: Path = REPO, env: dict[str, str] | None = None, wait: bool = True) -> RunningEngine:
    pf = tmp / f"ports-{time.monotonic_ns()}.json"
    err = pf.with_suffix(".log")
    cmd = [python, "-m", module, "--host", "127.0.0.1", "--port", "0", "--port-file", str(pf), *args]
    if "--hardware-profile" not in args:  # known timing: never scaled by a simulated host profile
        cmd += ["--hardware-profile", "none"]
    if "--mode" in args and "triton" in args and "--metrics-port" not in args and "--openai-port" not in args:
        cmd += ["--metrics-port", "0"]
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err.open("wb"), env=env)
    deadline = time.monotonic() + 20
    while wait and not pf.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"engine did not start: {err.read_text()}")
        time.sleep(0.02)
    ports = json.loads(pf.read_text()) if wait else {}
    return RunningEngine(proc, ports, err)


def triton_repository(tmp: Path, *names: str) -> str:
    """A model repository with one directory (config.pbtxt) per name: what the simulated Triton serves."""
    repo = tmp / f"repo-{time.monotonic_ns()}"
    for name in names:
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "ensemble"\n')
    return str(repo)


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator:
    started: list[RunningEngine] = []

    def make(*args: str, **kw: object) -> RunningEngine:
        e = start_engine(tmp_path, *args, **kw)  # type: ignore[arg-type]
        started.append(e)
        return e

    yield make
    for e in started:
        e.stop()
