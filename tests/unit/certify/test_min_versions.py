"""Minimum versions (issue 30, item 5): ClusterMAX's table by default, per driver branch, severity from the spec.
Driver and CUDA read from the real `nvidia-smi -q` of the lent H200 (driver 580.159.04, CUDA 13.0); the DCGM version
from the real DCGM 4.2.3 diag JSON of the public fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridready import catalog
from gridready.certify import versions
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import pub

H200_Q = (Path(__file__).parents[2] / "fixtures/h200x1/nvidia-smi-q.txt").read_text(encoding="utf-8")


def _exp(**mv: Any) -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup("h200"), gpus=1, platform="passthrough",  # type: ignore[arg-type]
                        spec=CertificationSpec.model_validate({"min_versions": mv}))


def _doc(dcgm: bool = True) -> dict[str, Any]:
    outs = {"nvidia_smi_q": H200_Q}
    if dcgm:
        outs["dcgmi_diag"] = pub("dcgmi", "DCGM4.2.3")
    return doc_from_outputs(outs)


def test_real_h200_driver_meets_the_580_minimum_and_dcgm_423_is_below() -> None:
    (r,) = versions.min_versions(_doc(), _exp())
    assert r.measured["driver"] == "580.159.04" and r.measured["dcgm"] == "4.2.3"
    assert r.status is S.WARN and r.reason.endswith("DCGM 4.2.3 < 4.5.3")


def test_severity_fail_blocks_and_off_skips() -> None:
    (r,) = versions.min_versions(_doc(), _exp(severity="fail"))
    assert r.status is S.FAIL and r.blocks_certification
    (r,) = versions.min_versions(_doc(), _exp(severity="off"))
    assert r.status is S.SKIPPED and not r.blocks_certification


def test_branch_minimum_and_unlisted_branch() -> None:
    (r,) = versions.min_versions(_doc(), _exp(severity="fail", driver=["580.160.00"], dcgm=None))
    assert r.status is S.FAIL and "driver 580.159.04 < 580.160.00" in r.reason
    (r,) = versions.min_versions(_doc(), _exp(severity="fail", driver=["570.211.01"], dcgm=None))
    assert r.status is S.FAIL and "branch 580 is not in the table" in r.reason
    (r,) = versions.min_versions(_doc(), _exp(severity="fail", dcgm=None, cuda="13.0"))
    assert r.status is S.PASS and "driver 580.159.04 >= 580.159.03" in r.reason


def test_a_version_not_read_is_never_a_pass() -> None:
    (r,) = versions.min_versions(_doc(dcgm=False), _exp(severity="fail"))
    assert r.status is S.FAIL and "DCGM version not read" in r.reason


def test_vtuple() -> None:
    assert versions.vtuple("580.159.03") < versions.vtuple("580.159.04")
    assert versions.vtuple("4.5.3-1") == (4, 5, 3) and versions.vtuple("4.10.0") > versions.vtuple("4.5.3")
