"""Simulated nccl-tests and dcgmi: the real formats, bandwidth from the catalog, faults where they belong."""

from __future__ import annotations

import json
import re

import pytest

from gridready import catalog

from .conftest import FIXTURES, call

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+"
                 r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)$")  # fmt: skip


def nccl(*args: str, prog: str = "all_reduce_perf") -> tuple[int, str]:
    return call("nccl_tests", list(args), prog=prog)


def peak_busbw(out: str) -> float:
    return max(float(m.group(8)) for m in map(ROW.match, out.splitlines()) if m)


def test_all_reduce_has_the_fixture_layout(use_profile, monkeypatch):
    use_profile(gpus=2, platform="passthrough", hcas=0)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    rc, out = nccl("-b", "8", "-e", "8G", "-f", "2", "-g", "2", "-n", "20", "-w", "5")
    real = (FIXTURES / "h200x2/all_reduce_perf.txt").read_text().splitlines()
    lines = out.splitlines()
    assert rc == 0 and lines[2].startswith("# gridready-sim: simulated output")
    assert lines[3] == real[2]  # the nThread/nGpus/minBytes line
    assert lines[9:12] == real[8:11]  # the column header, trailing blanks included
    body = [m for m in map(ROW.match, lines) if m]
    assert [m.group(1) for m in body] == [m.group(1) for m in map(ROW.match, real) if m]
    assert {m.group(9) for m in body} == {"0"}
    assert lines[-6] == "# Out of bounds values : 0 OK" and lines[-5].startswith("# Avg bus bandwidth    : ")
    assert 0.97 * 347.0 <= peak_busbw(out) <= 1.01 * 347.0  # FIX-H200 peak 347.0 GB/s


def test_eight_gpus_ring_and_nvls_from_the_catalog(healthy, monkeypatch):
    sku = catalog.lookup("h200")
    assert sku is not None
    _, nvls = nccl("-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    assert peak_busbw(nvls) == pytest.approx(sku.nccl_floor(8, "nvls").reference_gbps, rel=0.03)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    _, ring = nccl("-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    assert peak_busbw(ring) == pytest.approx(sku.nccl_floor(8, "ring").reference_gbps, rel=0.03)


@pytest.mark.parametrize(
    ("fault", "lo", "hi"),
    [
        ({"kind": "low_nccl_busbw", "factor": 0.5}, 0.45, 0.55),
        ({"kind": "low_nccl_busbw"}, 0.55, 0.65),
        ({"kind": "nvlink_inactive", "gpu": 4, "count": 9}, 0.45, 0.55),
        ({"kind": "nvlink_inactive", "gpu": 4}, 0.0, 0.2),
    ],
)
def test_faults_lower_busbw(use_profile, monkeypatch, fault, lo, hi):
    use_profile(fault)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    _, out = nccl("-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    assert lo * 367.0 <= peak_busbw(out) <= hi * 367.0


def test_other_collectives_and_flags(healthy, tmp_path):
    rc, out = nccl(
        "-b", "64M", "-e", "64M", "-g", "8", "-c", "0", "-J", str(tmp_path / "r.json"), prog="all_gather_perf"
    )
    row = next(m for m in map(ROW.match, out.splitlines()) if m)
    assert rc == 0 and row.group(4) == "none" and row.group(9) == "N/A"
    data = json.loads((tmp_path / "r.json").read_text())
    # nccl-tests 2.19.6's layout (tests/fixtures/h200x1/nccl-tests-J): unchecked columns carry a null nwrong
    assert data["gridready_simulated"] is True and data["args"][0].endswith("all_gather_perf")
    assert data["config"]["validation"] == 0 and len(data["config"]["devices"]) == 8
    assert data["results"][0]["out_of_place"]["nwrong"] is None and data["results"][0]["redop"] == "none"


def test_xid79_aborts_the_test(use_profile):
    use_profile({"kind": "xid", "gpu": 1, "code": 79})
    rc, out = nccl("-b", "8", "-e", "1M", "-f", "2", "-g", "8")
    assert rc == 1 and "Test CUDA failure" in out


# ---- dcgmi -----------------------------------------------------------------------------------------------------


def diag(level: int) -> tuple[int, dict]:
    rc, out = call("dcgmi", ["diag", "-r", str(level), "-j"])
    return rc, json.loads(out)


def statuses(body: dict) -> dict[str, dict[int, str]]:
    return {t["name"]: {r["entity_id"]: r["status"] for r in t["results"]}
            for c in body["DCGM Diagnostic"]["test_categories"] for t in c["tests"]}  # fmt: skip


def test_dcgm_json_has_the_4x_layout(healthy):
    real = json.loads(next((FIXTURES / "public/dcgmi").glob("*DCGM4.2.3*.json")).read_text())
    for level, n_tests in ((1, 1), (2, 3), (3, 7), (4, 9)):
        rc, body = diag(level)
        assert rc == 0 and body["gridready_simulated"] is True
        assert set(real) <= set(body) and set(real["metadata"]) == set(body["metadata"])
        assert len(statuses(body)) == n_tests
        assert all(s == "Pass" for per in statuses(body).values() for s in per.values())


def test_dcgm_level3_failure_fails_level3_only_on_that_gpu(use_profile):
    use_profile({"kind": "dcgm_level3_failure", "gpu": 6})
    assert diag(1)[0] == 0 and diag(2)[0] == 0
    rc, body = diag(3)
    assert rc == 226
    failed = {(t, g) for t, per in statuses(body).items() for g, s in per.items() if s == "Fail"}
    assert failed == {("targeted_stress", 6)}


def test_dcgm_row_remap_fails_the_software_test(use_profile):
    use_profile({"kind": "row_remap_pending", "gpu": 3})
    rc, body = diag(1)
    assert rc == 226 and statuses(body)["software"][3] == "Fail"
    rc, text = call("dcgmi", ["diag", "-r", "1"])
    warning = body["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][3]["warnings"][0]["warning"]
    assert "row remappings are pending" in warning
    assert rc == 226 and "| software                  | Fail" in text and "GPU3: Fail" in text


def test_dcgm_discovery(healthy):
    rc, out = call("dcgmi", ["discovery", "-l"])
    assert rc == 0 and "8 GPUs found." in out and "4 NvSwitches found." in out


def test_dcgm4_core_without_the_plugins_package_cannot_run_diagnostics(healthy, tmp_path, monkeypatch):
    from sandbox.sim import dcgmi

    core, plugins = tmp_path / "doc/datacenter-gpu-manager-4-core", tmp_path / "dcgm-diag-plugins"
    core.mkdir(parents=True)
    monkeypatch.setattr(dcgmi, "DCGM4_CORE", core)
    monkeypatch.setattr(dcgmi, "DIAG_PLUGINS", plugins)
    rc, out = call("dcgmi", ["diag", "-r", "1", "-j"])
    assert rc == dcgmi.EXIT_DIAG_FAILED and "diagnostic plugins are not installed" in out
    plugins.write_text("present\n")
    assert call("dcgmi", ["diag", "-r", "1", "-j"])[0] == 0
