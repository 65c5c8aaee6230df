"""The simulated kernel loads nvidia-peermem only over DOCA-OFED/MLNX_OFED's ib_core (peer-memory API); with the
inbox RDMA stack `modprobe nvidia-peermem` fails with EINVAL, as the real module's init does."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.profile import HardwareProfile
from sandbox.sim import simcore, sysfs

from .conftest import call


@pytest.fixture
def host_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """host_with(rdma_stack): write that profile, point the simulator's state and sysfs at tmp_path."""
    monkeypatch.setattr(simcore, "PEERMEM_STATE", tmp_path / "run/nvidia_peermem-loaded")
    monkeypatch.setattr(simcore, "MODULES_LOAD_DIRS", (tmp_path / "modules-load.d",))
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path / "sysfs"))

    def make(rdma_stack: str) -> Path:
        prof = HardwareProfile.sample("sim-a").model_copy(update={"rdma_stack": rdma_stack})
        monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(prof.write(tmp_path / "sim-a.json")))
        return tmp_path

    return make


def modules(root: Path) -> str:
    return (root / "sysfs/proc/modules").read_text()


def test_inbox_stack_refuses_nvidia_peermem(host_with):
    root = host_with("inbox")
    rc, out = call("modprobe", ["nvidia-peermem"])
    assert rc == 1
    assert out == "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n"
    sysfs.write_tree(simcore.load(), root / "sysfs")
    assert "nvidia_peermem" not in modules(root)
    assert "nvidia_peermem" not in call("dmesg", [])[1]


def test_inbox_stack_ignores_a_modules_load_entry(host_with):
    root = host_with("inbox")
    (root / "modules-load.d").mkdir()
    (root / "modules-load.d/gridready-nvidia-peermem.conf").write_text("nvidia-peermem\n")
    assert not simcore.load().peermem_loaded()


def test_doca_stack_loads_nvidia_peermem(host_with):
    root = host_with("doca")
    assert not simcore.load().peermem_loaded()
    rc, out = call("modprobe", ["nvidia-peermem"])
    assert rc == 0, out
    assert modules(root).startswith("nvidia_peermem ")
    assert "nvidia_peermem: module uses symbols" in call("dmesg", [])[1]
    assert call("modprobe", ["-r", "nvidia_peermem"])[0] == 0
    assert "nvidia_peermem" not in modules(root)


def test_doca_stack_loads_nvidia_peermem_at_boot_from_modules_load_d(host_with):
    root = host_with("doca")
    (root / "modules-load.d").mkdir()
    (root / "modules-load.d/gridready-nvidia-peermem.conf").write_text("# comment\nnvidia-peermem\n")
    sysfs.write_tree(simcore.load(), root / "sysfs")
    assert "nvidia_peermem 16384 0 - Live" in modules(root)
