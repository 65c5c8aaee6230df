"""Build a probe document from captured tool outputs (fixtures, simulator captures, a support bundle).

The same parsers as the live probe, so a gate tested on a fixture is tested on what the probe would record.
Keys of `outputs`: nvidia_smi_query, nvidia_smi_q_x (preferred),
nvidia_smi_q, nvidia_smi_nvlink_s, nvidia_smi_nvlink_e, lspci_vvv,
kernel_log, sysfs_links (one line per device dump), dcgmi_diag (JSON or text table), all_reduce_perf (text),
all_reduce_perf_json,
all_gather_perf / reduce_scatter_perf / alltoall_perf / sendrecv_perf (text), gpu_burn, nvbandwidth,
torch_probe (the fixtures' torch_probe.json text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from . import SCHEMA, dcgm, goodput, gpu_burn, kernel_log, lspci, nccl_tests, nvbandwidth, nvsmi, sdc, sysfs


def _torch_from_fixture(text: str) -> dict[str, Any]:
    """fixtures/h200x2/torch_probe.json (gpuN: {bf16_gemm_<n>_tflops ...}) -> the probe's `torch` section."""
    src = json.loads(text)
    gpus = []
    for i in range(int(src.get("device_count", 0))):
        g = src.get(f"gpu{i}", {})
        gpus.append({
            "index": i, "name": src.get("devices", [None] * (i + 1))[i],
            "bf16_gemm_tflops": {m.group(1): v for k, v in g.items() if (m := re.match(r"bf16_gemm_(\d+)_tflops", k))},
            "fp8_gemm_tflops": {m.group(1): v for k, v in g.items() if (m := re.match(r"fp8_gemm_(\d+)_tflops", k))},
            "hbm_copy_tbps": g.get("hbm_copy_rw_TBps"), "h2d_gbps": g.get("h2d_GBps"), "d2h_gbps": g.get("d2h_GBps"),
        })
    peer = []
    for k, v in src.items():
        if m := re.match(r"p2p_(\d+)to(\d+)_GBps", k):
            s, d = int(m.group(1)), int(m.group(2))
            peer.append({"src": s, "dst": d, "access": src.get(f"p2p_access_{s}_{d}", True), "gbps": v})
    ar = [{"bytes": r["bytes"], "time_us": r["us"], "algbw_gbps": r["algbw_GBps"], "busbw_gbps": r["busbw_GBps"],
           "busbw_trials_gbps": [r["busbw_GBps"]]} for r in src.get("torch_allreduce", [])]
    return {"present": True, "version": src.get("torch"), "cuda": src.get("cuda"), "cuda_available": True,
            "device_count": len(gpus), "gpus": gpus, "peer": peer,
            "allreduce": {"world": len(gpus), "sizes": ar, "wrong": 0, "nccl": src.get("nccl"), "algo": "ring",
                          "env": {"NCCL_NVLS_ENABLE": "0"}} if ar else None}


def doc_from_outputs(outputs: Mapping[str, str], *, host: str = "fixture", dcgm_rc: int | None = 0,
                     dcgm_level: int = 1, modules: list[str] | None = None, cmdline: str | None = None,
                     iommu_groups: int = 0) -> dict[str, Any]:
    """A gridready.probe/1 document from raw outputs; sections without an output stay absent (gates error)."""
    doc: dict[str, Any] = {"schema": SCHEMA, "host": host, "profile": "offline", "errors": [], "raw": dict(outputs),
                           "tools": {}, "wall_s": None}
    if any(k.startswith("nvidia_smi") for k in outputs):
        doc["nvidia_smi"] = {
            "present": True,
            "query": nvsmi.parse_query_csv(outputs.get("nvidia_smi_query", "")),
            "q": nvsmi.parse_q_xml(outputs["nvidia_smi_q_x"]) if "nvidia_smi_q_x" in outputs else
            nvsmi.parse_q(outputs["nvidia_smi_q"]) if "nvidia_smi_q" in outputs else None,
            "nvlink_status": nvsmi.parse_nvlink_status(outputs["nvidia_smi_nvlink_s"])
            if "nvidia_smi_nvlink_s" in outputs else None,
            "nvlink_errors": nvsmi.parse_nvlink_errors(outputs["nvidia_smi_nvlink_e"])
            if "nvidia_smi_nvlink_e" in outputs else None,
        }
    host_doc: dict[str, Any] = {"cmdline": cmdline, "iommu_groups": iommu_groups,
                                "iommu_mode": sysfs.iommu_mode(cmdline, iommu_groups) if cmdline is not None else None,
                                "modules": modules, "pcie_endpoints": [],
                                "peermem_loaded": sysfs.peermem_loaded(modules)}
    if "sysfs_links" in outputs:
        host_doc["pcie_endpoints"] = sysfs.parse_sysfs_links_dump(outputs["sysfs_links"])
    if "lspci_vvv" in outputs:
        host_doc["lspci"] = lspci.parse(outputs["lspci_vvv"])
    doc["system"] = host_doc
    if "kernel_log" in outputs:
        parsed = kernel_log.parse(outputs["kernel_log"])
        # an excerpt without the boot lines is not known to be wrapped: from_boot only where the text shows it
        doc["kernel_log"] = {"source": "fixture", **parsed, "from_boot": parsed["from_boot"] or None}
    if "dcgmi_diag" in outputs:
        text = outputs["dcgmi_diag"]
        d: dict[str, Any] = {"present": True, "level": dcgm_level, "rc": dcgm_rc, "timed_out": False,
                             "parsed": None, "parse_error": None, "retries": []}
        try:
            d["parsed"] = dcgm.parse_json(text) if text.lstrip().startswith("{") else dcgm.parse_text(text)
        except ValueError as exc:
            d["parse_error"] = str(exc)
        doc["dcgm"] = d
    runs = []
    if "all_reduce_perf" in outputs:
        runs.append({"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_text(outputs["all_reduce_perf"])})
    if "all_reduce_perf_json" in outputs:
        runs.append({"rc": 0, "timed_out": False, "parsed": nccl_tests.parse_json(outputs["all_reduce_perf_json"])})
    per = {"all_reduce": {"runs": runs}} if runs else {}
    for coll in ("all_gather", "reduce_scatter", "alltoall", "sendrecv"):
        if f"{coll}_perf" in outputs:
            per[coll] = {"runs": [{"rc": 0, "timed_out": False,
                                   "parsed": nccl_tests.parse_text(outputs[f"{coll}_perf"])}]}
    if per:
        doc["nccl_tests"] = {"present": True, "runs": runs, "collectives": per}
    if "nvbandwidth" in outputs:
        doc["nvbandwidth"] = {"present": True, "tests": nvbandwidth.parse(outputs["nvbandwidth"])["tests"]}
    if "gpu_burn" in outputs:
        doc["gpu_burn"] = {"present": True, "rc": 0, "timed_out": False, "parsed": gpu_burn.parse(outputs["gpu_burn"])}
    if "torch_probe" in outputs:
        doc["torch"] = _torch_from_fixture(outputs["torch_probe"])
    if "sdc" in outputs:
        doc["sdc"] = {"present": True, **sdc.parse(outputs["sdc"])}
    if "goodput" in outputs:
        doc["goodput"] = {"present": True, "ran": True, **goodput.parse(outputs["goodput"])}
    return doc
