"""probe.offline.doc_from_outputs: the probe document built from captured tool outputs, section by section, with the
same parsers as the live probe (real captures from tests/fixtures), and the sections left out without an output."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.probe import SCHEMA, dcgm, gpu_burn, kernel_log, lspci, nccl_tests, nvbandwidth, nvsmi, sysfs
from gridready.probe.offline import doc_from_outputs
from tests.unit.certify.fixtures_io import FIX, pub
from tests.unit.probe.fake_node import SMI_NVLINK_S, SMI_Q_TEXT, SMI_Q_XML, SMI_QUERY_CSV

NCCL_J = FIX / "h200x1" / "nccl-tests-J"
AR_TEXT = (NCCL_J / "all_reduce_perf.txt").read_text()
AR_JSON = (NCCL_J / "all_reduce_perf.json").read_text()
NVL_E = "GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: Replay Errors: 3\n"
SYSFS_LINKS = (FIX / "h200x2" / "sysfs-pci-links.txt").read_text()
DCGM_JSON = pub("dcgmi", "diag-r3-j__1xTesla-T4__DCGM3.x-pass")
DCGM_TEXT = pub("dcgmi", "diag-r3__4xGPU-25b6")
EXCERPT = "[  100.0] NVRM: Xid (PCI:0000:19:00): 79, pid=1, GPU has fallen off the bus.\n"
BOOT = "[    0.000000] Linux version 6.8.0\n" + EXCERPT


def test_no_outputs_and_the_defaults() -> None:
    assert doc_from_outputs({}) == {
        "schema": SCHEMA, "host": "fixture", "profile": "offline", "errors": [], "raw": {}, "tools": {},
        "wall_s": None, "system": {"cmdline": None, "iommu_groups": 0, "iommu_mode": None, "modules": None,
                                   "pcie_endpoints": [], "peermem_loaded": None}}


def test_raw_is_a_copy_of_the_outputs() -> None:
    outputs = {"gpu_burn": pub("gpu-burn", "8xA100")}
    doc = doc_from_outputs(outputs, host="node-3")
    assert doc["raw"] == outputs and doc["raw"] is not outputs and doc["host"] == "node-3"


def test_host_settings() -> None:
    sysd = doc_from_outputs({}, modules=["nvidia", "nvidia_peermem"], cmdline="quiet iommu=pt",
                            iommu_groups=17)["system"]
    assert sysd == {"cmdline": "quiet iommu=pt", "iommu_groups": 17,
                    "iommu_mode": sysfs.iommu_mode("quiet iommu=pt", 17), "modules": ["nvidia", "nvidia_peermem"],
                    "pcie_endpoints": [], "peermem_loaded": True}
    assert sysd["iommu_mode"] == "passthrough"
    assert doc_from_outputs({}, modules=["nvidia"], cmdline="", iommu_groups=0)["system"]["peermem_loaded"] is False
    assert doc_from_outputs({}, cmdline="")["system"]["iommu_mode"] == sysfs.iommu_mode("", 0)


@pytest.mark.parametrize(("mods", "loaded"), [
    (["nvidia", "nvidia_peermem"], True), (["nv_peer_mem", "mlx5_core"], True), (["nvidia", "peermem"], False),
    ([], False)])
def test_peermem_reads_as_the_live_probe_does(mods: list[str], loaded: bool) -> None:
    # probe/collect.py's system(): either module name (nvidia_peermem, or MLNX_OFED's legacy nv_peer_mem) is loaded
    assert doc_from_outputs({}, modules=mods)["system"]["peermem_loaded"] is loaded


def test_pcie_links_and_lspci() -> None:
    text = _first("lspci")
    sysd = doc_from_outputs({"sysfs_links": SYSFS_LINKS, "lspci_vvv": text})["system"]
    assert sysd["pcie_endpoints"] == sysfs.parse_sysfs_links_dump(SYSFS_LINKS) and sysd["pcie_endpoints"]
    assert sysd["lspci"] == lspci.parse(text)
    assert "lspci" not in doc_from_outputs({})["system"]


def _first(tool: str) -> str:
    return next(p for p in sorted((FIX / "public" / tool).iterdir()) if p.is_file()).read_text(errors="replace")


def test_nvidia_smi_every_view() -> None:
    smi = doc_from_outputs({"nvidia_smi_query": SMI_QUERY_CSV, "nvidia_smi_q_x": SMI_Q_XML,
                            "nvidia_smi_q": SMI_Q_TEXT, "nvidia_smi_nvlink_s": SMI_NVLINK_S,
                            "nvidia_smi_nvlink_e": NVL_E})["nvidia_smi"]
    assert smi == {"present": True, "query": nvsmi.parse_query_csv(SMI_QUERY_CSV), "q": nvsmi.parse_q_xml(SMI_Q_XML),
                   "nvlink_status": nvsmi.parse_nvlink_status(SMI_NVLINK_S),
                   "nvlink_errors": nvsmi.parse_nvlink_errors(NVL_E)}


def test_nvidia_smi_text_only_and_partial() -> None:
    smi = doc_from_outputs({"nvidia_smi_q": SMI_Q_TEXT})["nvidia_smi"]
    assert smi == {"present": True, "query": [], "q": nvsmi.parse_q(SMI_Q_TEXT), "nvlink_status": None,
                   "nvlink_errors": None}
    smi = doc_from_outputs({"nvidia_smi_topo": "GPU0 X"})["nvidia_smi"]  # any nvidia-smi output: the section
    assert smi == {"present": True, "query": [], "q": None, "nvlink_status": None, "nvlink_errors": None}
    assert "nvidia_smi" not in doc_from_outputs({"lspci_vvv": ""})


def test_kernel_log_from_boot_only_where_shown() -> None:
    doc = doc_from_outputs({"kernel_log": BOOT})
    assert doc["kernel_log"] == {"source": "fixture", **kernel_log.parse(BOOT), "from_boot": True}
    ex = doc_from_outputs({"kernel_log": EXCERPT})["kernel_log"]
    assert ex == {"source": "fixture", **kernel_log.parse(EXCERPT), "from_boot": None}  # unknown, not wrapped
    assert "kernel_log" not in doc_from_outputs({})


def test_dcgm_json_and_text() -> None:
    d = doc_from_outputs({"dcgmi_diag": DCGM_JSON})["dcgm"]
    assert d == {"present": True, "level": 1, "rc": 0, "timed_out": False, "parsed": dcgm.parse_json(DCGM_JSON),
                 "parse_error": None, "retries": []}
    t = doc_from_outputs({"dcgmi_diag": "  \n" + DCGM_JSON}, dcgm_rc=226, dcgm_level=3)["dcgm"]
    assert (t["rc"], t["level"], t["parsed"]) == (226, 3, dcgm.parse_json("  \n" + DCGM_JSON))
    x = doc_from_outputs({"dcgmi_diag": DCGM_TEXT}, dcgm_rc=None)["dcgm"]
    assert x["parsed"] == dcgm.parse_text(DCGM_TEXT) and x["rc"] is None and x["parse_error"] is None


def test_dcgm_unreadable_is_a_parse_error() -> None:
    with pytest.raises(ValueError) as exc:
        dcgm.parse_json("{not json")
    d = doc_from_outputs({"dcgmi_diag": "{not json"})["dcgm"]
    assert d["parsed"] is None and d["parse_error"] == str(exc.value)


def test_nccl_tests_text_json_and_other_collectives() -> None:
    ag = (NCCL_J / "all_gather_perf.txt").read_text()
    rs = (NCCL_J / "reduce_scatter_perf.txt").read_text()
    nt = doc_from_outputs({"all_reduce_perf": AR_TEXT, "all_reduce_perf_json": AR_JSON, "all_gather_perf": ag,
                           "reduce_scatter_perf": rs})["nccl_tests"]
    runs = [{"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_text(AR_TEXT)},
            {"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_json(AR_JSON)}]
    assert nt == {"present": True, "runs": runs, "collectives": {
        "all_reduce": {"runs": runs},
        "all_gather": {"runs": [{"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_text(ag)}]},
        "reduce_scatter": {"runs": [{"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_text(rs)}]}}}


@pytest.mark.parametrize("coll", ["all_gather", "reduce_scatter", "alltoall", "sendrecv"])
def test_nccl_tests_one_other_collective(coll: str) -> None:
    text = (NCCL_J / f"{coll}_perf.txt").read_text() if (NCCL_J / f"{coll}_perf.txt").exists() else AR_TEXT
    nt = doc_from_outputs({f"{coll}_perf": text})["nccl_tests"]
    assert nt == {"present": True, "runs": [], "collectives": {
        coll: {"runs": [{"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_text(text)}]}}}


def test_nccl_json_alone() -> None:
    nt = doc_from_outputs({"all_reduce_perf_json": AR_JSON})["nccl_tests"]
    assert nt["runs"] == [{"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_json(AR_JSON)}]
    assert "nccl_tests" not in doc_from_outputs({"sysfs_links": SYSFS_LINKS})


def test_nvbandwidth_and_gpu_burn() -> None:
    nvb = pub("nvbandwidth", "GH200")
    burn = pub("gpu-burn", "8xA100")
    doc = doc_from_outputs({"nvbandwidth": nvb, "gpu_burn": burn})
    assert doc["nvbandwidth"] == {"present": True, "tests": nvbandwidth.parse(nvb)["tests"]} and doc[
        "nvbandwidth"]["tests"]
    assert doc["gpu_burn"] == {"present": True, "rc": 0, "timed_out": False, "parsed": gpu_burn.parse(burn)}
    assert not {"nvbandwidth", "gpu_burn", "torch", "sdc", "goodput"} & set(doc_from_outputs({}))


def test_sdc_and_goodput(monkeypatch: pytest.MonkeyPatch) -> None:
    from gridready.probe import goodput, offline, sdc

    seen: list[tuple[str, str]] = []

    def sdc_parse(text: str) -> dict[str, Any]:
        seen.append(("sdc", text))
        return {"gpus": [{"index": 0}]}

    def goodput_parse(text: str) -> dict[str, Any]:
        seen.append(("goodput", text))
        return {"gpus": [{"tokens_per_s": 1.0}]}

    monkeypatch.setattr(sdc, "parse", sdc_parse)
    monkeypatch.setattr(goodput, "parse", goodput_parse)
    doc = offline.doc_from_outputs({"sdc": "S", "goodput": "G"})
    assert doc["sdc"] == {"present": True, "gpus": [{"index": 0}]}
    assert doc["goodput"] == {"present": True, "ran": True, "gpus": [{"tokens_per_s": 1.0}]}
    assert seen == [("sdc", "S"), ("goodput", "G")]
