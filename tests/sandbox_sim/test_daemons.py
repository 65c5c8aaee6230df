"""Simulated NVIDIA daemons refuse what the real ones refuse."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import packages
from sandbox.profile import HardwareProfile
from sandbox.sim import daemons

from .conftest import call


@pytest.fixture
def fm_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "fabricmanager-version"
    monkeypatch.setattr(daemons, "FM_VERSION_FILE", path)
    monkeypatch.setattr(daemons, "_log", lambda prog, msg: print(f"{prog}: {msg}"))
    return path


def _profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **update: str) -> None:
    prof = HardwareProfile.sample("sim-fm").model_copy(update=update)
    monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(prof.write(tmp_path / "p.json")))


def test_fabricmanager_refuses_a_driver_of_another_version(tmp_path, monkeypatch, fm_version):
    fm_version.write_text("580.95.05\n")  # fabric manager left at the old release, the driver moved on
    _profile(tmp_path, monkeypatch)
    rc, out = call("daemons", [], prog="nv-fabricmanager")
    assert rc == 1 and "does not match the loaded NVIDIA driver" in out


def test_fabricmanager_refuses_until_the_upgraded_driver_is_loaded(tmp_path, monkeypatch, fm_version):
    fm_version.write_text(daemons.simcore.versions()["driver"] + "\n")
    _profile(tmp_path, monkeypatch, loaded_driver="580.95.05")  # upgraded without a reboot
    rc, out = call("daemons", [], prog="nv-fabricmanager")
    assert rc == 1 and "580.95.05" in out


def test_nvidia_ctk_configures_containerd_through_a_drop_in(tmp_path, monkeypatch):
    dropin = tmp_path / "conf.d/99-nvidia.toml"
    monkeypatch.setattr(daemons, "CONTAINERD_DROPIN", dropin)
    config = tmp_path / "config.toml"
    config.write_text('version = 2\n')
    for _ in range(2):
        args = ["runtime", "configure", "--runtime=containerd", f"--config={config}"]
        rc, _out = call("daemons", args, prog="nvidia-ctk")
        assert rc == 0
    assert "nvidia-container-runtime" not in config.read_text()  # a grep of config.toml never finds it
    assert config.read_text().count("imports = ") == 1
    assert dropin.read_text().count("nvidia-container-runtime") == 1


def test_fabricmanager_daemonizes_as_its_forking_unit_expects(tmp_path, monkeypatch):
    """DAEMONIZE=1 (fabricmanager.cfg's default): the parent exits 0 once the daemon runs and the daemon writes the
    unit's PID file; on a version mismatch the parent exits 1, which fails `systemctl start` of the forking unit."""
    _profile(tmp_path, monkeypatch)
    cfg = tmp_path / "fabricmanager.cfg"
    cfg.write_text("LOG_LEVEL=4\nDAEMONIZE=1\n")
    pidfile = tmp_path / "nv-fabricmanager.pid"
    code = ("import sys; from sandbox.sim import daemons; daemons.FM_PIDFILE = sys.argv[1]; "
            "daemons.FM_VERSION_FILE = daemons.Path(sys.argv[2]); sys.exit(daemons.fabricmanager(['-c', sys.argv[3]]))")
    version = tmp_path / "fabricmanager-version"
    version.write_text(daemons.simcore.versions()["driver"] + "\n")
    run = subprocess.run([sys.executable, "-c", code, str(pidfile), str(version), str(cfg)], timeout=30,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)  # the daemon runs on after its parent returned
    finally:
        os.kill(pid, signal.SIGKILL)
    version.write_text("580.95.05\n")
    pidfile.unlink()
    refused = subprocess.run([sys.executable, "-c", code, str(pidfile), str(version), str(cfg)], timeout=30,
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and not pidfile.exists()


def test_persistenced_daemonizes_as_its_forking_unit_expects(tmp_path, monkeypatch):
    """The distribution's unit is Type=forking (NVIDIA/nvidia-persistenced's systemd template): the parent returns 0
    with the PID file written and the persistence mode set; the daemon runs on until SIGTERM, then clears it."""
    _profile(tmp_path, monkeypatch)
    pidfile, state = tmp_path / "nvidia-persistenced.pid", tmp_path / "persistence-mode"
    code = ("import sys; from sandbox.sim import daemons; daemons.PERSISTENCED_PIDFILE = sys.argv[1]; "
            "daemons.simcore.PERSISTENCE_STATE = daemons.Path(sys.argv[2]); daemons._log = lambda *a: None; "
            "sys.exit(daemons.persistenced(['--user', 'nvidia-persistenced', '--verbose']))")
    run = subprocess.run([sys.executable, "-c", code, str(pidfile), str(state)], timeout=30, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert state.read_text() == "Enabled\n"  # set before the parent returned
    pid = int(pidfile.read_text())
    os.kill(pid, 0)  # the daemon runs on after its parent returned
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not state.exists():
            break
        time.sleep(0.05)
    assert not state.exists()
    unit = next(p for p in packages.packages("debian12")
                if p.name == "nvidia-persistenced").units["nvidia-persistenced.service"]
    assert "Type=forking" in unit and "PIDFile=/run/nvidia-persistenced/nvidia-persistenced.pid" in unit
