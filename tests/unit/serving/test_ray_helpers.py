"""The Ray helper scripts of roles/gridready_ray_node (run on the hosts): the GPU wait and the head link."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

FILES = Path(__file__).resolve().parents[3] / "roles" / "gridready_ray_node" / "files"
STATUS = """======== Autoscaler status: 2026-11-30 03:44:20.897511 ========
Node status
---------------------------------------------------------------
Active:
 1 node_5f5e9e51d35d245d9ac3bf676f2da5858f94c5b84143c230c75ea3c8
 1 node_331b71335ee4a85310b4edc19cf5e13e0b2c0ca6a10f69a4c6eafda6
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/2.0 CPU
 0.0/16.0 GPU
 0B/5.59GiB memory
"""


def _load(name: str) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(FILES / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _fake_ray(tmp_path: Path, text: str, rc: int = 0) -> Path:
    (tmp_path / "status.txt").write_text(text)
    ray = tmp_path / "ray"
    ray.write_text(f"#!/bin/sh\ncat {tmp_path / 'status.txt'}\nexit {rc}\n")
    ray.chmod(ray.stat().st_mode | stat.S_IEXEC)
    return ray


def test_wait_gpus_reads_ray_status(tmp_path: Path) -> None:
    mod = _load("gridready-ray-wait-gpus")
    assert mod.status(str(_fake_ray(tmp_path, STATUS)), "10.77.0.11:6379") == (16.0, 2, "")
    gpus, nodes, err = mod.status(str(_fake_ray(tmp_path, "ConnectionError: GCS unreachable\n", rc=1)), "x:1")
    assert (gpus, nodes) == (0.0, 0) and "GCS unreachable" in err


def test_wait_gpus_exits_0_when_every_gpu_is_there_and_1_on_timeout(tmp_path: Path) -> None:
    ray = _fake_ray(tmp_path, STATUS)
    script = str(FILES / "gridready-ray-wait-gpus")
    ok = subprocess.run([sys.executable, script, "--ray", str(ray), "--address", "a:1", "--gpus", "16",
                         "--nodes", "2", "--timeout", "5"], capture_output=True, text=True, timeout=30, check=False)
    assert ok.returncode == 0 and "16/16 GPUs, 2/2 nodes" in ok.stdout
    short = subprocess.run([sys.executable, script, "--ray", str(ray), "--address", "a:1", "--gpus", "24",
                            "--timeout", "0"], capture_output=True, text=True, timeout=30, check=False)
    assert short.returncode == 1 and "never showed 24 GPUs" in short.stdout


def test_headwatch_waits_for_the_head_and_exits_when_it_goes_away() -> None:
    mod = _load("gridready-ray-headwatch")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    assert mod.wait("127.0.0.1", port) == 0
    result: list[int] = []
    watcher = threading.Thread(target=lambda: result.append(mod.watch("127.0.0.1", port)))
    watcher.start()
    conn, _ = server.accept()
    conn.sendall(b"\x00\x00\x00\x04")  # the GCS talks first (HTTP/2 SETTINGS); the watcher drops it
    time.sleep(1.5)
    assert watcher.is_alive()
    conn.close()
    server.close()  # the head is gone: the reconnect is refused
    watcher.join(timeout=10)
    assert result == [1]
