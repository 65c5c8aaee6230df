"""The real 2x H200 captures certify; faults built by editing copies of them fail the right gate, naming the GPU."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from gridready.certify.judge import judge_node
from gridready.certify.result import GateStatus
from gridready.probe import nvsmi
from tests.unit.certify.fixtures_io import H200, group, h200_doc, h200_outputs, probe_quick, spec

README = {  # ../shared/fixtures/h200x2/README.md headline figures (per GPU)
    "bf16_8192": 800.0, "fp8": 1361.0, "hbm": 4.11, "h2d": 55.4, "d2h": 55.3, "peer": 395.4, "busbw_8g": 351.65,
}


def _by_gate(v: Any, gate: str) -> list[Any]:
    return [r for r in v.gates if r.gate == gate]


def _judge(doc: dict[str, Any], **kw: Any) -> Any:
    return judge_node(spec(**kw), group(), doc, node="h200x2")


def test_captures_certify() -> None:
    v = _judge(h200_doc())
    bad = [f"{r.gate}: {r.reason}" for r in v.gates if r.status not in (GateStatus.PASS, GateStatus.SKIPPED)]
    assert v.certified, v.blocking
    assert bad == ["acs: ACS not readable on this node (lspci absent or unreadable); recorded as unknown"]
    nccl = _by_gate(v, "nccl_allreduce")[0]
    assert nccl.measured["source"] == "nccl-tests" and nccl.measured["max_busbw_gbps"] == pytest.approx(346.98)
    assert nccl.measured["avg_bus_bandwidth_not_gated"] == pytest.approx(110.211)  # recorded, never gated


def test_dcgm_not_applicable_is_skipped_not_passed() -> None:
    v = _judge(h200_doc())
    (d,) = _by_gate(v, "dcgm")
    assert d.status is GateStatus.SKIPPED and d.required is False and "not applicable" in d.reason


def test_real_probe_certifies_and_matches_readme_within_5pct() -> None:
    doc = probe_quick()
    v = _judge(doc, not_applicable=["dcgm", "peermem"])
    assert v.certified, v.blocking
    for g in doc["torch"]["gpus"]:
        assert g["bf16_gemm_tflops"]["8192"] == pytest.approx(README["bf16_8192"], rel=0.05)
        assert g["fp8_gemm_tflops"]["16384"] == pytest.approx(README["fp8"], rel=0.05)
        assert g["hbm_copy_tbps"] == pytest.approx(README["hbm"], rel=0.05)
        assert g["h2d_gbps"] == pytest.approx(README["h2d"], rel=0.05)
        assert g["d2h_gbps"] == pytest.approx(README["d2h"], rel=0.05)
    assert doc["torch"]["peer"][0]["gbps"] == pytest.approx(README["peer"], rel=0.05)
    sweep = {r["bytes"]: r["busbw_gbps"] for r in doc["torch"]["allreduce"]["sizes"]}
    assert sweep[8 << 30] == pytest.approx(README["busbw_8g"], rel=0.05)
    assert doc["wall_s"] < 120  # quick profile goal: under 2 minutes for 2 GPUs


def test_pcie_gen4_x8_from_edited_csv_fails() -> None:
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().splitlines()
    csv[1] = csv[1].replace(", 5, 5, 16, 16,", ", 4, 5, 8, 16,")  # GPU 0: Gen4 x8 current, Gen5 x16 max
    v = _judge(h200_doc(nvidia_smi_query="\n".join(csv) + "\n"))
    r = next(r for r in _by_gate(v, "pcie_link") if r.gpu == 0)
    assert r.status is GateStatus.FAIL and "GPU 0" in r.reason and "x8" in r.reason
    assert not v.certified and next(r for r in _by_gate(v, "pcie_link") if r.gpu == 1).status is GateStatus.PASS


def test_pcie_gen_drop_at_idle_is_not_a_failure_but_under_load_is() -> None:
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().replace(", 5, 5, 16, 16,", ", 1, 5, 16, 16,")
    q = (H200 / "nvidia-smi-q.txt").read_text().replace("Current                                : 5",
                                                        "Current                                : 1")
    doc = h200_doc(nvidia_smi_query=csv, nvidia_smi_q=q)
    idle = [r for r in _judge(doc).gates if r.gate == "pcie_link" and r.gpu is not None]
    assert {r.status for r in idle} == {GateStatus.WARN}  # power saving at idle, no load reading: recorded
    loaded = probe_quick()
    loaded["torch"]["gpus"][1]["pcie_under_load"]["nvml"]["gen_current"] = 4
    loaded["torch"]["gpus"][1]["pcie_under_load"]["sysfs"]["gen_current"] = 4
    v = _judge(loaded, not_applicable=["dcgm", "peermem"])
    r = next(r for r in _by_gate(v, "pcie_link") if r.gpu == 1)
    assert r.status is GateStatus.FAIL and "GPU 1" in r.reason and "Gen4 under load" in r.reason


def test_nvlink_links_down_fail_naming_the_gpu() -> None:
    text = (H200 / "nvidia-smi-nvlink.txt").read_text()
    head, sep, tail = text.partition("GPU 1:")
    tail = tail.replace("Link 16: 26.562 GB/s", "Link 16: <inactive>", 1).replace(
        "Link 17: 26.562 GB/s", "Link 17: <inactive>", 1)
    v = _judge(h200_doc(nvidia_smi_nvlink_s=head + sep + tail))
    r = next(r for r in _by_gate(v, "nvlink") if r.gpu == 1)
    assert r.status is GateStatus.FAIL and "GPU 1" in r.reason and "16 of 18" in r.reason and "16, 17" in r.reason


def test_nvlink_recovery_errors_during_the_run_fail_and_since_reset_warn() -> None:
    """Issue 34: the counters run since the GPU's reset; only the run's own recovery errors fail (this test used to
    fail a node on a count since reset)."""
    errs = probe_quick()["raw"]["nvidia_smi_nvlink_e"].replace("Recovery Errors: 0", "Recovery Errors: 3", 1)
    doc = h200_doc()
    doc["after"] = {"nvidia_smi": {**doc["nvidia_smi"], "nvlink_errors": nvsmi.parse_nvlink_errors(errs)}}
    r = next(r for r in _by_gate(_judge(doc), "nvlink") if r.gpu == 0)
    assert r.status is GateStatus.FAIL and "during the certification run recovery=3" in r.reason
    old = next(r for r in _by_gate(_judge(h200_doc(nvidia_smi_nvlink_e=errs)), "nvlink") if r.gpu == 0)
    assert old.status is GateStatus.WARN and "since reset recovery=3" in old.reason


def _q_edit(key: str, old: str, new: str, gpu: int = 1) -> str:
    """Set the first `key : old` of one GPU's section of the h200x2 `nvidia-smi -q` capture to `new`."""
    text = (H200 / "nvidia-smi-q.txt").read_text()
    cut = text.index("GPU 00000000:00:07.0")
    parts = [text[:cut], text[cut:]]
    parts[gpu] = re.sub(rf"(\n\s*{re.escape(key)}\s+: ){re.escape(old)}\n", rf"\g<1>{new}\n", parts[gpu], count=1)
    return "".join(parts)


