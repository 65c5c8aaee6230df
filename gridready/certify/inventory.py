"""GPU inventory: the node has the spec's GPU count, every one the spec's SKU (PCI device id)."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import gpu_label, gpus
from gridready.certify.result import Expected, GateResult, GateStatus


def gpu_inventory(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    rows = gpus(doc)
    if not rows:
        return [exp.result("gpu_inventory", GateStatus.ERROR, "no GPUs enumerated (nvidia-smi and NVML gave none)",
                           measured=0, expected=Expected(equals=exp.gpus, source="spec"),
                           evidence="raw.nvidia_smi_query")]
    wrong = []
    for g in rows:
        dev = (g["device_id"] or "").lower()
        dev4 = "0x" + dev[2:6] if dev.startswith("0x") and len(dev) == 10 else dev
        if dev4 != exp.sku.device_id:
            wrong.append(f"{gpu_label(g)} is {g['name']} device {g['device_id']}")
    measured = {"count": len(rows), "device_ids": sorted({str(g["device_id"]) for g in rows})}
    expected = Expected(equals={"count": exp.gpus, "device_id": exp.sku.device_id}, source="spec + catalog")
    if len(rows) != exp.gpus:
        return [exp.result("gpu_inventory", GateStatus.FAIL, f"{len(rows)} GPUs found, the spec expects {exp.gpus}",
                           measured=measured, expected=expected, evidence="raw.nvidia_smi_query")]
    if wrong:
        return [exp.result("gpu_inventory", GateStatus.FAIL,
                           f"not {exp.sku.name} ({exp.sku.device_id}): " + "; ".join(wrong),
                           measured=measured, expected=expected, evidence="raw.nvidia_smi_query")]
    return [exp.result("gpu_inventory", GateStatus.PASS, f"{len(rows)} x {exp.sku.name} ({exp.sku.device_id})",
                       measured=measured, expected=expected, evidence="raw.nvidia_smi_query")]
