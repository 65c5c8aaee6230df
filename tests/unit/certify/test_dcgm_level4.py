"""DCGM level 3/4 as DCGM 4.5/4.6 run them (issue 30, item 6): level 4 must show memtest and, on H100 SXM/H200,
pulse_test; each result lists what ran and with which -p parameters. Level-4 JSON from the simulator (SIMULATED,
sandbox/sim/dcgmi.py, DCGM 4.x schema through the probe's parser)."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from gridready import catalog
from gridready.certify import diagnostics
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe import dcgm
from gridready.spec.certification import CertificationSpec
from sandbox.probe_docs import probe_doc
from sandbox.profile import HardwareProfile


def _doc(level: int = 4) -> dict:
    with tempfile.TemporaryDirectory() as td:
        return probe_doc(HardwareProfile.sample("n1"), Path(td), dcgm_level=level)


def _exp(sku: str = "h200") -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup(sku), gpus=8,  # type: ignore[arg-type]
                        spec=CertificationSpec(profile="burn-in"))


def test_level4_lists_what_ran() -> None:
    (r,) = diagnostics.dcgm(_doc(), _exp())
    assert r.status is S.PASS and {"memtest", "pulse_test", "diagnostic"} <= set(r.measured["ran"])
    assert "ran " in r.reason and "pulse_test" in r.reason


def test_level4_without_pulse_test_on_h200_is_not_a_pass() -> None:
    doc = copy.deepcopy(_doc())
    doc["dcgm"]["parsed"]["tests"] = [t for t in doc["dcgm"]["parsed"]["tests"]
                                      if diagnostics.plugin_name(t["name"]) != "pulse_test"]
    (r,) = diagnostics.dcgm(doc, _exp())
    assert r.status is S.FAIL and "pulse_test did not run" in r.reason
    (r,) = diagnostics.dcgm(doc, _exp("h100-nvl"))  # pulse_test is not enabled for 0x2321
    assert "pulse_test" not in r.reason


def test_outlier_tolerances_only_at_level_3_and_up() -> None:
    assert dcgm.diag_parameters(3, "h", 10) == {"diagnostic.precision": "h", "diagnostic.clocks_tolerance_pcnt": "10",
                                                "diagnostic.power_tolerance_pcnt": "10"}
    assert dcgm.diag_parameters(2, "h", 10) == {} and dcgm.diag_parameters(4, "h") == {"diagnostic.precision": "h"}
