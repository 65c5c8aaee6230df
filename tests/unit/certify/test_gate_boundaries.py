"""Each limit of a gate at its edge, on the real captures: one step inside passes, one step past fails. These kill
the wrong edits of issue #35 that the wider tests let through (benchmarks/named_mutants.py applies them)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gridready.certify import memory_errors, pcie, thermal
from gridready.certify.judge import judge_node
from gridready.certify.result import GateStatus as S
from gridready.probe import nvsmi
from gridready.probe.offline import doc_from_outputs
from tests.unit.certify.fixtures_io import H200, group, h200_doc, pub, spec
from tests.unit.certify.test_gates_public import exp

GIB = 1 << 30


def _gate(doc: dict[str, Any], gate: str, **kw: Any) -> list[Any]:
    return [r for r in judge_node(spec(**kw), group(), doc, node="h200x2").gates if r.gate == gate]


def _q_set(key: str, value: str, gpu: int = 1, nth: int = 0) -> str:
    """The h200x2 `nvidia-smi -q` with the `nth` `key : <any>` line of one GPU's section set to `value`."""
    text = (H200 / "nvidia-smi-q.txt").read_text()
    cut = text.index("GPU 00000000:00:07.0")
    parts = [text[:cut], text[cut:]]
    hits = list(re.finditer(rf"(\n\s*{re.escape(key)}\s+: )([^\n]*)\n", parts[gpu]))
    m = hits[nth]
    parts[gpu] = parts[gpu][:m.start(2)] + value + parts[gpu][m.end(2):]
    return "".join(parts)


# ---- nccl: the floor applies at sizes >= min_bytes -----------------------------------------------------------

@pytest.mark.parametrize(("min_bytes", "at", "busbw"), [(8 * GIB, 8 * GIB, 344.90), (4 * GIB, 4 * GIB, 346.98)])
def test_nccl_size_equal_to_min_bytes_is_gated(min_bytes: int, at: int, busbw: float) -> None:
    """all_reduce_perf.txt sweeps to 8 GiB with its max (346.98) at 4 GiB: min_bytes equal to a swept size keeps it."""
    (r,) = _gate(h200_doc(), "nccl_allreduce", nccl={"min_bytes": min_bytes})
    assert r.status is S.PASS, r.reason
    assert r.measured["at_bytes"] == at and r.measured["max_busbw_gbps"] == pytest.approx(busbw)


def test_nccl_min_bytes_past_the_sweep_is_an_error() -> None:
    (r,) = _gate(h200_doc(), "nccl_allreduce", nccl={"min_bytes": 8 * GIB + 1})
    assert r.status is S.ERROR and "no size >= 8589934593 B" in r.reason and "largest 8589934592 B" in r.reason


# ---- ECC: the correctable limits -----------------------------------------------------------------------------

@pytest.mark.parametrize(("count", "status"), [("20000000", S.PASS), ("20000001", S.FAIL)])
def test_ecc_dram_correctable_volatile_limit(count: str, status: S) -> None:
    doc = h200_doc(nvidia_smi_q=_q_set("DRAM Correctable", count))  # the first one is under Volatile
    r = next(r for r in _gate(doc, "ecc") if r.gpu == 1)
    assert r.measured["volatile_dram_ce"] == int(count)
    assert r.status is status, r.reason
    if status is S.FAIL:
        assert r.reason == "GPU 1 (0000:00:07.0): DRAM correctable 20000001 > 20000000"


@pytest.mark.parametrize(("count", "status"), [("10000", S.PASS), ("10001", S.FAIL)])
def test_ecc_sram_correctable_aggregate_limit(count: str, status: S) -> None:
    doc = h200_doc(nvidia_smi_q=_q_set("SRAM Correctable", count, nth=1))  # the second one is under Aggregate
    r = next(r for r in _gate(doc, "ecc") if r.gpu == 1)
    assert r.measured["aggregate_sram_ce"] == int(count)
    assert r.status is status, r.reason
    if status is S.FAIL:
        assert r.reason == "GPU 1 (0000:00:07.0): aggregate SRAM correctable 10001 > 10000"


def test_ecc_limits_come_from_the_spec() -> None:
    doc = h200_doc(nvidia_smi_q=_q_set("SRAM Correctable", "11", nth=1))
    r = next(r for r in _gate(doc, "ecc", limits={"sram_ce_aggregate": 10}) if r.gpu == 1)
    assert r.status is S.FAIL and "aggregate SRAM correctable 11 > 10" in r.reason


# ---- thermal: memory temperature and the power-limit tolerance -------------------------------------------------

@pytest.mark.parametrize(("mem_c", "status"), [("95 C", S.PASS), ("96 C", S.FAIL)])
def test_memory_temperature_alone_fails_the_gate(mem_c: str, status: S) -> None:
    """The GPU stays at its captured temperature; only HBM crosses the catalog's 95 C."""
    doc = h200_doc(nvidia_smi_q=_q_set("Memory Current Temp", mem_c, gpu=0))
    r = next(r for r in thermal.temperature(doc, exp("h200", 2, "passthrough")) if r.gpu == 0)
    assert r.measured["memory"] == float(mem_c.split()[0]) and r.measured["gpu"] < 60
    assert r.status is status, r.reason
    if status is S.FAIL:
        assert "memory 96.0 C above" in r.reason and "/ 95 C" in r.reason


