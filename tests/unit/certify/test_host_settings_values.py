"""The host settings gates' verdicts per case (ANCH 3.10): IOMMU mode against the spec, ACS redirect on bridges above
GPUs/NICs (real HGX H100 `lspci -vvv` captures), nvidia_peermem by the GPUDirect RDMA path of the driver branch and
RDMA stack; with the reasons, expectations and evidence an operator reads."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import host_settings
from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import pub


def _exp(branch: str | None = None, stack: str | None = None, gdr: bool = True, **host: Any) -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup("h100"), gpus=8,  # type: ignore[arg-type]
                        spec=CertificationSpec(host=host), driver_branch=branch, rdma_stack=stack,
                        gpudirect_rdma=gdr)


def _one(fn: Any, doc: dict[str, Any], exp: Expectations) -> Any:
    (r,) = fn(doc, exp)
    assert r.node == "n1"
    return r


# -- iommu ---------------------------------------------------------------------------------------------------------

def test_iommu_not_read_is_an_error() -> None:
    r = _one(host_settings.iommu, {}, _exp())
    assert r.gate == "iommu" and r.status is S.ERROR
    assert r.reason == "IOMMU state not read (no /proc/cmdline or iommu_groups)"
    assert r.measured == {"mode": None, "groups": None, "cmdline": None}
    assert r.expected == Expected(equals="off_or_passthrough", source="spec")
    assert r.evidence == "system.cmdline"


def test_translating_iommu_fails_with_the_group_count() -> None:
    doc = doc_from_outputs({}, cmdline="quiet intel_iommu=on", iommu_groups=120)
    r = _one(host_settings.iommu, doc, _exp())
    assert r.status is S.FAIL
    assert r.reason == ("IOMMU translating DMA (120 groups, no iommu=pt on the kernel command line): peer-to-peer "
                        "and GPUDirect traffic slows down")
    assert r.measured == {"mode": "translated", "groups": 120, "cmdline": "quiet intel_iommu=on"}
    assert r.expected == Expected(equals="off_or_passthrough", source="spec")
    assert r.evidence == "system.cmdline"


def test_translating_iommu_is_recorded_when_the_spec_accepts_any() -> None:
    doc = doc_from_outputs({}, cmdline="quiet intel_iommu=on", iommu_groups=120)
    r = _one(host_settings.iommu, doc, _exp(iommu="any"))
    assert r.status is S.PASS
    assert r.reason == "IOMMU translated (120 groups)"
    assert r.expected == Expected(equals="any", source="spec")


def test_passthrough_iommu_passes() -> None:
    doc = doc_from_outputs({}, cmdline="quiet intel_iommu=on iommu=pt", iommu_groups=120)
    r = _one(host_settings.iommu, doc, _exp())
    assert r.status is S.PASS
    assert r.reason == f"IOMMU {doc['system']['iommu_mode']} (120 groups)"
    assert r.measured["mode"] != "translated"


# -- acs -----------------------------------------------------------------------------------------------------------

EXCERPT = "EXCERPT-gpu-cx7-and-benign-downgraded-switchport"
CTL_OFF = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir-"


@pytest.mark.parametrize("system", [{}, {"lspci": None}, {"lspci": {}}], ids=["absent", "none", "empty"])
def test_acs_unreadable_warns_and_records_unknown(system: dict[str, Any]) -> None:
    r = _one(host_settings.acs, {"system": system}, _exp())
    assert r.gate == "acs" and r.status is S.WARN
    assert r.reason == "ACS not readable on this node (lspci absent or unreadable); recorded as unknown"
    assert r.measured is None
    assert r.expected == Expected(equals="disabled", source="spec")
    assert r.evidence == "tools.lspci"


def test_full_hgx_tree_with_acs_off_passes_with_the_bridge_count() -> None:
    r = _one(host_settings.acs, doc_from_outputs({"lspci_vvv": pub("lspci", "8gpu-CX7-PEX890xx")}), _exp())
    assert r.status is S.PASS
    assert r.reason == "ACS redirect off on the 27 bridges above GPUs/NICs"
    assert r.measured == {"bridges_checked": 27, "redirect_enabled": []}
    assert r.expected == Expected(equals="disabled", source="spec")
    assert r.evidence == "raw.lspci_vvv"


@pytest.mark.parametrize("ctl", ["ReqRedir+ CmpltRedir-", "ReqRedir- CmpltRedir+", "ReqRedir+ CmpltRedir+"])
def test_redirect_above_a_gpu_fails_naming_the_bridge(ctl: str) -> None:
    text = pub("lspci", EXCERPT).replace(CTL_OFF, f"ACSCtl:\tSrcValid+ TransBlk- {ctl}", 1)
    r = _one(host_settings.acs, doc_from_outputs({"lspci_vvv": text}), _exp())
    assert r.status is S.FAIL
    assert r.reason.startswith("ACS redirect enabled on bridges above GPUs/NICs: 0000:17:03.0 (above ")
    assert r.measured == {"bridges_checked": 1, "redirect_enabled": ["0000:17:03.0"]}
    assert r.expected == Expected(equals="disabled", source="spec")
    assert r.evidence == "raw.lspci_vvv"


def test_redirect_is_recorded_when_the_spec_accepts_any() -> None:
    text = pub("lspci", EXCERPT).replace(CTL_OFF, "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+", 1)
    r = _one(host_settings.acs, doc_from_outputs({"lspci_vvv": text}), _exp(acs="any"))
    assert r.status is S.PASS
    assert r.measured["redirect_enabled"] == ["0000:17:03.0"]
    assert r.expected == Expected(equals="any", source="spec")


def test_redirect_reason_lists_six_bridges_and_three_endpoints_each() -> None:
    bridges = [{"bdf": f"0000:{b:02x}:00.0", "acs_ctl": {"ReqRedir": True, "CmpltRedir": True},
                "endpoints_below": [f"0000:{b + 1:02x}:0{i}.0" for i in range(4)]} for b in range(0x10, 0x20, 2)]
    r = _one(host_settings.acs, {"system": {"lspci": {"bridges": bridges}}}, _exp())
    assert r.status is S.FAIL
    assert r.reason == ("ACS redirect enabled on bridges above GPUs/NICs: "
                        + ", ".join(f"0000:{b:02x}:00.0 (above 0000:{b + 1:02x}:00.0, 0000:{b + 1:02x}:01.0, "
                                    f"0000:{b + 1:02x}:02.0)" for b in range(0x10, 0x1c, 2)))
    assert r.measured["bridges_checked"] == 8 and len(r.measured["redirect_enabled"]) == 8


# -- peermem -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loaded, branch, stack, gdr, status, reason, want, source", [
    # unknown branch, DOCA or unknown stack: peermem is the path and is demanded
    (False, None, "doca", True, S.FAIL, "nvidia_peermem is not loaded with the doca RDMA stack: no GPUDirect RDMA",
     "loaded", "spec"),
    (False, None, None, True, S.FAIL, "nvidia_peermem is not loaded: no GPUDirect RDMA", "loaded", "spec"),
    (True, None, "doca", True, S.PASS, "nvidia_peermem loaded", "loaded", "spec"),
    # inbox stack: DMA-BUF
    (False, None, "distro", True, S.PASS, "nvidia_peermem not loaded, not used with the inbox RDMA stack: GPUDirect "
     "RDMA goes through DMA-BUF", "any", "software.rdma_stack: distro (DMA-BUF)"),
    (True, None, "distro", True, S.PASS, "nvidia_peermem loaded", "any", "software.rdma_stack: distro (DMA-BUF)"),
    (False, "580", "distro", True, S.PASS, "nvidia_peermem not loaded, not used with the inbox RDMA stack: GPUDirect "
     "RDMA goes through DMA-BUF", "any", "software.rdma_stack: distro (DMA-BUF)"),
    # open kernel modules of a known branch: DMA-BUF
    (False, "580", "doca", True, S.PASS, "nvidia_peermem not loaded, not used with the open kernel modules: "
     "GPUDirect RDMA goes through DMA-BUF", "any", "driver branch 580: open kernel modules (DMA-BUF)"),
    (True, "580", "doca", True, S.PASS, "nvidia_peermem loaded", "any",
     "driver branch 580: open kernel modules (DMA-BUF)"),
    # no GPUDirect RDMA in the node group: nothing demanded
    (False, None, "doca", False, S.PASS, "nvidia_peermem not loaded (not required)", "any", "spec"),
    (False, "580", "distro", False, S.PASS, "nvidia_peermem not loaded (not required)", "any", "spec"),
])
def test_peermem_by_path(loaded: bool, branch: str | None, stack: str | None, gdr: bool, status: S, reason: str,
                         want: str, source: str) -> None:
    r = _one(host_settings.peermem, {"system": {"peermem_loaded": loaded}}, _exp(branch, stack, gdr))
    assert r.gate == "peermem" and r.status is status
    assert r.reason == reason
    assert r.measured is loaded
    assert r.expected == Expected(equals=want, source=source)
    assert r.evidence == "system.modules"


def test_peermem_not_demanded_when_the_spec_accepts_any() -> None:
    r = _one(host_settings.peermem, {"system": {"peermem_loaded": False}}, _exp(None, "doca", peermem="any"))
    assert r.status is S.PASS
    assert r.reason == "nvidia_peermem not loaded (not required)"
    assert r.expected == Expected(equals="any", source="spec")


def test_unreadable_modules_are_an_error() -> None:
    r = _one(host_settings.peermem, {}, _exp(None, "doca"))
    assert r.status is S.ERROR
    assert r.reason == "loaded modules not readable (/proc/modules)"
    assert r.measured is None
    assert r.expected == Expected(equals="loaded", source="spec")
    assert r.evidence == "system.modules"
