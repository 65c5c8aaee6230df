"""SDC gate (issue 30, item 1) on a SIMULATED fleet of 12 HGX H200 nodes (sandbox/probe_docs.py: the simulator's
outputs through the probe's own parsers; digests from sandbox/sim/sdc.py): one GPU whose bf16 GEMM flips one bit
fails the fleet consensus, and only that GPU; a GPU that does not repeat fails the node gate; the report names the
workload and the digests. The node gate also reads the real digests recorded on the lent H200."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from gridready.certify import sdc
from gridready.certify.judge import judge_fleet, judge_node
from gridready.certify.result import GateStatus as S
from gridready.probe import offline
from gridready.spec.certification import CertificationSpec
from sandbox.probe_docs import probe_doc
from sandbox.profile import Fault, HardwareProfile

SPEC = CertificationSpec.model_validate({"profile": "standard", "not_applicable": [
    "gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth", "peer_bandwidth", "training_goodput"]})
H200_RUN = Path(__file__).parents[3] / "docs/examples/h200x1/issue30/sdc_on_gpu.json"


def _fleet(faults: dict[int, list[Fault]]) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as td:
        return {f"gpu{i:02d}": probe_doc(HardwareProfile.sample(f"gpu{i:02d}", faults=faults.get(i, [])), Path(td))
                for i in range(12)}


@pytest.fixture(scope="module")
def bitflip_fleet() -> Any:
    docs = _fleet({5: [Fault(kind="sdc_bitflip", gpu=3)]})
    verdicts = [judge_node(SPEC, "h200", d, node=n) for n, d in docs.items()]
    return judge_fleet(SPEC, verdicts, outliers=False)


def test_one_bitflip_gpu_fails_consensus_and_only_it(bitflip_fleet: Any) -> None:
    bad = [(n, r) for n, v in bitflip_fleet.nodes.items() for r in v.gates
           if r.gate == "sdc_consensus" and r.status is not S.PASS]
    assert [(n, r.gpu, r.status) for n, r in bad] == [("gpu05", 3, S.FAIL)]
    (_, r), = bad
    assert "bf16_gemm_8192" in r.reason and r.measured["digests"]["bf16_gemm_8192"] in r.reason
    assert r.measured["majority"]["bf16_gemm_8192"] in r.reason and "95 of 96 GPUs" in r.reason
    assert bitflip_fleet.quarantined.keys() == {"gpu05"} and len(bitflip_fleet.certified) == 11
    passed = [r for v in bitflip_fleet.nodes.values() for r in v.gates if r.gate == "sdc_consensus"
              and r.status is S.PASS]
    assert len(passed) == 95
    assert all(r.status is S.PASS for v in bitflip_fleet.nodes.values() for r in v.gates if r.gate == "sdc")


def test_the_report_carries_every_digest(bitflip_fleet: Any) -> None:
    v = bitflip_fleet.nodes["gpu05"]
    fig = v.figures["sdc"]
    assert fig["key"]["driver"] and len(fig["gpus"]) == 8 and set(fig["gpus"][0]["digests"]) == {
        "bf16_gemm_8192", "fp8_gemm_8192", "fp32_gemm_4096"}
    assert "sdc" in v.simulated  # the digests came from the simulator and say so


def test_a_gpu_that_does_not_repeat_fails_the_node_gate() -> None:
    docs = _fleet({2: [Fault(kind="sdc_nondeterministic", gpu=6)]})
    v = judge_node(SPEC, "h200", docs["gpu02"], node="gpu02")
    bad = [r for r in v.gates if r.gate == "sdc" and r.status is not S.PASS]
    assert [(r.gpu, r.status) for r in bad] == [(6, S.FAIL)]
    assert "bf16_gemm_8192" in bad[0].reason and "2 different digests in 4 runs" in bad[0].reason
    assert not v.certified
    fleet = judge_fleet(SPEC, [v, *(judge_node(SPEC, "h200", d, node=n) for n, d in docs.items() if n != "gpu02")],
                        outliers=False)
    assert fleet.quarantined.keys() == {"gpu02"}


def test_tie_is_an_error_and_one_gpu_is_not_compared() -> None:
    fig = {"key": {"driver": "580", "cuda": "13.0", "torch": "2.11"},
           "gpus": [{"gpu": 0, "digests": {"w": "aa"}, "repeat_ok": {"w": True}}]}
    other = {**fig, "gpus": [{"gpu": 0, "digests": {"w": "bb"}, "repeat_ok": {"w": True}}]}
    out = sdc.consensus({"a": ("H200", fig), "b": ("H200", other)})
    assert out["a"][0].status is S.ERROR and "no majority among 2 GPUs" in out["a"][0].reason
    alone = sdc.consensus({"a": ("H200", fig)})
    assert alone["a"][0].status is S.SKIPPED and not alone["a"][0].blocks_certification
    other_key = {**other, "key": {**other["key"], "torch": "2.12"}}
    split = sdc.consensus({"a": ("H200", fig), "b": ("H200", other_key)})
    assert {r.status for rs in split.values() for r in rs} == {S.SKIPPED}  # different software: not compared


def test_missing_digests_are_an_error() -> None:
    doc = offline.doc_from_outputs({})
    from gridready import catalog
    from gridready.certify.expectations import Expectations

    exp = Expectations(node="n", sku=catalog.lookup("h200"), gpus=8, spec=SPEC)  # type: ignore[arg-type]
    (r,) = sdc.sdc(doc, exp)
    assert r.status is S.ERROR
    (r,) = sdc.sdc({"sdc": {"present": False, "reason": "torch not importable"}}, exp)
    assert r.status is S.ERROR and "torch not importable" in r.reason


def test_real_h200_digests_pass_the_node_gate() -> None:
    """The lent H200's run (benchmarks/sdc_on_gpu.py) in the probe's sdc JSON form, read by the probe's parser."""
    run = json.loads(H200_RUN.read_text())
    text = json.dumps({"schema": "gridready.sdc/1", "torch": run["torch"], "cuda": run["cuda"],
                       "workloads": list(run["all_workloads"]["workloads"]), "gpus": [run["all_workloads"]]})
    doc = offline.doc_from_outputs({"sdc": text})
    from gridready import catalog
    from gridready.certify.expectations import Expectations

    exp = Expectations(node="h200", sku=catalog.lookup("h200"), gpus=1, spec=SPEC,  # type: ignore[arg-type]
                       platform="passthrough")
    (r,) = sdc.sdc(doc, exp)
    assert r.status is S.PASS and r.measured["digests"]["bf16_gemm_8192"] == "869f821f0d3d7d75f73c6a05ace9d4b5"
    assert r.measured["repeats"]["bf16_gemm_16384"] == 8