@pytest.mark.parametrize(("watts", "status"), [("693.00 W", S.PASS), ("692.90 W", S.FAIL), ("650.00 W", S.FAIL)])
def test_power_limit_tolerance_is_one_percent(watts: str, status: S) -> None:
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().replace("700.00 W", watts)
    res = thermal.power(h200_doc(nvidia_smi_query=csv), exp("h200", 2, "passthrough"))
    assert [r.measured for r in res] == [float(watts.split()[0])] * 2
    assert {r.status for r in res} == {status}


# ---- PCIe: replays and NIC width -----------------------------------------------------------------------------

def _after(doc: dict[str, Any], q: str) -> dict[str, Any]:
    """`doc` with the probe's health snapshot after the load: the h200x2 capture with `q` as its `nvidia-smi -q`."""
    later = doc_from_outputs({"nvidia_smi_q": q, "nvidia_smi_query": (H200 / "nvidia-smi-query-gpu.csv").read_text(),
                              "kernel_log": doc["raw"]["kernel_log"]})
    doc["after"] = {"nvidia_smi": later["nvidia_smi"], "kernel_log": later["kernel_log"]}
    return doc


@pytest.mark.parametrize(("during", "status"), [(80, S.WARN), (81, S.FAIL)])
def test_pcie_replays_during_the_run_at_the_limit(during: int, status: S) -> None:
    """GPU 0 of the capture starts at 3 replays since reset; the limit (80) holds for the replays of the run (80
    during it only warn, as the 83 since reset are over the limit)."""
    doc = _after(h200_doc(), _q_set("Replays Since Reset", str(3 + during), gpu=0))
    r = next(r for r in pcie.pcie_link(doc, exp("h200", 2, "passthrough")) if r.gpu == 0)
    assert r.status is status, r.reason
    if status is S.FAIL:
        assert r.reason == ("GPU 0 (0000:00:06.0): 81 PCIe replays during the certification run "
                            "(limit 80; 84 since reset)")


def test_captured_replays_since_reset_warn_over_a_lower_limit() -> None:
    """GPU 0 of the capture reports 3 replays since reset: nothing under the default 80, a warning over a limit of
    2 (history before the run), a failure when 3 more come during the run."""
    doc = h200_doc()
    (ok,) = [r for r in pcie.pcie_link(doc, exp("h200", 2, "passthrough")) if r.gpu == 0]
    assert ok.status is S.PASS and ok.measured["replays"] == 3
    low = exp("h200", 2, "passthrough", limits={"pcie_replays": 2})
    (old,) = [r for r in pcie.pcie_link(doc, low) if r.gpu == 0]
    assert old.status is S.WARN and "3 PCIe replays since reset (limit 2 per run" in old.reason
    (bad,) = [r for r in pcie.pcie_link(_after(h200_doc(), _q_set("Replays Since Reset", "6", gpu=0)), low)
              if r.gpu == 0]
    assert bad.status is S.FAIL and "3 PCIe replays during the certification run (limit 2" in bad.reason


def test_pcie_replay_limit_zero_allows_none() -> None:
    """A limit of 0 is a limit (it once read as "no limit" and passed any count)."""
    zero = exp("h200", 2, "passthrough", limits={"pcie_replays": 0})
    doc = _after(h200_doc(), _q_set("Replays Since Reset", "4", gpu=0))
    (r,) = [r for r in pcie.pcie_link(doc, zero) if r.gpu == 0]
    assert r.status is S.FAIL and r.reason.startswith("GPU 0 (0000:00:06.0): 1 PCIe replays during the certification")
    (ok,) = [r for r in pcie.pcie_link(doc, zero) if r.gpu == 1]
    assert ok.status is S.PASS and ok.measured["replays"] == 0


def _cx7(lnksta: str) -> dict[str, Any]:
    text = pub("lspci", "EXCERPT-gpu-cx7-and-benign-downgraded-switchport")
    nic = text.index("1a:00.0 Ethernet controller")
    edited = text[:nic] + text[nic:].replace("LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)", lnksta, 1)
    assert edited != text or lnksta.endswith("Width x16 (ok)")
    return doc_from_outputs({"lspci_vvv": edited})


