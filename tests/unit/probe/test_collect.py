"""The probe on a machine without NVIDIA tools: every collector fails soft and the document stays valid; the sysfs
collectors read a fake tree (GRIDREADY_SYSFS_ROOT / GRIDREADY_PROC_ROOT, as the sandbox simulator writes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridready.probe import SCHEMA, profiles, sysfs
from gridready.probe.__main__ import main
from gridready.probe.collect import Probe, nccl_env
from gridready.probe.profiles import GiB, MiB, sweep_sizes
from tests.unit.probe.line_budget import line_budget


def _dev(root: Path, bdf: str, vendor: str, cls: str, speed: str | None, width: int | None,
         maxspeed: str | None, maxwidth: int | None) -> None:
    d = root / "bus" / "pci" / "devices" / bdf
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(cls + "\n")
    (d / "device").write_text("0x2335\n")
    for name, val in (("current_link_speed", speed), ("current_link_width", width), ("max_link_speed", maxspeed),
                      ("max_link_width", maxwidth)):
        if val is not None:
            (d / name).write_text(f"{val}\n")


@pytest.fixture
def fake_sys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "sys"
    _dev(root, "0000:19:00.0", "0x10de", "0x030200", "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)
    _dev(root, "0000:1a:00.0", "0x15b3", "0x020000", "32.0 GT/s PCIe", 8, "32.0 GT/s PCIe", 16)
    _dev(root, "0000:17:03.0", "0x1000", "0x060400", "16.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)  # switch port
    (root / "kernel" / "iommu_groups" / "0").mkdir(parents=True)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz iommu=pt quiet\n")
    (proc / "modules").write_text("nvidia_peermem 16384 0 - Live 0x0\nnvidia 1 2 - Live 0x0\n")
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path))  # a root holding sys/
    monkeypatch.setenv("GRIDREADY_PROC_ROOT", str(proc))
    return root


def test_sysfs_endpoints_never_switch_ports(fake_sys: Path) -> None:
    eps = sysfs.pci_endpoints()
    assert [(e["bdf"], e["kind"], e["gen_current"], e["width_current"]) for e in eps] == [
        ("0000:19:00.0", "gpu", 5, 16), ("0000:1a:00.0", "nic", 5, 8)]
    assert sysfs.iommu()["groups"] == 1
    assert sysfs.iommu_mode(sysfs.cmdline(), 1) == "passthrough"
    assert "nvidia_peermem" in (sysfs.modules() or [])


def test_probe_fails_soft_without_tools(fake_sys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    opts = {"profile": "quick", "dcgm_level": None, "algo": "ring", "nccl_min_bytes": GiB, "nccl_max_bytes": 2 * GiB,
            "best_of": 1, "timeout": 10.0, "skip": ["torch"], "out": "-"}
    doc = Probe(opts).run()
    json.dumps(doc)  # one JSON document, whatever happened
    assert doc["schema"] == SCHEMA
    assert doc["nvidia_smi"] == {"present": False}
    assert doc["dcgm"]["present"] is False and doc["nccl_tests"] == {"present": False}
    assert doc["tools"]["nvidia-smi"] is None
    assert doc["system"]["peermem_loaded"] is True and doc["system"]["iommu_mode"] == "passthrough"
    assert any(e["collector"] == "kernel_log" for e in doc["errors"])  # no dmesg on PATH: recorded, not raised
    assert doc["timings_s"]["torch"] is None


def test_main_writes_atomically(fake_sys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    out = tmp_path / "probe.json"
    assert main(["--profile", "quick", "--skip", "torch,dcgm,nccl_tests", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["profile"] == "quick"


def test_sweep_keeps_every_gated_size() -> None:
    with line_budget(profiles, 1000):  # a sweep that stops growing fails here instead of hanging
        sizes = sweep_sizes(1 * MiB, 8 * GiB, 4, 1 * GiB)
    assert sizes[0] == MiB and sizes[-1] == 8 * GiB
    assert {GiB, 2 * GiB, 4 * GiB, 8 * GiB} <= set(sizes)


def test_nccl_env_pins_the_algorithm() -> None:
    assert nccl_env("ring") == {"NCCL_NVLS_ENABLE": "0"}
    assert nccl_env("nvls")["NCCL_ALGO"] == "NVLS"