def test_ecc_uncorrectable_fails() -> None:
    q = _q_edit("DRAM Uncorrectable", "0", "2")
    v = _judge(h200_doc(nvidia_smi_q=q))
    r = next(r for r in _by_gate(v, "ecc") if r.gpu == 1)
    assert r.status is GateStatus.FAIL and "GPU 1 (0000:00:07.0)" in r.reason and "uncorrectable DRAM" in r.reason


def test_row_remap_pending_fails() -> None:
    q = _q_edit("Pending", "No", "Yes", gpu=0)
    v = _judge(h200_doc(nvidia_smi_q=q))
    r = next(r for r in _by_gate(v, "row_remap") if r.gpu == 0)
    assert r.status is GateStatus.FAIL and "GPU 0" in r.reason and "pending" in r.reason


def test_hw_slowdown_fails() -> None:
    q = _q_edit("HW Slowdown", "Not Active", "Active")
    v = _judge(h200_doc(nvidia_smi_q=q))
    r = next(r for r in _by_gate(v, "throttle") if r.gpu == 1)
    assert r.status is GateStatus.FAIL and "HW Slowdown" in r.reason


def test_xid_in_kernel_log_fails_and_allow_list_passes() -> None:
    line = "[  812.1] NVRM: Xid (PCI:0000:00:07): 79, pid=0, name=python3, GPU has fallen off the bus.\n"
    v = _judge(h200_doc(kernel_log=line))
    (r,) = _by_gate(v, "xid")
    assert r.status is GateStatus.FAIL and r.gpu == 1 and "GPU 1" in r.reason and "Xid 79" in r.reason
    app = "[  812.1] NVRM: Xid (PCI:0000:00:07): 13, pid=77, name=python3, Graphics SM Warp Exception\n"
    (ok,) = _by_gate(_judge(h200_doc(kernel_log=app)), "xid")
    assert ok.status is GateStatus.PASS and "1 allow-listed" in ok.reason