def test_nic_trained_narrower_than_it_can_fails() -> None:
    res = [r for r in pcie.pcie_link(_cx7("LnkSta:\tSpeed 32GT/s (ok), Width x8 (downgraded)"), exp("h100", 1))
           if r.hca == "0000:1a:00.0"]
    assert [r.status for r in res] == [S.FAIL]
    assert res[0].reason == "NIC 0000:1a:00.0: link at Gen5 x8, capable of Gen5 x16"
    assert res[0].measured == {"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}


def test_nic_trained_slower_than_it_can_fails() -> None:
    res = [r for r in pcie.pcie_link(_cx7("LnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)"), exp("h100", 1))
           if r.hca == "0000:1a:00.0"]
    assert [r.status for r in res] == [S.FAIL] and "link at Gen4 x16, capable of Gen5 x16" in res[0].reason


# ---- retired pages: the old driver's `Pending` key -----------------------------------------------------------

V100_Q = "old-retired-pages-Pending-key"


@pytest.mark.parametrize(("flag", "pending", "status"), [("No", False, S.PASS), ("Yes", True, S.FAIL)])
def test_old_driver_retired_pages_pending(flag: str, pending: bool, status: S) -> None:
    """Driver 410's `Retired Pages` prints `Pending`, not `Pending Page Blacklist` (real V100 capture)."""
    text = pub("nvidia-smi", V100_Q)
    block = text.index("    Retired Pages\n")
    pad = "Pending                     : "
    edited = text[:block] + text[block:].replace(pad + "No", pad + flag, 1)
    (g,) = nvsmi.parse_q(edited)["gpus"]
    assert g["retired_pages"] == {"pending": pending, "single_bit": 0, "double_bit": 0}
    (r,) = memory_errors.row_remap(doc_from_outputs({"nvidia_smi_q": edited}), exp("h100", 1))
    assert r.status is status, r.reason


# ---- PCIe: each source of a GPU link reading alone; which NICs carry GPU traffic -------------------------------

def test_gpu_link_read_from_nvidia_smi_q_alone() -> None:
    """Only `nvidia-smi -q` (no query CSV, NVML or sysfs): its GPU Link Info decides, GPU 1 trained at x8."""
    text = (H200 / "nvidia-smi-q.txt").read_text()
    cut = text.index("GPU 00000000:00:07.0")
    q = text[:cut] + text[cut:].replace("Current                                : 16x",
                                        "Current                                : 8x", 1)
    res = pcie.pcie_link(doc_from_outputs({"nvidia_smi_q": q}), exp("h200", 2, "passthrough"))
    by_gpu = {r.gpu: r for r in res}
    assert by_gpu[0].status is S.PASS and by_gpu[0].measured["gen_max"] == 5 and by_gpu[0].measured["width_max"] == 16
    assert by_gpu[1].status is S.FAIL and by_gpu[1].reason == "GPU 1 (0000:00:07.0): link trained at x8, expected x16"
    assert by_gpu[0].measured["replays"] == 3  # GPU 0's "Replays Since Reset" of the capture


def test_gpu_link_read_from_the_query_csv_alone() -> None:
    csv = (H200 / "nvidia-smi-query-gpu.csv").read_text().splitlines()
    csv[2] = csv[2].replace(", 5, 5, 16, 16,", ", 5, 4, 16, 16,")  # GPU 1: capable of Gen4 only
    res = pcie.pcie_link(doc_from_outputs({"nvidia_smi_query": "\n".join(csv) + "\n"}), exp("h200", 2, "passthrough"))
    by_gpu = {r.gpu: r for r in res}
    assert by_gpu[0].status is S.PASS and by_gpu[0].measured["gen_max"] == 5
    assert by_gpu[1].status is S.FAIL and "capable of only Gen4 x16" in by_gpu[1].reason


def _nic(bdf: str, vendor: str | None, desc: str, width: int) -> dict[str, Any]:
    return {"bdf": bdf, "kind": "nic", "vendor": vendor, "desc": desc, "source": "pcie_endpoints", "gen_current": 5,
            "gen_max": 5, "width_current": width, "width_max": 16}


def test_fabric_nics_by_vendor_or_name_and_management_nics_ignored() -> None:
    doc = {"system": {"pcie_endpoints": [
        _nic("0000:1a:00.0", "0x15b3", "", 8),  # Mellanox by vendor id alone
        _nic("0000:2a:00.0", None, "Mellanox Technologies MT2910 Family [ConnectX-7]", 8),
        _nic("0000:3a:00.0", None, "Ethernet controller: ConnectX-7 Family", 16),
        _nic("0000:4a:00.0", None, "MT43244 BlueField-3 integrated ConnectX-7 network controller", 8),
        _nic("0000:5a:00.0", "0x14e4", "Broadcom Inc. BCM57414 NetXtreme-E 10Gb/25Gb", 1),  # a management LOM
        {"bdf": "0000:6a:00.0", "kind": "nic", "vendor": "0x1af4", "desc": "Virtio network device"},  # no link
    ]}}
    res = [r for r in pcie.pcie_link(doc, exp("h100", 1)) if r.hca]
    assert {r.hca: r.status for r in res} == {"0000:1a:00.0": S.FAIL, "0000:2a:00.0": S.FAIL, "0000:3a:00.0": S.PASS,
                                              "0000:4a:00.0": S.FAIL}
    ok = next(r for r in res if r.hca == "0000:3a:00.0")
    assert ok.reason == "NIC 0000:3a:00.0: Gen5 x16" and ok.evidence == "system.pcie_endpoints"
    assert ok.expected is not None and ok.expected.equals == "Gen5 x16"
