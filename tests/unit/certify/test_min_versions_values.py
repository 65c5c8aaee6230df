"""Minimum versions at the value level: each minimum at its boundary (equal passes, one patch below fails, one
above passes), numeric order (4.10 after 4.9), the reason and the expected figures, and every source of a version."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import versions
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec


def exp(not_applicable: tuple[str, ...] = (), **mv: Any) -> Expectations:
    spec = {"min_versions": {"severity": "fail", "driver": ["580.95.05"], "dcgm": "4.5.3", **mv}}
    if not_applicable:
        spec["not_applicable"] = list(not_applicable)
    return Expectations(node="n1", sku=catalog.lookup("h200"), gpus=1, platform="passthrough",  # type: ignore[arg-type]
                        spec=CertificationSpec.model_validate(spec))


def doc(driver: str | None = "580.95.05", dcgm: str | None = "4.5.3", cuda: str | None = "13.0",
        nccl: str | None = "2.27.3") -> dict[str, Any]:
    q = {k: v for k, v in {"driver_version": driver, "cuda_version": cuda}.items() if v}
    return {"nvidia_smi": {"q": q}, "dcgm": {"parsed": {"version": dcgm}}, "torch": {"allreduce": {"nccl": nccl}}}


@pytest.mark.parametrize(("driver", "status"), [
    ("580.95.05", S.PASS), ("580.95.04", S.FAIL), ("580.95.06", S.PASS), ("580.105.08", S.PASS), ("580.9.99", S.FAIL),
])
def test_driver_boundary(driver, status):
    (r,) = versions.min_versions(doc(driver=driver), exp())
    assert r.status is status
    if status is S.FAIL:
        assert r.reason == f"below the minimum versions: driver {driver} < 580.95.05"


@pytest.mark.parametrize(("name", "minimum", "have", "ok"), [
    ("dcgm", "4.5.3", "4.5.3", True), ("dcgm", "4.5.3", "4.5.2", False), ("dcgm", "4.5.3", "4.10.0", True),
    ("cuda", "12.9", "12.9", True), ("cuda", "12.9", "12.8", False), ("cuda", "12.9", "13.0", True),
    ("nccl", "2.27.3", "2.27.3", True), ("nccl", "2.27.3", "2.27.2", False), ("nccl", "2.27.3", "2.28.0", True),
])
def test_component_boundaries(name, minimum, have, ok):
    (r,) = versions.min_versions(doc(**{name: have}), exp(**{name: minimum}))
    if ok:
        assert r.status is S.PASS and f"{name} {have} >= {minimum}" in r.reason
        assert r.expected.equals[name] == f">= {minimum}"
    else:
        assert r.status is S.FAIL and r.reason == f"below the minimum versions: {name.upper()} {have} < {minimum}"


def test_pass_reason_lists_every_minimum_in_order():
    (r,) = versions.min_versions(doc(), exp(cuda="13.0", nccl="2.27.3"))
    assert r.reason == ("versions at or above the minimums: driver 580.95.05 >= 580.95.05, dcgm 4.5.3 >= 4.5.3, "
                        "cuda 13.0 >= 13.0, nccl 2.27.3 >= 2.27.3")
    assert r.measured == {"driver": "580.95.05", "dcgm": "4.5.3", "cuda": "13.0", "nccl": "2.27.3"}
    assert r.expected.equals == {"driver": ">= 580.95.05", "dcgm": ">= 4.5.3", "cuda": ">= 13.0", "nccl": ">= 2.27.3"}


def test_every_problem_is_named_and_warn_severity_warns():
    (r,) = versions.min_versions(doc(driver="580.1.1", dcgm=None, nccl="2.1"), exp(severity="warn", nccl="2.27.3"))
    assert r.status is S.WARN
    assert r.reason == ("below the minimum versions: driver 580.1.1 < 580.95.05; DCGM version not read (minimum "
                        "4.5.3); NCCL 2.1 < 2.27.3")


def test_driver_not_read_and_branch_not_listed():
    (r,) = versions.min_versions(doc(driver=None), exp(dcgm=None))
    assert (r.status, r.reason) == (S.FAIL, "below the minimum versions: driver version not read")
    (r,) = versions.min_versions(doc(driver="590.1.1"), exp(dcgm=None, driver=["580.95.05", "570.1.1"]))
    assert r.reason == "below the minimum versions: driver 590.1.1: branch 590 is not in the table (570, 580)"
    assert "driver" not in r.expected.equals


def test_dcgm_not_applicable_is_not_checked():
    (r,) = versions.min_versions(doc(dcgm=None), exp(not_applicable=("dcgm",)))
    assert r.status is S.PASS and "dcgm" not in r.expected.equals


def test_an_unreadable_version_string_is_below():
    (r,) = versions.min_versions(doc(dcgm="unknown"), exp())
    assert r.status is S.FAIL and "DCGM unknown < 4.5.3" in r.reason


def test_driver_from_the_per_gpu_query_when_q_lacks_it():
    rows = [{"index": 1, "pci.bus_id": "00000000:19:00.0", "driver_version": "580.95.06"},
            {"index": 0, "pci.bus_id": "00000000:18:00.0", "driver_version": "580.95.05"}]
    assert versions.read_versions({"nvidia_smi": {"query": rows}})["driver"] == "580.95.05"  # first in order
    q_first = {"nvidia_smi": {"query": rows, "q": {"driver_version": "580.95.07"}}}
    assert versions.read_versions(q_first)["driver"] == "580.95.07"
    assert versions.read_versions({}) == {"driver": None, "dcgm": None, "cuda": None, "nccl": None}


@pytest.mark.parametrize(("text", "parts"), [
    ("580.95.05", (580, 95, 5)), ("4.5.3-1", (4, 5, 3)), ("2.27.3+cuda12.9", (2, 27, 3)), ("13.0 ", (13, 0)),
    ("12.9~rc1", (12, 9)), ("4.5.x", (4, 5)), ("abc", ()), (" 1.2", (1, 2)),
])
def test_vtuple_parts(text, parts):
    assert versions.vtuple(text) == parts
