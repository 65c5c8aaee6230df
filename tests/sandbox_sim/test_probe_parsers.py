"""The probe's own parsers (gridready/probe, the certification owner's) read the simulated outputs as they read
the real fixtures: same keys, the faults visible where the gates look."""

from __future__ import annotations

from gridready.probe import dcgm, hca, nvsmi
from gridready.probe import kernel_log as klog
from gridready.probe import nccl_tests as nccl
from gridready.probe import sysfs as psys
from sandbox.sim import simcore, sysfs

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


def test_simulated_json_reads_as_its_own_text(use_profile, tmp_path, monkeypatch):
    """The JSON path of collect() on the simulator: its -J file must read as its stdout does (the real files do,
    tests/unit/probe/test_parsers.py), else the probe falls back to the text and the JSON path is never exercised."""
    use_profile(gpus=2, platform="passthrough")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    argv = ["-b", "64M", "-e", "256M", "-f", "2", "-g", "2", "-c", "1", "-J", str(tmp_path / "r.json")]
    out = call("nccl_tests", argv, prog="all_reduce_perf")[1]
    txt = nccl.parse_text(out)
    js = nccl.parse_json((tmp_path / "r.json").read_text())
    assert len(txt["rows"]) == 3
    # the text prints two decimals, the JSON the unrounded figures (as the real files do)
    assert [(r["bytes"], round(r["oop"]["busbw"], 2), round(r["ip"]["busbw"], 2)) for r in js["rows"]] == [
        (r["bytes"], r["oop"]["busbw"], r["ip"]["busbw"]) for r in txt["rows"]]
    for key in ("ranks", "hosts", "validation", "collective", "out_of_bounds"):
        assert js[key] == txt[key], key
    assert round(js["avg_busbw"], 3) == txt["avg_busbw"]  # the text's three decimals
