"""IOMMU, ACS and nvidia-peermem: asserted per the spec (ANCH 3.10) and recorded, never changed.

ACS is read from `lspci -vvv` where it is installed and readable; only bridges above a GPU or NIC count (ACS on
unrelated switch ports is harmless). Where it cannot be read the gate warns: the setting is recorded as unknown.
"""

from __future__ import annotations

from typing import Any

from gridready import matrix
from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.probe.lspci import acs_redirects
from gridready.spec import iommu as iommu_rule

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def iommu(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    host = doc.get("system") or {}
    mode = host.get("iommu_mode")
    m = {"mode": mode, "groups": host.get("iommu_groups"), "cmdline": host.get("cmdline")}
    want = exp.spec.host.iommu
    kw: dict[str, Any] = {"measured": m, "expected": Expected(equals=want, source="spec"), "evidence": "system.cmdline"}
    if mode is None:
        return [exp.result("iommu", E, "IOMMU state not read (no /proc/cmdline or iommu_groups)", **kw)]
    if not iommu_rule.accepted(mode, want):
        return [exp.result("iommu", F, f"IOMMU translating DMA ({m['groups']} groups, no iommu=pt on the kernel "
                           "command line): peer-to-peer and GPUDirect traffic slows down", **kw)]
    return [exp.result("iommu", P, f"IOMMU {mode} ({m['groups']} groups)", **kw)]


def acs(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    lspci = (doc.get("system") or {}).get("lspci")
    want = exp.spec.host.acs
    if not lspci:
        return [exp.result("acs", W, "ACS not readable on this node (lspci absent or unreadable); recorded as "
                           "unknown", measured=None, expected=Expected(equals=want, source="spec"),
                           evidence="tools.lspci")]
    state = acs_redirects(lspci)
    m = {"bridges_checked": state["bridges_checked"], "redirect_enabled": state["redirect_enabled"]}
    kw: dict[str, Any] = {"measured": m, "expected": Expected(equals=want, source="spec"), "evidence": "raw.lspci_vvv"}
    if state["redirect_enabled"] and want == "disabled":
        return [exp.result("acs", F, "ACS redirect enabled on bridges above GPUs/NICs: " + ", ".join(
            f"{bdf} (above {', '.join(below[:3])})" for bdf, below in list(state["above"].items())[:6]), **kw)]
    return [exp.result("acs", P, f"ACS redirect off on the {state['bridges_checked']} bridges above GPUs/NICs", **kw)]


def peermem(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    """nvidia_peermem is GPUDirect RDMA's path only with the proprietary kernel modules over MLNX_OFED/DOCA-OFED
    (it needs their peer-memory API); with the open modules GPUDirect RDMA goes through DMA-BUF, and with the
    distribution's inbox stack peermem cannot load, so it is demanded only where it is the path
    (gridready.matrix.VersionMatrix.gpudirect_path). GPUDirect RDMA, "Using nvidia-peermem" / "Using DMA-BUF",
    https://docs.nvidia.com/cuda/gpudirect-rdma/index.html"""
    host = doc.get("system") or {}
    loaded = host.get("peermem_loaded")
    path = matrix.load().gpudirect_path(exp.driver_branch, exp.rdma_stack)
    inbox = exp.gpudirect_rdma and exp.rdma_stack == "distro"
    dmabuf = exp.gpudirect_rdma and (path == "dmabuf" or inbox)
    want = exp.spec.host.peermem if exp.gpudirect_rdma and not dmabuf else "any"
    source = ("software.rdma_stack: distro (DMA-BUF)" if inbox else
              f"driver branch {exp.driver_branch}: open kernel modules (DMA-BUF)" if dmabuf else "spec")
    kw: dict[str, Any] = {"measured": loaded, "expected": Expected(equals=want, source=source),
                          "evidence": "system.modules"}
    if loaded is None:
        return [exp.result("peermem", E, "loaded modules not readable (/proc/modules)", **kw)]
    if not loaded and want == "loaded":
        stack = f" with the {exp.rdma_stack} RDMA stack" if exp.rdma_stack else ""
        return [exp.result("peermem", F, f"nvidia_peermem is not loaded{stack}: no GPUDirect RDMA", **kw)]
    if dmabuf and not loaded:
        why = "the inbox RDMA stack" if inbox else "the open kernel modules"
        return [exp.result("peermem", P, f"nvidia_peermem not loaded, not used with {why}: GPUDirect RDMA goes "
                           "through DMA-BUF", **kw)]
    return [exp.result("peermem", P, "nvidia_peermem " + ("loaded" if loaded else "not loaded (not required)"), **kw)]
