"""DCGM level 3 aimed at the tensor cores: the diagnostic plugin's `precision` (h FP16 / s FP32 / d FP64, the only
ones DCGM offers: NVIDIA/DCGM DiagnosticPlugin.cpp SetPrecisionFromString) is passed with `-p`, recorded, and the
report says which precision ran. Run against the sandbox's simulated dcgmi."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from gridready.certify.judge import judge_node
from gridready.certify.result import GateStatus
from gridready.probe import dcgm
from gridready.spec import CertificationSpec
from sandbox.profile import HardwareProfile
from tests.unit.certify.fixtures_io import group, spec


def test_level_3_asks_the_diagnostic_plugin_for_the_spec_precision() -> None:
    assert dcgm.diag_parameters(3, "h") == {"diagnostic.precision": "h"}
    assert dcgm.diag_parameters(4, "hs") == {"diagnostic.precision": "hs"}
    assert dcgm.diag_parameters(1, "h") == {}  # level 1 runs no diagnostic plugin


@pytest.mark.parametrize("bad", ["", "x", "bf16", "fp8", "hh", "hsdh"])
def test_the_spec_refuses_precisions_dcgm_does_not_have(bad: str) -> None:
    with pytest.raises(ValidationError, match="dcgm_precision"):
        CertificationSpec(dcgm_precision=bad)


def test_the_report_says_which_precision_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dcgmi").write_text(f"#!{sys.executable}\nimport sys\nfrom sandbox.sim.dcgmi import main\n"
                                    "sys.exit(main(sys.argv[1:]))\n")
    (tmp_path / "dcgmi").chmod(0o755)
    prof = HardwareProfile.sample("sim-a", gpus=8)
    monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(prof.write(tmp_path / "profile.json")))
    monkeypatch.setenv("PATH", str(tmp_path))
    res = dcgm.collect(3, 60.0, "h")
    assert res["run"]["argv"][-2:] == ["-p", "diagnostic.precision=h"] and res["run"]["rc"] == 0
    assert res["parameters"] == {"diagnostic.precision": "h"} and res["parsed"]
    doc = {"schema": "gridready.probe/1", "host": "sim-a", "errors": [],
           "dcgm": {"present": True, "level": 3, "rc": res["run"]["rc"], "parsed": res["parsed"],
                    "parameters": res["parameters"], "retries": []}}
    v = judge_node(spec(profile="standard", not_applicable=[]), group(gpus=8), doc, node="sim-a")
    (r,) = [r for r in v.gates if r.gate == "dcgm"]
    assert r.status is GateStatus.PASS and "diagnostic plugin at FP16 (tensor cores)" in r.reason
    assert r.measured["diagnostic_precision"] == "FP16 (tensor cores)"
