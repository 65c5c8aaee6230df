"""Start the SIMULATED Triton on a model repository of fixed-cost models (127.0.0.1, any free port), with the
system python3 as on sandbox hosts: the engine is stdlib-only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

BGE = """name: "bge"
platform: "onnxruntime_onnx"
max_batch_size: 64
input { name: "input_ids" data_type: TYPE_INT64 dims: -1 }
input { name: "attention_mask" data_type: TYPE_INT64 dims: -1 }
output { name: "last_hidden_state" data_type: TYPE_FP32 dims: [-1, 4] }
output { name: "pooled" data_type: TYPE_FP32 dims: 4 }
instance_group { count: 1 kind: KIND_GPU gpus: 0 }
"""


def write_model(repo: Path, name: str, config: str, model_file: str | None = "model.onnx") -> Path:
    d = repo / name
    (d / "1").mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(config)
    if model_file:
        (d / "1" / model_file).write_bytes(b"simulated model file")
    return d


def bge(batching: str = "", instances: str = "instance_group { count: 1 kind: KIND_GPU gpus: 0 }") -> str:
    return BGE.replace("instance_group { count: 1 kind: KIND_GPU gpus: 0 }", instances) + batching


def tokens(rows: int = 1, seq: int = 3, base: int = 1) -> dict[str, Any]:
    ids = [[base + r * 10 + t for t in range(seq)] for r in range(rows)]
    return {"inputs": [{"name": "input_ids", "shape": [rows, seq], "datatype": "INT64", "data": ids},
                       {"name": "attention_mask", "shape": [rows, seq], "datatype": "INT64",
                        "data": [[1] * seq for _ in range(rows)]}]}


def call(url: str, method: str = "GET", body: Any = None, timeout: float = 20) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw, status = r.read(), r.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()


@dataclass
class Triton:
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    def infer(self, model: str, body: Any, path: str = "") -> tuple[int, Any]:
        return call(f"{self.url}/v2/models/{model}{path}/infer", "POST", body)

    def info(self, model: str) -> dict[str, Any]:
        return call(f"{self.url}/gridready/info")[1]["fixed_cost_models"][model]

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['metrics']}/metrics", timeout=10) as r:
            text = r.read().decode()
        return {k: float(v) for k, _, v in (ln.rpartition(" ") for ln in text.splitlines() if ln[:1] not in "#")}


def command(repo: Path, port_file: Path, *args: str) -> list[str]:
    return [PYTHON, "-m", "sandbox.engine", "--mode", "triton", "--model-repository", str(repo),
            "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0", "--port-file", str(port_file), *args]


@pytest.fixture
def triton(tmp_path: Path) -> Iterator:
    started: list[subprocess.Popen[bytes]] = []

    def start(repo: Path, *args: str) -> Triton:
        pf = tmp_path / f"ports-{time.monotonic_ns()}.json"
        extra = () if "--hardware-profile" in args else ("--hardware-profile", "none")
        err = pf.with_suffix(".log")
        proc = subprocess.Popen(command(repo, pf, *args, *extra), cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=err.open("wb"))
        started.append(proc)
        deadline = time.monotonic() + 20
        while not pf.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"engine did not start: {err.read_text()}")
            time.sleep(0.02)
        return Triton(proc, json.loads(pf.read_text()))

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
