"""Software and services: nvidia-smi present and answering, driver branch as pinned and identical on every GPU,
fabric manager state on NVSwitch SKUs, persistence mode."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import gpu_label, gpus
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def software_versions(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    smi = doc.get("nvidia_smi") or {}
    if not smi.get("present"):
        return [exp.result("software_versions", E, "nvidia-smi is not on PATH: driver not installed or not loaded",
                           evidence="tools.nvidia-smi")]
    drivers = {str(g["query"].get("driver_version")) for g in gpus(doc) if g["query"].get("driver_version")}
    q_driver = (smi.get("q") or {}).get("driver_version")
    if q_driver:
        drivers.add(str(q_driver))
    measured = {"driver": sorted(drivers), "cuda": (smi.get("q") or {}).get("cuda_version"),
                "torch": (doc.get("torch") or {}).get("version"),
                "nccl": ((doc.get("torch") or {}).get("allreduce") or {}).get("nccl")}
    if not drivers:
        return [exp.result("software_versions", E, "no driver version in the nvidia-smi output", measured=measured,
                           evidence="raw.nvidia_smi_query")]
    if len(drivers) > 1:
        return [exp.result("software_versions", F,
                           f"GPUs report different driver versions {', '.join(sorted(drivers))}",
                           measured=measured, evidence="raw.nvidia_smi_query")]
    driver = next(iter(drivers))
    if exp.driver_branch and not driver.startswith(exp.driver_branch + "."):
        return [exp.result("software_versions", F,
                           f"driver {driver} is not on the pinned branch {exp.driver_branch}", measured=measured,
                           expected=Expected(equals=exp.driver_branch, source="spec"), evidence="raw.nvidia_smi_q")]
    return [exp.result("software_versions", P, f"driver {driver} on every GPU"
                       + (f" (branch {exp.driver_branch} as pinned)" if exp.driver_branch else ""),
                       measured=measured, expected=Expected(equals=exp.driver_branch, source="spec")
                       if exp.driver_branch else None, evidence="raw.nvidia_smi_q")]


def services(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    """Shapes with NVSwitches need the fabric manager: nvidia-smi `Fabric State: Completed / Status: Success` per
    GPU, and the systemd unit active where it runs in this OS (bare-metal HGX; in a VM it runs in the host or a
    service VM, FM user guide "Virtualization models"). No NVSwitch in the shape: n/a, with the reason."""
    shape = exp.shape
    if not exp.sku.nvswitch or (shape is not None and not shape.nvswitch):
        where = f"a {shape.label} {exp.sku.name} node" if shape else exp.sku.name
        return [exp.not_applicable("services", f"no NVSwitch in {where}: fabric manager does not apply")]
    if shape is None:
        return [exp.shape_error("services")]
    rows = gpus(doc)
    if not rows or not any(g["q"] for g in rows):
        return [exp.result("services", E, "no nvidia-smi -q output: fabric manager state unknown",
                           evidence="raw.nvidia_smi_q")]
    bad = [f"{gpu_label(g)} fabric {g['q'].get('fabric', {}).get('state')}/{g['q'].get('fabric', {}).get('status')}"
           for g in rows if (g["q"].get("fabric") or {}).get("state") != "Completed"
           or (g["q"].get("fabric") or {}).get("status") != "Success"]
    svc = (doc.get("services") or {}).get("state") or {}
    fm = svc.get("nvidia-fabricmanager")
    measured = {"fabric": {gpu_label(g): g["q"].get("fabric") for g in rows}, "nvidia-fabricmanager": fm}
    if bad:
        return [exp.result("services", F, "fabric manager not ready: " + "; ".join(bad), measured=measured,
                           evidence="raw.nvidia_smi_q")]
    if shape.fabric_manager_on_node and fm is not None and fm != "active":
        return [exp.result("services", F, f"nvidia-fabricmanager unit is {fm}", measured=measured,
                           evidence="services.state")]
    return [exp.result("services", P, "fabric state Completed/Success on every GPU"
                       + ("" if fm else " (no systemd: unit state not read)"), measured=measured,
                       evidence="raw.nvidia_smi_q")]


def persistence_mode(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    rows = gpus(doc)
    if not rows:
        return [exp.result("persistence_mode", E, "no GPU rows from nvidia-smi", evidence="raw.nvidia_smi_query")]
    out = []
    for g in rows:
        mode = g["query"].get("persistence_mode") or g["q"].get("persistence_mode")
        if mode is None:
            out.append(exp.result("persistence_mode", E, f"{gpu_label(g)}: persistence mode not reported",
                                  gpu=g["index"], evidence="raw.nvidia_smi_q"))
        elif mode != "Enabled" and exp.spec.host.persistence_mode:
            out.append(exp.result("persistence_mode", F, f"{gpu_label(g)}: persistence mode {mode}", gpu=g["index"],
                                  measured=mode, expected=Expected(equals="Enabled", source="spec"),
                                  evidence="raw.nvidia_smi_q"))
        else:
            out.append(exp.result("persistence_mode", P, f"{gpu_label(g)}: persistence mode {mode}", gpu=g["index"],
                                  measured=mode, evidence="raw.nvidia_smi_q"))
    return out
