"""Simulated ibstat, ibv_devinfo, ib_write_bw, dmesg and the sysfs tree."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from sandbox.sim import simcore, sysfs

from .conftest import FIXTURES, call


def ports(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for block in text.split("CA '")[1:]:
        name = block.split("'")[0]
        out[name] = dict(re.findall(r"^\s+([\w ]+): (.*)$", block, re.M))
    return out


def test_ibstat_has_the_real_keys(healthy):
    rc, out = call("ib", [], prog="ibstat")
    real = ports(next((FIXTURES / "public/ibstat").glob("*ib-ndr*")).read_text())
    sim = ports(out)
    assert rc == 0 and out.startswith("# gridready-sim:") and len(sim) == 8
    assert set(sim["mlx5_0"]) == set(real["mlx5_0"])
    assert {p["State"] for p in sim.values()} == {"Active"} and {p["Rate"] for p in sim.values()} == {"400"}


def test_hca_faults_in_ibstat_and_sysfs(use_profile, tmp_path):
    use_profile({"kind": "hca_half_rate", "hca": "mlx5_2"}, {"kind": "hca_down", "hca": "mlx5_5"})
    sim = ports(call("ib", [], prog="ibstat")[1])
    assert sim["mlx5_2"]["Rate"] == "200" and sim["mlx5_2"]["State"] == "Active"
    assert sim["mlx5_5"]["State"] == "Down" and sim["mlx5_5"]["Physical state"] == "Polling"
    assert {n for n, p in sim.items() if p["Rate"] == "400"} == {f"mlx5_{i}" for i in (0, 1, 3, 4, 6, 7)}
    root = sysfs.write_tree(simcore.load(), tmp_path / "sysfs")
    port = root / "class/infiniband/mlx5_2/ports/1"
    assert (port / "rate").read_text() == "200 Gb/sec (2X NDR)\n"
    assert (root / "class/infiniband/mlx5_5/ports/1/state").read_text() == "1: DOWN\n"
    assert (root / "class/infiniband/mlx5_5/ports/1/counters/link_downed").read_text() == "1\n"
    real = FIXTURES / "public/sysfs-infiniband"
    real_counters = {p.name for p in next(real.iterdir()).glob("mlx5_0/ports/1/counters/*")}
    assert real_counters == {p.name for p in port.glob("counters/*")}


def test_sysfs_pci_links_and_false_positive_bait(use_profile, tmp_path):
    use_profile({"kind": "pcie_downtrained", "gpu": 3})
    root = sysfs.write_tree(simcore.load(), tmp_path / "sysfs")
    dev = root / "bus/pci/devices"

    def link(bdf: str) -> tuple[str, ...]:
        return tuple((dev / bdf / f).read_text().strip() for f in
                     ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"))  # fmt: skip

    gpus = sorted(d.name for d in dev.iterdir() if (d / "class").read_text().strip() == "0x030200")
    assert len(gpus) == 8 and (dev / gpus[0] / "device").read_text() == "0x2335\n"
    assert link("0000:5d:00.0") == ("16.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16")
    assert {link(g) for g in gpus if g != "0000:5d:00.0"} == {("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16")}
    assert link("0000:17:03.0")[0] == "16.0 GT/s PCIe" and link("0000:1b:00.0")[2] == "16.0 GT/s PCIe"  # benign
    assert (root / "class/infiniband/mlx5_0/device").resolve() == (dev / "0000:19:00.0").resolve()
    assert len(list((root / "kernel/iommu_groups").iterdir())) == 8 + 8 + 1
    assert "iommu=pt" in (root / "proc/cmdline").read_text() and (root / "GRIDREADY_SIMULATED").exists()
    assert "nvidia_peermem" not in (root / "proc/modules").read_text()  # the default host has the inbox RDMA stack


def test_dmesg_lines(use_profile):
    use_profile({"kind": "xid", "gpu": 2, "code": 94}, {"kind": "ecc_uncorrectable", "gpu": 0, "count": 3})
    rc, out = call("dmesg", [])
    first = out.splitlines()[0]
    assert rc == 0 and re.match(r"^\[\s+0\.000000\] gridready-sim: simulated kernel log", first)
    assert re.search(r"NVRM: Xid \(PCI:0000:3a:00\): 94, ", out) and re.search(r"Xid \(PCI:0000:18:00\): 48, ", out)
    iso = call("dmesg", ["--time-format", "iso"])[1]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}\+00:00 ", iso)


def test_dmesg_wall_clock_stamps_hold_between_reads(use_profile, tmp_path, monkeypatch):
    """One boot time per host (the kernel's btime): a line's -T / iso stamp reads the same on every call."""
    monkeypatch.setenv("GRIDREADY_SIM_STATE", str(tmp_path / "state"))
    use_profile({"kind": "xid", "gpu": 2, "code": 94})
    first, first_t = call("dmesg", ["--time-format", "iso"])[1], call("dmesg", ["-T"])[1]
    later = time.time() + 7.0  # the second read, seconds later (a probe's load phases lie between the two)
    monkeypatch.setattr(time, "time", lambda: later)
    assert call("dmesg", ["--time-format", "iso"])[1] == first and call("dmesg", ["-T"])[1] == first_t
    (tmp_path / "state/boot-time").write_text("1000000\n")  # another boot: other stamps
    assert call("dmesg", ["--time-format", "iso"])[1] != first


def test_dmesg_healthy_has_no_xid(healthy):
    out = call("dmesg", ["-T"])[1]
    assert "Xid" not in out and "NVRM: loading NVIDIA UNIX Open Kernel Module" in out
    assert not list(Path(FIXTURES).glob("nonexistent"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ib_write_bw_loopback_pair(use_profile, monkeypatch):
    use_profile({"kind": "hca_half_rate", "hca": "mlx5_1"}, address="127.0.0.1")
    monkeypatch.setenv("GRIDREADY_SIM_PERFTEST_TIMEOUT", "10")
    port = str(_free_port())
    code = "import sys; from sandbox.sim.ib import main; sys.exit(main(sys.argv[1:], prog='ib_write_bw'))"
    server = subprocess.Popen([sys.executable, "-c", code, "-d", "mlx5_0", "-p", port], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)  # fmt: skip
    rc, out = call("ib", ["-d", "mlx5_1", "-p", port, "--report_gbits", "127.0.0.1"], prog="ib_write_bw")
    server_out = server.communicate(timeout=15)[0]
    assert rc == 0 and server.returncode == 0, out + server_out
    assert "Waiting for client to connect" in server_out and "BW peak[MB/sec]" in server_out
    bw = float(re.search(r"^ 65536\s+\d+\s+([\d.]+)", out, re.M).group(1))
    assert bw == 192.0  # half rate (200) x 0.96, the slower end wins
    rc, out = call("ib", ["-d", "mlx5_9"], prog="ib_write_bw")
    assert rc == 1
