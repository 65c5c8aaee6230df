"""Multi-node: the fabric agent answers its host's profile; mpirun bounds busbw by the worst participant."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.profile import Fault, HardwareProfile
from sandbox.sim import fabric

from .conftest import call

BUSBW = re.compile(r"^\s+\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[callable]:
    """peer(name, *faults): an agent on 127.0.0.1:<free port> serving that host's profile (threads, no root)."""
    servers: list[fabric._Server] = []
    mapping: dict[str, str] = {}

    def start(name: str, *faults: dict) -> None:
        path = HardwareProfile.sample(name, faults=[Fault(**f) for f in faults]).write(tmp_path / f"{name}.json")
        port = _free_port()
        srv = fabric._Server(("127.0.0.1", port), fabric._Handler)
        srv.profile = path  # each agent serves its own host's file
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        mapping[name] = f"127.0.0.1:{port}"
        monkeypatch.setenv("GRIDREADY_SIM_FABRIC_MAP", json.dumps(mapping))

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _launcher(tmp_path: Path) -> str:
    exe = tmp_path / "all_reduce_perf"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nfrom sandbox.sim.nccl_tests import main\n"
        "sys.exit(main(sys.argv[1:], prog='all_reduce_perf'))\n"
    )
    exe.chmod(0o755)
    return str(exe)


def run_mpi(tmp_path: Path, hosts: list[str], *extra: str) -> tuple[int, str]:
    import subprocess

    argv = ["-np", str(8 * len(hosts)), "-H", ",".join(f"{h}:8" for h in hosts), *extra,
            _launcher(tmp_path), "-b", "1G", "-e", "4G", "-f", "2", "-g", "1"]  # fmt: skip
    code = "import sys; from sandbox.sim.fabric import mpirun_main; sys.exit(mpirun_main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60, check=False)
    return p.returncode, p.stdout + p.stderr


def peak(out: str) -> float:
    return max(float(x) for x in BUSBW.findall(out))


def test_agent_serves_the_profile(peer, use_profile):
    use_profile()
    peer("gpu-b", {"kind": "hca_down", "hca": "mlx5_0"})
    addr = json.loads(__import__("os").environ["GRIDREADY_SIM_FABRIC_MAP"])["gpu-b"]
    with urllib.request.urlopen(f"http://{addr}/profile", timeout=5) as r:
        body = json.loads(r.read())
    assert body["gridready_simulated"] is True and body["profile"]["faults"][0]["kind"] == "hca_down"


def test_healthy_pair_reaches_94_percent_of_the_nics(peer, use_profile, tmp_path):
    use_profile(host="gpu-a")
    peer("gpu-b")
    rc, out = run_mpi(tmp_path, ["gpu-a", "gpu-b"], "-x", "NCCL_DEBUG=INFO")
    assert rc == 0, out
    assert "nranks 16" in out and "#  Rank 15 Group  0" in out
    assert 0.92 * 400 <= peak(out) <= 0.95 * 400
    assert re.search(r"\[send\] via NET/IB/\d+/GDRDMA", out) and "Using network IB" in out


def test_worst_participant_bounds_busbw(peer, use_profile, tmp_path):
    use_profile(host="gpu-a")
    peer("gpu-b", {"kind": "hca_half_rate", "hca": "mlx5_3"})
    peer("gpu-c")
    rc, out = run_mpi(tmp_path, ["gpu-a", "gpu-b", "gpu-c"])
    assert rc == 0 and 0.45 * 400 <= peak(out) <= 0.5 * 400  # one half-rate rail halves every rail's share
    rc, out = run_mpi(tmp_path, ["gpu-a", "gpu-c"])
    assert peak(out) > 0.92 * 400


def test_socket_fallback_when_ib_is_unusable(peer, use_profile, tmp_path):
    use_profile(host="gpu-a")
    peer("gpu-b", *[{"kind": "hca_down", "hca": f"mlx5_{i}"} for i in range(8)])
    rc, out = run_mpi(tmp_path, ["gpu-a", "gpu-b"], "-x", "NCCL_DEBUG=INFO")
    assert rc == 0 and "via NET/Socket/" in out and "GDRDMA" not in out and peak(out) < 5


def test_unreachable_agent_fails_like_mpirun(use_profile, tmp_path, monkeypatch):
    use_profile(host="gpu-a")
    monkeypatch.setenv("GRIDREADY_SIM_FABRIC_MAP", json.dumps({"gpu-z": f"127.0.0.1:{_free_port()}"}))
    rc, out = run_mpi(tmp_path, ["gpu-a", "gpu-z"])
    assert rc == 1 and "ORTE was unable to reliably start one or more daemons" in out


def test_agent_refuses_addresses_outside_the_sandbox():
    with pytest.raises(SystemExit):
        fabric.serve("192.0.2.1", 18515)
    assert call("fabric", ["--version"], func="mpirun_main")[0] == 0
