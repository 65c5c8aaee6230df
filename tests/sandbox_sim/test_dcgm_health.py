"""Simulated `dcgmi health` (DCGM's passive health watches) and the kernel log of a fault injected at runtime, read
by the product's parsers (gridready.health)."""

from __future__ import annotations

import os
import re
import time

from gridready.health import from_dcgm_health, from_kernel_log
from tests.sandbox_sim.conftest import call


def test_health_check_needs_watches_then_reports_the_dbe_in_dcgmis_tree(use_profile, tmp_path, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SIM_STATE", str(tmp_path / "state"))
    use_profile({"kind": "ecc_uncorrectable", "gpu": 2, "count": 3})
    rc, out = call("dcgmi", ["health", "-c"])
    assert rc == 253 and out == "Error: Health watches not enabled. Please enable watches. \n"
    assert call("dcgmi", ["health", "-s", "a"]) == (0, "Health monitor systems set successfully.\n")
    rc, out = call("dcgmi", ["health", "-c"])
    marker, *rows = out.splitlines()  # the simulator's marker line, then dcgmi's tree
    assert marker == "# gridready-sim: simulated output (profile sim-a)"
    assert rc == 0 and rows[1] == f"| {'Health Monitor Report':<85}|"
    assert rows[0] == rows[-1] == "+" + "-" * 27 + "+" + "-" * 58 + "+" and rows[2].startswith("+====")
    assert {len(r) for r in rows} == {88}  # DcgmiOutputTree(28, 60)
    assert f"| {'Overall Health':<25} | {'Failure':<56} |" in rows
    assert f"| {'      -> Memory system':<25} | {'Failure':<56} |" in rows
    assert any("Detected 3 volatile double-bit ECC error(s) in GPU 2." in r for r in rows)
    (signal,) = from_dcgm_health("node2", out)
    assert (signal.code, signal.severity) == ("memory", "failure")
    assert signal.detail == "GPU 2: Detected 3 volatile double-bit ECC error(s) in GPU 2."


def test_health_check_of_a_healthy_host_and_watch_letters(use_profile, tmp_path, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SIM_STATE", str(tmp_path / "state"))
    use_profile({"kind": "ecc_uncorrectable", "gpu": 0})
    assert call("dcgmi", ["health", "-s", "pn"])[0] == 0  # memory not watched: the DBE is not seen
    out = call("dcgmi", ["health", "-c"])[1]
    assert out.startswith("# gridready-sim: simulated output")  # the marker line; the product's parser skips it
    assert f"| {'Overall Health':<25} | {'Healthy':<56} |" in out.splitlines() and from_dcgm_health("n", out) == []
    assert call("dcgmi", ["health", "-s", "aa"])[0] == 2 and call("dcgmi", ["health", "-s", "ap"])[0] == 2


def test_nvlink_down_reads_as_an_nvlink_failure(use_profile, tmp_path, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SIM_STATE", str(tmp_path / "state"))
    use_profile({"kind": "nvlink_inactive", "gpu": 1, "count": 2})
    call("dcgmi", ["health", "-s", "a"])
    signals = from_dcgm_health("n", call("dcgmi", ["health", "-c"])[1])
    assert [(s.code, s.severity) for s in signals] == [("nvlink", "failure")]
    assert "GPU 1's NvLink link 16 is currently down, GPU 1's NvLink link 17 is currently down" in signals[0].detail


def test_a_profile_rewritten_at_runtime_logs_its_xid_then(use_profile, tmp_path, monkeypatch):
    """Booted healthy; the fault injected later (Fleet.set_faults) shows in dmesg at the time it was injected, so
    the watcher's `since` bound keeps it; a profile the host booted with logs its faults 600 s after boot."""
    monkeypatch.setenv("GRIDREADY_SIM_STATE", str(tmp_path / "state"))
    prof = use_profile({"kind": "ecc_uncorrectable", "gpu": 0})
    path = tmp_path / f"{prof.host}.json"
    os.utime(path, (time.time() - 60, time.time() - 60))  # written before the host came up
    boot_lines = call("dmesg", [])[1]
    assert re.search(r"\[\s+600\.000000\] NVRM: Xid \(PCI:0000:18:00\): 48, ", boot_lines)
    later = time.time() + 5
    os.utime(path, (later, later))  # rewritten while the host runs
    iso = call("dmesg", ["--time-format", "iso"])[1]
    (xid,) = [ln for ln in iso.splitlines() if "Xid" in ln]
    assert xid.startswith(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(later)))
    assert [s.code for s in from_kernel_log("n", iso)] == ["48"]
