"""The software gates' verdicts per case: driver versions (present, identical, on the pinned branch), fabric manager
state on NVSwitch shapes, persistence mode per GPU; with the reasons and figures an operator reads."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import software
from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec

BUSES = ["00000000:19:00.0", "00000000:3B:00.0"]
DONE = {"state": "Completed", "status": "Success"}


def _exp(sku: str = "h200", gpus: int = 8, platform: str = "baremetal", branch: str | None = None,
         **spec: Any) -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup(sku), gpus=gpus, spec=CertificationSpec(**spec),  # type: ignore[arg-type]
                        driver_branch=branch, platform=platform)


def _doc(query: list[dict[str, Any]] | None = None, q: list[dict[str, Any]] | None = None, present: bool = True,
         q_driver: str | None = None, fm: str | None = None, torch: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = [{"index": i, "pci.bus_id": BUSES[i], **r} for i, r in enumerate(query or [])]
    qs = [{"bus_id": BUSES[i], **g} for i, g in enumerate(q or [])]
    smi_q: dict[str, Any] = {"gpus": qs}
    if q_driver:
        smi_q["driver_version"] = q_driver
        smi_q["cuda_version"] = "13.0"
    doc: dict[str, Any] = {"nvidia_smi": {"present": present, "query": rows, "q": smi_q}}
    if fm is not None:
        doc["services"] = {"state": {"nvidia-fabricmanager": fm}}
    if torch is not None:
        doc["torch"] = torch
    return doc


def _one(fn: Any, doc: dict[str, Any], exp: Expectations) -> Any:
    (r,) = fn(doc, exp)
    assert r.node == "n1"
    return r


# -- software_versions ---------------------------------------------------------------------------------------------

def test_missing_nvidia_smi_is_an_error() -> None:
    r = _one(software.software_versions, _doc(present=False), _exp())
    assert r.gate == "software_versions" and r.status is S.ERROR
    assert r.reason == "nvidia-smi is not on PATH: driver not installed or not loaded"
    assert r.evidence == "tools.nvidia-smi"


def test_no_nvidia_smi_section_is_an_error() -> None:
    assert _one(software.software_versions, {}, _exp()).status is S.ERROR


def test_no_driver_version_is_an_error() -> None:
    r = _one(software.software_versions, _doc([{}, {"driver_version": ""}]), _exp())
    assert r.status is S.ERROR
    assert r.reason == "no driver version in the nvidia-smi output"
    assert r.measured == {"driver": [], "cuda": None, "torch": None, "nccl": None}
    assert r.evidence == "raw.nvidia_smi_query"


def test_gpus_on_different_drivers_fail() -> None:
    r = _one(software.software_versions, _doc([{"driver_version": "580.95.05"}, {"driver_version": "570.172.08"}]),
             _exp(branch="580"))
    assert r.status is S.FAIL
    assert r.reason == "GPUs report different driver versions 570.172.08, 580.95.05"
    assert r.measured["driver"] == ["570.172.08", "580.95.05"]
    assert r.evidence == "raw.nvidia_smi_query"


def test_nvidia_smi_q_driver_counts_against_the_rows() -> None:
    r = _one(software.software_versions, _doc([{"driver_version": "580.95.05"}], q_driver="580.82.07"), _exp())
    assert r.status is S.FAIL
    assert r.reason == "GPUs report different driver versions 580.82.07, 580.95.05"


def test_nvidia_smi_q_driver_alone_is_enough() -> None:
    r = _one(software.software_versions, _doc([{}], q_driver="580.95.05"), _exp())
    assert r.status is S.PASS and r.reason == "driver 580.95.05 on every GPU"
    assert r.measured["cuda"] == "13.0"


def test_driver_off_the_pinned_branch_fails() -> None:
    r = _one(software.software_versions, _doc([{"driver_version": "575.57.08"}] * 2), _exp(branch="580"))
    assert r.status is S.FAIL
    assert r.reason == "driver 575.57.08 is not on the pinned branch 580"
    assert r.measured == {"driver": ["575.57.08"], "cuda": None, "torch": None, "nccl": None}
    assert r.expected == Expected(equals="580", source="spec")
    assert r.evidence == "raw.nvidia_smi_q"


def test_branch_is_matched_on_the_whole_major_number() -> None:
    r = _one(software.software_versions, _doc([{"driver_version": "5801.2"}]), _exp(branch="580"))
    assert r.status is S.FAIL


def test_driver_on_the_pinned_branch_passes_with_the_figures() -> None:
    torch = {"version": "2.8.0+cu128", "allreduce": {"nccl": "2.27.3"}}
    r = _one(software.software_versions, _doc([{"driver_version": "580.95.05"}] * 2, q_driver="580.95.05",
                                              torch=torch), _exp(branch="580"))
    assert r.status is S.PASS
    assert r.reason == "driver 580.95.05 on every GPU (branch 580 as pinned)"
    assert r.measured == {"driver": ["580.95.05"], "cuda": "13.0", "torch": "2.8.0+cu128", "nccl": "2.27.3"}
    assert r.expected == Expected(equals="580", source="spec")
    assert r.evidence == "raw.nvidia_smi_q"


def test_without_a_pinned_branch_any_single_driver_passes() -> None:
    r = _one(software.software_versions, _doc([{"driver_version": 575.57}]), _exp())
    assert r.status is S.PASS
    assert r.reason == "driver 575.57 on every GPU"
    assert r.expected is None


# -- services (fabric manager) -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sku, gpus, platform, why", [
    ("h100-pcie", 8, "baremetal", "no NVSwitch in a 8 GPUs baremetal H100-PCIe-80GB node: fabric manager does not "
                                  "apply"),
    ("h100-pcie", 3, "baremetal", "no NVSwitch in H100-PCIe-80GB: fabric manager does not apply"),
    ("h200", 4, "baremetal", "no NVSwitch in a 4 GPUs baremetal H200-SXM-141GB node: fabric manager does not apply"),
])
def test_shapes_without_nvswitch_are_not_applicable(sku: str, gpus: int, platform: str, why: str) -> None:
    r = _one(software.services, _doc(), _exp(sku, gpus, platform))
    assert r.gate == "services" and r.status is S.SKIPPED
    assert r.reason == f"n/a: {why}"
    assert r.required is False


def test_unknown_shape_is_an_error() -> None:
    r = _one(software.services, _doc(), _exp("h200", 3))
    assert r.status is S.ERROR and "is not a shape the catalog knows" in r.reason


@pytest.mark.parametrize("doc", [_doc(), _doc([{}, {}])], ids=["no-rows", "no-q"])
def test_no_nvidia_smi_q_is_an_error(doc: dict[str, Any]) -> None:
    r = _one(software.services, doc, _exp())
    assert r.status is S.ERROR
    assert r.reason == "no nvidia-smi -q output: fabric manager state unknown"
    assert r.evidence == "raw.nvidia_smi_q"


@pytest.mark.parametrize("fabric, shown", [
    ({"state": "In Progress", "status": "N/A"}, "In Progress/N/A"),
    ({"state": "Completed", "status": "Failure"}, "Completed/Failure"),
    ({"state": "Not Started", "status": "Success"}, "Not Started/Success"),
    ({}, "None/None"),
])
def test_fabric_not_ready_fails_naming_the_gpu(fabric: dict[str, Any], shown: str) -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}, {"fabric": fabric}], fm="active"), _exp())
    assert r.status is S.FAIL
    assert r.reason == f"fabric manager not ready: GPU 1 (0000:3b:00.0) fabric {shown}"
    assert r.measured == {"fabric": {"GPU 0 (0000:19:00.0)": DONE, "GPU 1 (0000:3b:00.0)": fabric},
                          "nvidia-fabricmanager": "active"}
    assert r.evidence == "raw.nvidia_smi_q"


def test_gpu_without_a_fabric_section_fails() -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}, {"name": "NVIDIA H200"}]), _exp())
    assert r.status is S.FAIL
    assert r.reason == "fabric manager not ready: GPU 1 (0000:3b:00.0) fabric None/None"


def test_every_gpu_not_ready_is_listed() -> None:
    bad = {"state": "In Progress", "status": "N/A"}
    r = _one(software.services, _doc([{}, {}], [{"fabric": bad}, {"fabric": bad}]), _exp())
    assert r.reason == ("fabric manager not ready: GPU 0 (0000:19:00.0) fabric In Progress/N/A; "
                        "GPU 1 (0000:3b:00.0) fabric In Progress/N/A")


def test_inactive_unit_on_bare_metal_fails() -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}] * 2, fm="failed"), _exp())
    assert r.status is S.FAIL
    assert r.reason == "nvidia-fabricmanager unit is failed"
    assert r.measured["nvidia-fabricmanager"] == "failed"
    assert r.evidence == "services.state"


def test_unit_state_is_not_demanded_where_the_fabric_manager_runs_outside_the_vm() -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}] * 2, fm="inactive"), _exp(gpus=2,
                                                                                                platform="passthrough"))
    assert r.status is S.PASS
    assert r.reason == "fabric state Completed/Success on every GPU"


def test_ready_fabric_and_active_unit_pass() -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}] * 2, fm="active"), _exp())
    assert r.status is S.PASS
    assert r.reason == "fabric state Completed/Success on every GPU"
    assert r.measured == {"fabric": {"GPU 0 (0000:19:00.0)": DONE, "GPU 1 (0000:3b:00.0)": DONE},
                          "nvidia-fabricmanager": "active"}
    assert r.evidence == "raw.nvidia_smi_q"


def test_ready_fabric_without_systemd_passes_and_says_so() -> None:
    r = _one(software.services, _doc([{}, {}], [{"fabric": DONE}] * 2), _exp())
    assert r.status is S.PASS
    assert r.reason == "fabric state Completed/Success on every GPU (no systemd: unit state not read)"
    assert r.measured["nvidia-fabricmanager"] is None


# -- persistence_mode ----------------------------------------------------------------------------------------------

def test_no_gpu_rows_is_an_error() -> None:
    r = _one(software.persistence_mode, _doc(), _exp())
    assert r.gate == "persistence_mode" and r.status is S.ERROR
    assert r.reason == "no GPU rows from nvidia-smi"
    assert r.evidence == "raw.nvidia_smi_query"


@pytest.mark.parametrize("query, q, spec_on, status, reason, measured", [
    ({"persistence_mode": "Enabled"}, {}, True, S.PASS, "persistence mode Enabled", "Enabled"),
    ({}, {"persistence_mode": "Enabled"}, True, S.PASS, "persistence mode Enabled", "Enabled"),
    ({"persistence_mode": "Disabled"}, {}, True, S.FAIL, "persistence mode Disabled", "Disabled"),
    ({}, {"persistence_mode": "Disabled"}, True, S.FAIL, "persistence mode Disabled", "Disabled"),
    ({"persistence_mode": "Disabled"}, {}, False, S.PASS, "persistence mode Disabled", "Disabled"),
    ({"persistence_mode": "Enabled"}, {}, False, S.PASS, "persistence mode Enabled", "Enabled"),
    ({}, {}, True, S.ERROR, "persistence mode not reported", None),
    ({}, {}, False, S.ERROR, "persistence mode not reported", None),
])
def test_persistence_mode_per_gpu(query: dict[str, Any], q: dict[str, Any], spec_on: bool, status: S, reason: str,
                                  measured: str | None) -> None:
    doc = _doc([{"persistence_mode": "Enabled"}, query], [{}, q])
    first, r = software.persistence_mode(doc, _exp(host={"persistence_mode": spec_on}))
    assert (first.status, first.gpu, first.reason) == (S.PASS, 0, "GPU 0 (0000:19:00.0): persistence mode Enabled")
    assert r.gate == "persistence_mode" and r.gpu == 1
    assert r.status is status
    assert r.reason == f"GPU 1 (0000:3b:00.0): {reason}"
    assert r.measured == measured
    assert r.evidence == "raw.nvidia_smi_q"
    assert r.expected == (Expected(equals="Enabled", source="spec") if status is S.FAIL else None)
