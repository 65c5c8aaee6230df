"""Every relevant public fixture to its verdict: FAIL/DEGRADED captures fail the right gate with a reason naming the
GPU or link; healthy ones pass. Each gate is called as the pure function it is, on a probe document built from the
capture by the probe's own parsers."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gridready import catalog, matrix
from gridready.certify import compute, diagnostics, host_settings, memory_errors, nccl, nvlink, pcie, thermal, xid
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from gridready.spec.certification import CertificationSpec, Floors, NcclSettings
from tests.unit.certify.fixtures_io import pub


def exp(sku: str = "h100", gpus: int = 8, platform: str = "baremetal", **spec: Any) -> Expectations:
    found = catalog.lookup(sku)
    assert found is not None
    return Expectations(node="n1", sku=found, gpus=gpus, spec=CertificationSpec(**spec), platform=platform)


def statuses(results: list[Any]) -> set[S]:
    return {r.status for r in results}


# ---- nvidia-smi -q: ECC, row remapping, retired pages, throttle, clocks, power ------------------------------

H100_Q = pub("nvidia-smi", "nvidia-smi-q__8xH100-SXM__drv565")
BRAKE_Q = pub("nvidia-smi", "FAIL-hw-power-brake-slowdown-all-8-gpus")


@pytest.mark.parametrize("gate", [memory_errors.ecc, memory_errors.row_remap, thermal.throttle, thermal.clocks,
                                  thermal.power, thermal.temperature])
def test_healthy_h100_q_passes(gate: Any) -> None:
    doc = doc_from_outputs({"nvidia_smi_q": H100_Q})
    res = gate(doc, exp())
    assert len(res) == 8 and statuses(res) == {S.PASS}, [r.reason for r in res]


def test_power_brake_at_idle_fails_every_gpu() -> None:
    res = thermal.throttle(doc_from_outputs({"nvidia_smi_q": BRAKE_Q}), exp())
    assert len(res) == 8 and statuses(res) == {S.FAIL}
    assert "HW Power Brake Slowdown" in res[3].reason and res[3].reason.startswith("GPU 3 (")


def test_sram_uncorrectable_fails() -> None:
    doc = doc_from_outputs({"nvidia_smi_q": pub("nvidia-smi", "FAIL-sram-uncorrectable")})
    (r,) = memory_errors.ecc(doc, exp())
    assert r.status is S.FAIL and "1 uncorrectable SRAM" in r.reason and "aggregate SRAM uncorrectable 5" in r.reason


def test_row_remap_pending_after_xid63_fails() -> None:
    doc = doc_from_outputs({"nvidia_smi_q": pub("nvidia-smi", "FAIL-rowremap-pending-after-xid63")})
    (r,) = memory_errors.row_remap(doc, exp("h100", 1))
    assert r.status is S.FAIL and "pending" in r.reason and r.gpu == 0


def test_page_retirement_pending_blacklist_names_the_gpus() -> None:
    doc = doc_from_outputs({"nvidia_smi_q": pub("nvidia-smi", "FAIL-edited-pending-blacklist")})
    res = memory_errors.row_remap(doc, exp())
    failed = [r for r in res if r.status is S.FAIL]
    assert [r.gpu for r in failed] == [1, 3, 5, 7]
    assert "GPU 1 (0002:00:00.0)" in failed[0].reason and "DBE 61" in failed[0].reason
    ok = memory_errors.row_remap(doc_from_outputs({"nvidia_smi_q": pub("nvidia-smi", "PAGE_RETIREMENT__8xA100__ok")}),
                                 exp())
    assert statuses(ok) == {S.PASS}


def test_wrong_memory_clock_for_h200_fails() -> None:
    res = thermal.clocks(doc_from_outputs({"nvidia_smi_q": H100_Q}), exp("h200"))  # 2619 MHz is H100 memory
    assert statuses(res) == {S.FAIL} and "max memory clock 2619 MHz < 3201" in res[0].reason


# ---- NVLink: expected link count from the catalog, never a fixed 18 ------------------------------------------

ZERO = {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def _nvlink_doc(name: str) -> dict[str, Any]:
    return doc_from_outputs({"nvidia_smi_nvlink_s": pub("nvidia-smi", name), "nvidia_smi_nvlink_e": ""})


def test_h100_18_links_pass() -> None:
    doc = _nvlink_doc("nvlink-s-i0__H100-SXM")
    doc["nvidia_smi"]["nvlink_errors"] = {"0": {"0": ZERO}}
    (r,) = nvlink.nvlink(doc, exp("h100", 8))  # one GPU's excerpt of an 8-GPU node
    assert r.status is S.PASS and "18 of 18" in r.reason


def test_h800_8_links_fail_on_an_18_link_sku() -> None:
    res = nvlink.nvlink(_nvlink_doc("8xH800-8links"), exp("h100"))
    assert statuses(res) == {S.FAIL} and "8 of 18 NVLinks active" in res[0].reason and "GPU 0" in res[0].reason


def test_12_links_pass_on_a_12_link_sku_partial_nvlink_trap() -> None:
    doc = _nvlink_doc("nvlink-s-i7__A100__ok")
    doc["nvidia_smi"]["nvlink_errors"] = {"7": {"0": ZERO}}
    (r,) = nvlink.nvlink(doc, exp("h100-nvl", 2))  # 12 x 25 GB/s by design (AzNHC #162)
    assert r.status is S.PASS and "12 of 12" in r.reason
    (bad,) = nvlink.nvlink(doc, exp("h100", 8))
    assert bad.status is S.FAIL and "12 of 18" in bad.reason


def test_all_links_inactive_fails() -> None:
    (r,) = nvlink.nvlink(_nvlink_doc("FAIL-all-links-inactive"), exp("h100-nvl", 2))
    assert r.status is S.FAIL and r.reason == "GPU 6: all NVLinks inactive"


# ---- kernel log: Xid / SXid with allow-list ------------------------------------------------------------------

def test_gpud_dmesg_xid_fails_with_the_pci_address() -> None:
    doc = doc_from_outputs({"kernel_log": pub("dmesg", "FAIL-xid48-63-94")})
    (r,) = xid.xid(doc, exp())
    assert r.status is S.FAIL and "PCI 0000:19:00" in r.reason and "Xid 48, 63, 94 x9" in r.reason


def test_imbue_lines_fail_xid_and_warn_the_non_fatal_sxid() -> None:
    """The Xids fail; SXid 12028 is non-fatal and warns (issue 34: DCGM's check_non_fatal is off by default)."""
    doc = doc_from_outputs({"kernel_log": pub("dmesg", "FAIL-xid94-xid64-sxid12028")})
    res = xid.xid(doc, exp())
    assert statuses(res) == {S.FAIL, S.WARN}
    assert next(r for r in res if "SXid" in r.reason).status is S.WARN
    reasons = " | ".join(r.reason for r in res)
    assert "0000:0f:00" in reasons and "Xid 64, 94" in reasons and "NVSwitch 0000:85:00.0: SXid 12028" in reasons


def test_fabric_manager_non_fatal_sxid_warns_unless_allowed() -> None:
    doc = doc_from_outputs({"kernel_log": pub("fabricmanager", "SXid12028")})
    (r,) = xid.xid(doc, exp())
    assert r.status is S.WARN and "SXid 12028" in r.reason and "non-fatal" in r.reason
    (ok,) = xid.xid(doc, exp(sxid_allow=[12028]))
    assert ok.status is S.PASS


def test_peermem_noise_is_no_xid() -> None:
    (r,) = xid.xid(doc_from_outputs({"kernel_log": pub("dmesg", "kmsg__FAIL-nvidia-peermem")}), exp())
    assert r.status is S.PASS


def test_unreadable_kernel_log_is_error() -> None:
    (r,) = xid.xid(doc_from_outputs({}), exp())
    assert r.status is S.ERROR


# ---- PCIe endpoints and ACS (lspci) --------------------------------------------------------------------------

def test_benign_downgraded_switch_port_is_not_judged() -> None:
    doc = doc_from_outputs({"lspci_vvv": pub("lspci", "EXCERPT-gpu-cx7-and-benign-downgraded-switchport")})
    res = pcie.pcie_link(doc, exp("h100", 1))
    assert statuses(res) == {S.PASS}
    assert sorted(r.hca or f"gpu{r.gpu}" for r in res) == ["0000:1a:00.0", "0000:1b:00.0", "gpu0"]


def test_full_hgx_lspci_passes_pcie_and_acs() -> None:
    doc = doc_from_outputs({"lspci_vvv": pub("lspci", "8gpu-CX7-PEX890xx")})
    res = pcie.pcie_link(doc, exp())
    gpus = [r for r in res if r.gpu is not None]
    assert len(gpus) == 8 and statuses(res) == {S.PASS}
    (a,) = host_settings.acs(doc, exp())
    assert a.status is S.PASS and a.measured["bridges_checked"] > 0


def test_acs_redirect_above_a_gpu_fails() -> None:
    text = pub("lspci", "EXCERPT-gpu-cx7-and-benign-downgraded-switchport").replace(
        "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir-", "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+", 1)
    (a,) = host_settings.acs(doc_from_outputs({"lspci_vvv": text}), exp())
    assert a.status is S.FAIL and "0000:17:03.0" in a.reason


def test_gpu_down_trained_in_lspci_fails() -> None:
    text = pub("lspci", "EXCERPT-gpu-cx7-and-benign-downgraded-switchport")
    gpu_block = text.index("19:00.0 3D controller")
    edited = text[:gpu_block] + text[gpu_block:].replace("LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)",
                                                          "LnkSta:\tSpeed 32GT/s (ok), Width x8 (downgraded)", 1)
    res = pcie.pcie_link(doc_from_outputs({"lspci_vvv": edited}), exp("h100", 1))
    g = next(r for r in res if r.gpu == 0)
    assert g.status is S.FAIL and "x8" in g.reason


def test_nic_limited_by_x8_in_kernel_log_fails() -> None:
    doc = doc_from_outputs({"kernel_log": pub("dmesg", "FAIL-xid94-xid64-sxid12028")})
    res = [r for r in pcie.pcie_link(doc, exp()) if r.hca]
    assert [r.status for r in res] == [S.FAIL] and "NIC 0000:9c:00.0" in res[0].reason and "x8" in res[0].reason


def test_iommu_translated_fails_and_pt_passes() -> None:
    d = doc_from_outputs({}, cmdline="quiet intel_iommu=on", iommu_groups=120)
    assert iommu_status(d) is S.FAIL
    assert iommu_status(doc_from_outputs({}, cmdline="quiet intel_iommu=on iommu=pt", iommu_groups=120)) is S.PASS


def iommu_status(doc: dict[str, Any]) -> S:
    (r,) = host_settings.iommu(doc, exp())
    return r.status


def test_peermem_required_with_gdr() -> None:
    (r,) = host_settings.peermem(doc_from_outputs({}, modules=["nvidia"]), exp())
    assert r.status is S.FAIL and "nvidia_peermem" in r.reason
    (ok,) = host_settings.peermem(doc_from_outputs({}, modules=["nvidia", "nvidia_peermem"]), exp())
    assert ok.status is S.PASS



def test_peermem_is_not_demanded_where_dma_buf_carries_gpudirect() -> None:
    """Issue 28, finding 2: with the open kernel modules (every supported branch) GPUDirect RDMA goes through
    DMA-BUF, over DOCA too, so provision no longer loads nvidia-peermem there and the gate must not demand it."""
    doca = dataclasses.replace(exp(), driver_branch="580", rdma_stack="doca")
    (r,) = host_settings.peermem(doc_from_outputs({}, modules=["nvidia"]), doca)
    assert r.status is S.PASS and "DMA-BUF" in r.reason and "open kernel modules" in r.reason


def test_the_gpudirect_path_follows_the_kernel_modules_and_the_stack() -> None:
    m = matrix.load()
    assert m.gpudirect_path("580", "doca") == m.gpudirect_path("580", "distro") == "dmabuf"
    assert m.gpudirect_path("999", "doca") is None
    closed = m.model_copy(update={"driver_branches": {
        "580": m.driver_branches["580"].model_copy(update={"open_kernel_modules": False})}})
    assert closed.gpudirect_path("580", "doca") == "peermem"
    assert closed.gpudirect_path("580", "distro") == "none"


# ---- DCGM (3.x and 4.x JSON, text table, exit code) ----------------------------------------------------------

def _dcgm(name: str, rc: int = 0, level: int = 1) -> dict[str, Any]:
    return doc_from_outputs({"dcgmi_diag": pub("dcgmi", name)}, dcgm_rc=rc, dcgm_level=level)


def test_dcgm_3x_r1_and_r3_pass() -> None:
    (r1,) = diagnostics.dcgm(_dcgm("diag-r1-j__1xTesla-T4"), exp(profile="quick"))
    assert r1.status is S.PASS and "3.x" in r1.reason
    (r3,) = diagnostics.dcgm(_dcgm("diag-r3-j__1xTesla-T4", level=3), exp())
    assert r3.status is S.PASS  # the EUD Skip is optional, not a required plugin


def test_dcgm_4x_persistence_fail_exit_226() -> None:
    (r,) = diagnostics.dcgm(_dcgm("DCGM4.2.3", rc=226), exp(profile="quick"))
    assert r.status is S.FAIL and "software failed on GPU 0" in r.reason and "Persistence mode" in r.reason


def test_dcgm_malformed_is_error() -> None:
    (r,) = diagnostics.dcgm(_dcgm("MALFORMED-handedited"), exp(profile="quick"))
    assert r.status is S.ERROR and "malformed" in r.reason


def test_dcgm_text_failures_name_the_gpu() -> None:
    (mem,) = diagnostics.dcgm(_dcgm("FAIL-gpu-memory-thermal-violation", level=2), exp(dcgm_level=2))
    assert mem.status is S.FAIL and "GPU Memory failed on GPU 0" in mem.reason
    (dep,) = diagnostics.dcgm(_dcgm("FAIL-uncorrectable-mem-rowremap-pending", level=3), exp())
    assert dep.status is S.FAIL and "GPU 3" in dep.reason
    (table,) = diagnostics.dcgm(_dcgm("DCGM4.0.0-pass-table", level=3), exp())
    assert table.status is S.PASS


def test_dcgm_required_plugin_skip_fails() -> None:
    doc = json.loads(pub("dcgmi", "diag-r3-j__1xTesla-T4"))
    for cat in doc["DCGM GPU Diagnostic"]["test_categories"]:
        for t in cat["tests"]:
            if t["name"] == "Memory Bandwidth":
                t["results"][0]["status"] = "Skip"
    d = doc_from_outputs({"dcgmi_diag": json.dumps(doc)}, dcgm_level=3)
    (r,) = diagnostics.dcgm(d, exp())
    assert r.status is S.FAIL and "required plugin Memory Bandwidth skipped" in r.reason


def test_dcgm_flaky_nvbandwidth_passing_alone_warns() -> None:
    doc = json.loads(pub("dcgmi", "diag-r3-j__1xTesla-T4"))
    doc["DCGM GPU Diagnostic"]["test_categories"][-1]["tests"].append(
        {"name": "nvbandwidth", "results": [{"gpu_ids": "2", "status": "Fail",
                                             "warnings": "memory copy utilization for GPU 2 is greater than 10%"}]})
    d = doc_from_outputs({"dcgmi_diag": json.dumps(doc)}, dcgm_level=3, dcgm_rc=1)
    (failed,) = diagnostics.dcgm(d, exp())
    assert failed.status is S.FAIL and "nvbandwidth failed on GPU 2" in failed.reason
    alone = {"schema": "3.x", "version": None,
             "tests": [{"name": "nvbandwidth", "category": None, "summary": None,
                        "results": [{"gpus": [2], "status": "pass", "warnings": [], "info": None}]}]}
    d["dcgm"]["retries"] = [{"plugin": "nvbandwidth", "rc": 0, "parsed": alone}]
    (warned,) = diagnostics.dcgm(d, exp())
    assert warned.status is S.WARN and "passed when retried alone" in warned.reason


def test_dcgm_absent_is_error_and_level_too_low_is_error() -> None:
    (r,) = diagnostics.dcgm(doc_from_outputs({}), exp())
    assert r.status is S.ERROR and "not installed" in r.reason
    (low,) = diagnostics.dcgm(_dcgm("diag-r1-j__1xTesla-T4"), exp(profile="standard"))
    assert low.status is S.ERROR and "spec asks for 3" in low.reason


# ---- nccl-tests single node ----------------------------------------------------------------------------------

def _nccl(name: str) -> dict[str, Any]:
    return doc_from_outputs({"all_reduce_perf": pub("nccl-tests", name)})


def test_8x_h100_nvls_476_passes_the_nvls_floor() -> None:
    (r,) = nccl.nccl_allreduce(_nccl("healthy-476GBps"), exp(nccl=NcclSettings(algo="nvls")))
    assert r.status is S.PASS and r.measured["max_busbw_gbps"] == pytest.approx(476.53)
    assert r.measured["pct_of_nvlink_peak"] == pytest.approx(99.7, abs=0.1)  # information only


def test_8x_h100_nvls_against_a_stricter_spec_floor_fails() -> None:
    (r,) = nccl.nccl_allreduce(_nccl("healthy-476GBps"), exp(floors=Floors(nccl_busbw_gbps=490)))
    assert r.status is S.FAIL and "476.5" in r.reason and "below 490" in r.reason


def test_wrong_results_fail_even_at_any_bandwidth() -> None:
    (r,) = nccl.nccl_allreduce(_nccl("FAIL-wrong-nonzero"), exp(floors=Floors(nccl_busbw_gbps=0.1),
                                                                   nccl=NcclSettings(min_bytes=1)))
    assert r.status is S.FAIL and "#wrong=" in r.reason and "first at 524288 B" in r.reason


def test_validation_off_warns_and_gates_on_max_not_avg() -> None:
    doc = _nccl("healthy-235GBps-validation-off")
    (r,) = nccl.nccl_allreduce(doc, exp("h100", floors=Floors(nccl_busbw_gbps=200)))
    assert r.status is S.WARN and "validation off" in r.reason
    assert r.measured["avg_bus_bandwidth_not_gated"] == pytest.approx(68.4048)  # far below the floor: ignored


def test_sweep_without_large_sizes_is_error() -> None:
    (r,) = nccl.nccl_allreduce(_nccl("healthy-476GBps"), exp(nccl=NcclSettings(algo="nvls", min_bytes=16 << 30)))
    assert r.status is S.ERROR and "no size >=" in r.reason


def test_multinode_capture_is_rejected_by_the_single_node_gate() -> None:
    (r,) = nccl.nccl_allreduce(_nccl("DEGRADED-155GBps"), exp())
    assert r.status is S.ERROR and "16 ranks" in r.reason  # multi-node is the fabric certification's gate


# ---- gpu-burn: exit code never trusted -----------------------------------------------------------------------

def test_gpu_burn_faulty_fails_ok_passes() -> None:
    (bad,) = compute.gpu_burn(doc_from_outputs({"gpu_burn": pub("gpu-burn", "FAIL-all-FAULTY")}), exp("h100", 16))
    assert bad.status is S.FAIL and "GPU 0, 1, 2" in bad.reason and "exit code 0 ignored" in bad.reason
    (ok,) = compute.gpu_burn(doc_from_outputs({"gpu_burn": pub("gpu-burn", "ok-all-GPUs")}), exp("h100", 8))
    assert ok.status is S.PASS


# ---- nvbandwidth (format only: the fixture's numbers were edited for tests upstream) ---------------------------

def test_nvbandwidth_feeds_h2d_when_torch_is_absent() -> None:
    from gridready.certify import transfer
    doc = doc_from_outputs({"nvbandwidth": pub("nvbandwidth", "GH200")})
    res = transfer.h2d_bandwidth(doc, exp("h100", 1))
    assert [r.gpu for r in res] == [0, 1, 2] and res[0].measured == {"h2d": 369.36, "d2h": 295.15}
    assert res[2].status is S.ERROR  # no device->host figure for column 2: never a pass on missing data
    (none,) = transfer.h2d_bandwidth(doc_from_outputs({}), exp())
    assert none.status is S.ERROR and "nvbandwidth not run" in none.reason