def test_power_capped_and_wrong_sku_fail() -> None:
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().replace("700.00 W", "500.00 W")
    v = _judge(h200_doc(nvidia_smi_query=csv))
    assert all(r.status is GateStatus.FAIL for r in _by_gate(v, "power"))
    h100 = judge_node(spec(), group("H100-SXM5-80GB"), h200_doc(), node="h200x2")
    (inv,) = _by_gate(h100, "gpu_inventory")
    assert inv.status is GateStatus.FAIL and "0x2330" in inv.reason and "GPU 0" in inv.reason


def test_gpu_count_mismatch_fails() -> None:
    v = judge_node(spec(), group(gpus=8), h200_doc(), node="h200x2")
    (inv,) = _by_gate(v, "gpu_inventory")
    assert inv.status is GateStatus.FAIL and "2 GPUs found" in inv.reason


def test_low_gemm_and_hbm_fail_per_gpu() -> None:
    tp = json.loads((H200 / "torch_probe.json").read_text())
    tp["gpu1"]["bf16_gemm_8192_tflops"] = 400.0
    tp["gpu1"]["bf16_gemm_16384_tflops"] = 390.0
    tp["gpu0"]["hbm_copy_rw_TBps"] = 2.0
    v = _judge(h200_doc(torch_probe=json.dumps(tp)))
    g1 = next(r for r in _by_gate(v, "gemm_bf16") if r.gpu == 1)
    assert g1.status is GateStatus.FAIL and "GPU 1" in g1.reason and g1.measured == 400.0
    h0 = next(r for r in _by_gate(v, "hbm_bandwidth") if r.gpu == 0)
    assert h0.status is GateStatus.FAIL and "GPU 0" in h0.reason


def test_low_h2d_and_peer_fail() -> None:
    tp = json.loads((H200 / "torch_probe.json").read_text())
    tp["gpu0"]["h2d_GBps"] = 26.0  # what a Gen4 x8 or wrong-NUMA host copy looks like
    tp["p2p_0to1_GBps"] = 120.0
    v = _judge(h200_doc(torch_probe=json.dumps(tp)))
    h = next(r for r in _by_gate(v, "h2d_bandwidth") if r.gpu == 0)
    assert h.status is GateStatus.FAIL and "GPU 0" in h.reason
    (p,) = _by_gate(v, "peer_bandwidth")
    assert p.status is GateStatus.FAIL and "GPU 0->1" in p.reason


def test_nccl_low_busbw_fails_on_the_max_not_the_average() -> None:
    rows = []
    for ln in (H200 / "all_reduce_perf.txt").read_text().splitlines():
        tok = ln.split()
        if tok and tok[0].isdigit() and int(tok[0]) >= 1 << 30:
            ln = ln.replace(tok[7], "250.00").replace(tok[11], "250.00")  # busbw columns of the gated sizes
        rows.append(ln)
    v = _judge(h200_doc(all_reduce_perf="\n".join(rows)))
    (r,) = _by_gate(v, "nccl_allreduce")
    assert r.status is GateStatus.FAIL and "below 312" in r.reason and "2 GPUs" in r.reason


def test_nccl_torch_sweep_used_without_nccl_tests() -> None:
    out = h200_outputs()
    del out["all_reduce_perf"]
    v = judge_node(spec(), group(), _doc_without_nccl_tests(out), node="h200x2")
    (r,) = _by_gate(v, "nccl_allreduce")
    assert r.status is GateStatus.PASS and r.measured["source"] == "torch.distributed"
    assert r.measured["max_busbw_gbps"] == pytest.approx(351.65, rel=1e-3)


def _doc_without_nccl_tests(out: dict[str, str]) -> dict[str, Any]:
    from gridready.probe.offline import doc_from_outputs
    return doc_from_outputs(out, host="h200x2", modules=["nvidia"], cmdline="quiet")


def test_missing_data_is_error_never_pass() -> None:
    doc = copy.deepcopy(probe_quick())
    del doc["torch"]
    doc["nvidia_smi"]["nvlink_status"] = None
    doc["nvml"] = {"present": False}
    v = _judge(doc, not_applicable=["dcgm", "peermem"])
    for gate in ("gemm_bf16", "hbm_bandwidth", "h2d_bandwidth", "peer_bandwidth", "nccl_allreduce", "nvlink"):
        assert {r.status for r in _by_gate(v, gate)} == {GateStatus.ERROR}, gate
    assert not v.certified
