"""Simulated NVIDIA daemons refuse what the real ones refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

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
