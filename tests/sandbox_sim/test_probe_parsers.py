"""The probe's own parsers (gridready/probe, the certification owner's) read the simulated outputs as they read
the real fixtures: same keys, the faults visible where the gates look."""

from __future__ import annotations

from gridready.probe import dcgm, hca, nvsmi
from gridready.probe import kernel_log as klog
from gridready.probe import nccl_tests as nccl
from gridready.probe import sysfs as psys
from gridready.sandbox.sim import simcore, sysfs

from .conftest import FIXTURES, call

FX = FIXTURES / "h200x2"
QUERY = (FX / "README.md").read_text().split("--query-gpu=")[1].split(" --format")[0]


def test_query_csv_parses_like_the_fixture(use_profile):
    use_profile({"kind": "pcie_downtrained", "gpu": 3})
    sim = nvsmi.parse_query_csv(call("nvidia_smi", [f"--query-gpu={QUERY}", "--format=csv"])[1])
    real = nvsmi.parse_query_csv((FX / "nvidia-smi-query-gpu.csv").read_text())
    assert len(sim) == 8 and set(sim[0]) == set(real[0])
    assert [r["pcie.link.width.current"] for r in sim] == [16, 16, 16, 8, 16, 16, 16, 16]


# Per-GPU fields of `nvidia-smi -q` that differ between two healthy H200s on one driver: identities, live readings,
# and what the capture's VM shows (passthrough, 3 PCIe replays on GPU 0) against the sample's bare metal.
Q_PER_BOARD = {"bus_id", "serial", "uuid", "temperature_c", "memory_temperature_c", "power_draw_w",
               "virtualization_mode"}


def _keys(d: dict, at: str = "") -> set[str]:
    """Every key path of a nested dict: {"a", "a.b", ...}."""
    out = {f"{at}{k}" for k in d}
    for k, v in d.items():
        if isinstance(v, dict):
            out |= _keys(v, f"{at}{k}.")
    return out


def test_q_tree_parses_like_the_fixture(healthy):
    """The healthy sample's `nvidia-smi -q` reads, field by field, as the real h200x2 capture does: the same keys at
    every depth and, on each of its 8 GPUs, the values of the capture's GPU except the per-board ones."""
    sim = nvsmi.parse_q(call("nvidia_smi", ["-q"])[1])
    real = nvsmi.parse_q((FX / "nvidia-smi-q.txt").read_text())
    assert (sim["driver_version"], sim["cuda_version"]) == (real["driver_version"], real["cuda_version"]) \
        == ("580.159.04", "13.0")
    assert sim["attached_gpus"] == len(sim["gpus"]) == 8 and real["attached_gpus"] == len(real["gpus"]) == 2
    assert len({g["bus_id"] for g in sim["gpus"]}) == len({g["uuid"] for g in sim["gpus"]}) == 8
    ref = real["gpus"][1]  # GPU 1 of the capture: no PCIe replays
    assert ref["pcie"]["replays"] == 0 and ref["power_limit_w"] == 700.0 and ref["remap"]["pending"] is False
    for g in sim["gpus"]:
        assert _keys(g) == _keys(ref)
        assert {k: v for k, v in g.items() if k not in Q_PER_BOARD} == {
            k: v for k, v in ref.items() if k not in Q_PER_BOARD}
        assert 20 <= g["temperature_c"] <= 60 and 20 <= g["memory_temperature_c"] <= 60
        assert 50 <= g["power_draw_w"] <= 150  # idle, like the capture's 77.92 W


def test_nccl_text_parses_like_the_fixture(use_profile, monkeypatch):
    use_profile(gpus=2, platform="passthrough")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    sim = nccl.parse_text(call("nccl_tests", ["-b", "8", "-e", "8G", "-f", "2", "-g", "2"], prog="all_reduce_perf")[1])
    real = nccl.parse_text((FX / "all_reduce_perf.txt").read_text())
    assert set(sim) == set(real) and len(sim["rows"]) == len(real["rows"]) and sim["out_of_bounds"] == 0
    assert abs(sim["rows"][-1]["oop"]["busbw"] - real["rows"][-1]["oop"]["busbw"]) < 0.03 * 345


def test_dcgm_json_parses_as_4x(use_profile):
    use_profile({"kind": "dcgm_level3_failure", "gpu": 2})
    doc = dcgm.parse_json(call("dcgmi", ["diag", "-r", "3", "-j"])[1])
    assert doc["schema"] == "4.x" and {t["name"] for t in doc["tests"] if t["summary"] == "fail"} == {"targeted_stress"}


def test_ibstat_ib_write_bw_kernel_log(use_profile):
    use_profile({"kind": "hca_half_rate", "hca": "mlx5_1"}, {"kind": "xid", "gpu": 0, "code": 79})
    cas = hca.parse_ibstat(call("ib", [], prog="ibstat")[1])["cas"]
    assert len(cas) == 8 and not hca.parse_ibstat(call("ib", [], prog="ibstat")[1])["errors"]
    xids = klog.parse(call("dmesg", [])[1])["xid"]
    assert [x["xid"] for x in xids] == [79]


def test_sysfs_endpoints(use_profile, tmp_path, monkeypatch):
    use_profile({"kind": "pcie_downtrained", "gpu": 3})
    root = sysfs.write_tree(simcore.load(), tmp_path / "sysfs")
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(root))
    monkeypatch.setenv("GRIDREADY_PROC_ROOT", str(root / "proc"))
    eps = psys.pci_endpoints()
    assert len(eps) >= 16
    mods = psys.modules() or []
    assert "nvidia" in mods and "nvidia_peermem" not in mods  # the default host: inbox RDMA, no nvidia-peermem
