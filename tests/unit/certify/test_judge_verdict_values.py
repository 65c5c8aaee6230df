"""judge_node / judge_fleet / figures: the exact verdict a node and a fleet get (fields the report and the
quarantine list read), with the gates replaced by stand-ins where the test is about the judge, not a gate."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gridready import catalog
from gridready.certify import judge
from gridready.certify.expectations import Expectations
from gridready.certify.judge import NodeVerdict, figures, judge_fleet, judge_node, simulated_outputs, still_valid
from gridready.certify.result import GateResult
from gridready.certify.result import GateStatus as S
from gridready.exitcodes import ExitCode
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import group

NOW = dt.datetime(2026, 5, 1, 12, 30, 15, 999, tzinfo=dt.UTC)
H200 = "H200-SXM-141GB"


def _spec(**kw: Any) -> CertificationSpec:
    return CertificationSpec(**{"profile": "quick", **kw})


def _gate(status: S, reason: str, evidence: str | None = None, **kw: Any):
    def fn(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
        return [exp.result(fn.name, status, reason, evidence=evidence, **kw)]  # type: ignore[attr-defined]
    return fn


def _gates(monkeypatch: pytest.MonkeyPatch, **gates: Any) -> None:
    for name, fn in gates.items():
        fn.name = name
    monkeypatch.setattr(judge, "GATES", tuple(gates.items()))


def _doc(**kw: Any) -> dict[str, Any]:
    return {"schema": "gridready.probe/1", "host": "gpu-07", "wall_s": 12.5, "errors": [], **kw}


def test_no_probe_document_is_an_unknown_node_with_an_error() -> None:
    v = judge_node(_spec(), "h200", None, now=NOW, evidence="runs/x/probe.json")
    assert (v.node, v.node_group, v.sku, v.gpus_expected, v.profile) == ("unknown", None, H200, 8, "quick")
    assert (v.certified, v.valid_until, v.judged_at) == (False, None, "2026-05-01T12:30:15+00:00")
    assert v.evidence == "runs/x/probe.json"
    assert [(r.gate, r.node, r.status, r.reason, r.evidence) for r in v.gates] == [
        ("probe", "unknown", S.ERROR, "no probe output from this node (probe failed or not fetched)",
         "runs/x/probe.json")]
    assert v.blocking == ["probe: no probe output from this node (probe failed or not fetched)"]
    assert v.figures == {} and v.simulated == [] and v.probe == {}


def test_no_probe_document_for_a_named_node_group() -> None:
    v = judge_node(_spec(), group(gpus=2), {}, node="gpu-01", now=NOW)
    assert (v.node, v.node_group, v.gpus_expected) == ("gpu-01", "gpu_nodes", 2)
    assert judge_node(_spec(), group(gpus=2), {}, node="gpu-01", node_group="other", now=NOW).node_group == "other"




def test_a_passing_node_is_certified_until_the_validity_window_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch, gemm_bf16=_gate(S.PASS, "fast", "torch.gpus"), xid=_gate(S.PASS, "no xid"))
    v = judge_node(_spec(validity_hours=6), "h200", _doc(), now=NOW, evidence="p.json", driver_branch="580")
    assert v.node == "gpu-07" and v.certified and v.blocking == []
    assert v.valid_until == "2026-05-01T18:30:15+00:00"
    assert [(r.gate, r.status, r.reason, r.evidence, r.measured, r.unit) for r in v.gates] == [
        ("probe", S.PASS, "probe ran in 12.5 s, no collector errors", "p.json", 12.5, "s"),
        ("gemm_bf16", S.PASS, "fast", "p.json#torch.gpus", None, None),
        ("xid", S.PASS, "no xid", "p.json", None, None),
    ]


def test_gate_evidence_without_a_probe_path_is_the_gate_own(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch, gemm_bf16=_gate(S.PASS, "fast", "torch.gpus"), xid=_gate(S.PASS, "ok"))
    v = judge_node(_spec(), "h200", _doc(), now=NOW)
    assert [r.evidence for r in v.gates] == [None, "torch.gpus", None]


def test_the_probe_section_keeps_the_run_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch)
    doc = _doc(started="t0", finished="t1", timings_s={"a": 1}, tools={"x": 1}, kernel="6.8", python="3.12",
               options={"o": 1}, profile="quick", raw={"big": "x"})
    v = judge_node(_spec(), "h200", doc, now=NOW)
    assert v.probe == {"schema": "gridready.probe/1", "host": "gpu-07", "profile": "quick", "started": "t0",
                       "finished": "t1", "wall_s": 12.5, "timings_s": {"a": 1}, "errors": [], "tools": {"x": 1},
                       "kernel": "6.8", "python": "3.12", "options": {"o": 1}}


def test_a_wrong_schema_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch)
    v = judge_node(_spec(), "h200", _doc(schema="gridready.probe/0"), now=NOW, evidence="p.json")
    (r,) = v.gates
    assert (r.status, r.evidence) == (S.ERROR, "p.json")
    assert r.reason == "probe schema 'gridready.probe/0', expected 'gridready.probe/1'"
    assert not v.certified


def test_collector_errors_warn_naming_the_first_four(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch)
    errs = [{"collector": f"c{i}", "error": "e" * 130 if i == 0 else f"boom {i}"} for i in range(5)]
    v = judge_node(_spec(), "h200", _doc(errors=errs), now=NOW, evidence="p.json")
    (r,) = v.gates
    assert (r.status, r.measured, r.evidence) == (S.WARN, errs, "p.json")
    assert r.reason == "5 collector error(s): c0: " + "e" * 120 + "; c1: boom 1; c2: boom 2; c3: boom 3"
    assert v.certified


def test_not_applicable_gates_are_skipped_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
        raise AssertionError("a gate the spec declares n/a must not run")
    _gates(monkeypatch, dcgm=never, xid=_gate(S.PASS, "ok"))
    v = judge_node(_spec(not_applicable=["dcgm"]), "h200", _doc(), now=NOW)
    r = v.gates[1]
    assert (r.gate, r.status, r.required) == ("dcgm", S.SKIPPED, False)
    assert r.reason == "not applicable on these nodes (certification.not_applicable in the spec)"
    assert v.certified


def test_a_gate_that_raises_is_an_error_naming_the_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
        raise KeyError("gpus")
    _gates(monkeypatch, nvlink=broken)
    v = judge_node(_spec(), "h200", _doc(), now=NOW)
    r = v.gates[1]
    assert (r.gate, r.status, r.reason) == ("nvlink", S.ERROR, "gate raised KeyError: 'gpus'")
    assert v.blocking == ["nvlink: gate raised KeyError: 'gpus'"] and v.valid_until is None


def test_waivers_apply_to_gate_results(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch, xid=_gate(S.FAIL, "Xid 79 on GPU 3"), ecc=_gate(S.WARN, "1 corrected"))
    v = judge_node(_spec(waive=["xid", "ecc"]), "h200", _doc(), now=NOW)
    xid, ecc = v.gates[1], v.gates[2]
    assert (xid.waived, xid.reason) == (True, "Xid 79 on GPU 3 (waived by the spec)")
    assert (ecc.waived, ecc.reason) == (False, "1 corrected")
    assert v.certified and v.valid_until == "2026-05-02T12:30:15+00:00"


def test_driver_branch_reaches_the_gates(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str | None, str]] = []

    def spy(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
        seen.append((exp.driver_branch, exp.rdma_stack, exp.node))
        return []
    _gates(monkeypatch, software_versions=spy)
    judge_node(_spec(), "h200", _doc(), now=NOW, driver_branch="580", rdma_stack="doca")
    assert seen == [("580", "doca", "gpu-07")]


def test_judged_at_defaults_to_now_in_utc() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    v = judge_node(_spec(), "h200", None)
    at = dt.datetime.fromisoformat(v.judged_at)
    assert at.tzinfo is not None and before <= at <= dt.datetime.now(dt.UTC) and at.microsecond == 0


def test_figures_take_the_best_of_each_gemm_shape_and_the_torch_sweep() -> None:
    doc = {"wall_s": 90.5, "torch": {
        "gpus": [{"index": 0, "bf16_gemm_tflops": {"4096": 610.0, "8192": 650.5}, "fp8_gemm_tflops": 1100.0,
                  "hbm_copy_tbps": 3.9, "h2d_gbps": 50.1, "d2h_gbps": 49.0},
                 {"index": 1, "bf16_gemm_tflops": {}, "fp8_gemm_tflops": "n/a"}],
        "peer": [{"src": 0, "dst": 1, "gbps": 380.0, "lat_us": 2}, {"src": 1, "dst": 0}],
        "allreduce": {"sizes": [{"bytes": 1024, "busbw_gbps": 1.5}, {"bytes": 2048, "busbw_gbps": 3.0}]}}}
    assert figures(doc) == {
        "gpus": [{"gpu": 0, "bf16_gemm_tflops": 650.5, "fp8_gemm_tflops": 1100.0, "hbm_copy_tbps": 3.9,
                  "h2d_gbps": 50.1, "d2h_gbps": 49.0},
                 {"gpu": 1, "bf16_gemm_tflops": None, "fp8_gemm_tflops": None, "hbm_copy_tbps": None,
                  "h2d_gbps": None, "d2h_gbps": None}],
        "peer": [{"src": 0, "dst": 1, "gbps": 380.0}, {"src": 1, "dst": 0, "gbps": None}],
        "allreduce": {"source": "torch.distributed", "points": [{"bytes": 1024, "busbw_gbps": 1.5},
                                                                {"bytes": 2048, "busbw_gbps": 3.0}]},
        "probe_wall_s": 90.5, "sdc": None}


def test_figures_of_an_empty_document() -> None:
    assert figures({}) == {"gpus": [], "peer": [], "allreduce": {"source": None, "points": []},
                           "probe_wall_s": None, "sdc": None}


def test_judge_node_records_figures_and_simulated_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(monkeypatch)
    doc = _doc(torch={"gpus": [{"index": 0, "hbm_copy_tbps": 4.0}]}, raw={"dcgmi_diag": "gridready-sim dcgmi"})
    v = judge_node(_spec(), "h200", doc, now=NOW)
    assert v.figures["gpus"][0]["hbm_copy_tbps"] == 4.0 and v.simulated == ["dcgmi_diag"]


@pytest.mark.parametrize(("doc", "out"), [
    ({}, []),
    ({"raw": {"b": "x gridready-sim y", "a": "gridready-sim", "c": "real output", "d": None, "e": 3}}, ["a", "b"]),
    ({"raw": None, "system": {"simulated_sysfs": True}}, ["sysfs"]),
    ({"raw": {"z": "gridready-sim"}, "system": {"simulated_sysfs": False}}, ["z"]),
    ({"raw": {"z": "gridready-sim"}, "system": {"simulated_sysfs": True}}, ["z", "sysfs"]),
    ({"system": None}, []),
])
def test_simulated_outputs_name_the_marked_sources(doc: dict[str, Any], out: list[str]) -> None:
    assert simulated_outputs(doc) == out


def _verdict(node: str, status: S = S.PASS, sku: str = H200, node_group: str | None = "g", reason: str = "ok",
             figs: dict[str, Any] | None = None, nccl: float | None = None, simulated: bool = False) -> NodeVerdict:
    v = NodeVerdict(node=node, node_group=node_group, sku=sku, gpus_expected=8, profile="quick", certified=False,
                    judged_at="2026-05-01T12:00:00+00:00", figures=figs or {}, simulated=["x"] if simulated else [])
    gates = [GateResult(gate="xid", node=node, status=status, reason=reason)]
    if nccl is not None:
        gates.append(GateResult(gate="nccl_allreduce", node=node, status=S.PASS, reason="ok",
                                measured={"max_busbw_gbps": nccl}))
    return v.add(gates, _spec())


def test_stop_policy_exits_5_on_any_quarantined_node() -> None:
    f = judge_fleet(_spec(failure_policy="stop"), [_verdict("a"), _verdict("b", S.FAIL, reason="Xid 79")],
                    outliers=False, customer="acme", run_id="r1")
    assert (f.exit_code, f.status, f.certified, f.quarantined) == (5, "not-certified", ["a"], {"b": "xid: Xid 79"})
    assert (f.customer, f.run_id, f.failure_policy, f.profile, f.min_certified_nodes) == (
        "acme", "r1", "stop", "quick", 1)
    assert f.messages == []


def test_stop_policy_with_every_node_certified_is_ok() -> None:
    f = judge_fleet(_spec(failure_policy="stop"), [_verdict("b"), _verdict("a", simulated=True)], outliers=False)
    assert (f.exit_code, f.status, f.certified, f.quarantined, f.simulated) == (0, "certified", ["a", "b"], {}, ["a"])


def test_stop_policy_with_no_node_at_all_is_not_certified() -> None:
    f = judge_fleet(_spec(failure_policy="stop"), [], outliers=False)
    assert (f.exit_code, f.status) == (int(ExitCode.NOT_CERTIFIED), "not-certified")


@pytest.mark.parametrize(("minimum", "code", "status", "messages"), [
    (2, 0, "degraded", ["warning: 1 node(s) quarantined, 2 certified (minimum 2): c"]),
    (3, 5, "not-certified", ["only 2 node(s) certified, the spec requires 3"]),
])
def test_quarantine_policy_against_the_minimum(minimum: int, code: int, status: str, messages: list[str]) -> None:
    nodes = [_verdict("a"), _verdict("b"), _verdict("c", S.ERROR, reason="no data")]
    f = judge_fleet(_spec(failure_policy="quarantine", min_certified_nodes=minimum), nodes, outliers=False)
    assert (f.exit_code, f.status, f.messages) == (code, status, messages)
    assert f.quarantined == {"c": "xid: no data"} and f.certified == ["a", "b"]


def test_quarantine_policy_with_every_node_certified_says_nothing() -> None:
    f = judge_fleet(_spec(failure_policy="quarantine", min_certified_nodes=2), [_verdict("a"), _verdict("b")],
                    outliers=False)
    assert (f.exit_code, f.status, f.messages) == (0, "certified", [])


def test_reused_nodes_count_once_and_only_when_not_judged_again() -> None:
    f = judge_fleet(_spec(failure_policy="quarantine", min_certified_nodes=3), [_verdict("a"), _verdict("b", S.FAIL)],
                    reused=["c", "b", "d"], outliers=False)
    assert f.reused == ["c", "d"] and f.certified == ["a", "c", "d"] and f.exit_code == 0
    assert f.status == "degraded"


def test_fleet_judged_at_is_now_to_the_second() -> None:
    f = judge_fleet(_spec(), [_verdict("a")], outliers=False)
    at = dt.datetime.fromisoformat(f.judged_at)
    assert at.tzinfo is not None and abs((dt.datetime.now(dt.UTC) - at).total_seconds()) < 5
    assert "." not in f.judged_at


def test_extra_results_reach_only_judged_nodes() -> None:
    fab = GateResult(gate="fabric_rail", node="a", status=S.FAIL, reason="rail 3 down")
    f = judge_fleet(_spec(), [_verdict("a"), _verdict("b")], outliers=False,
                    extra={"a": [fab], "zz": [fab.model_copy(update={"node": "zz"})]})
    assert f.quarantined == {"a": "fabric_rail: rail 3 down"} and set(f.nodes) == {"a", "b"}


def _fig(bf16: float | None, hbm: float | None = 4.0) -> dict[str, Any]:
    return {"gpus": [{"gpu": 0, "bf16_gemm_tflops": bf16, "hbm_copy_tbps": hbm},
                     {"gpu": 1, "bf16_gemm_tflops": None if bf16 is None else bf16 + 50, "hbm_copy_tbps": hbm}]}


def test_fleet_outliers_use_each_node_slowest_gpu_per_group() -> None:
    nodes = [_verdict("a", figs=_fig(700.0), nccl=400.0), _verdict("b", figs=_fig(702.0), nccl=401.0),
             _verdict("c", figs=_fig(701.0), nccl=100.0), _verdict("d", figs=_fig(500.0), nccl=399.0)]
    f = judge_fleet(_spec(outlier_action="fail"), nodes)
    assert f.quarantined == {
        "c": "outlier_nccl_busbw_gbps: nccl_busbw_gbps 100 is 25.0 spreads below the g median 400 (of the 3 other "
             "nodes)",
        "d": "outlier_bf16_gemm_tflops: bf16_gemm_tflops 500 is 9.6 spreads below the g median 701 (of the 3 other "
             "nodes)"}
    d = {r.gate: r for r in f.nodes["d"].gates if r.gate.startswith("outlier_")}
    assert d["outlier_bf16_gemm_tflops"].measured == 500.0
    assert d["outlier_hbm_copy_tbps"].status is S.PASS and d["outlier_nccl_busbw_gbps"].measured == 399.0


def test_fleet_outliers_group_by_node_group_else_sku() -> None:
    nodes = [_verdict("a", figs=_fig(700.0), node_group=None), _verdict("b", figs=_fig(702.0), node_group=None),
             _verdict("c", figs=_fig(701.0), node_group=None), _verdict("d", figs=_fig(500.0), node_group="other")]
    f = judge_fleet(_spec(outlier_action="fail"), nodes)
    assert f.quarantined == {}
    r = next(r for r in f.nodes["d"].gates if r.gate == "outlier_bf16_gemm_tflops")
    assert r.status is S.SKIPPED and r.reason == "group other has 1 nodes (< 3): no fleet comparison"
    r = next(r for r in f.nodes["a"].gates if r.gate == "outlier_bf16_gemm_tflops")
    assert r.reason.startswith(f"bf16_gemm_tflops 700 within the {H200} fleet")


def test_fleet_outliers_need_three_nodes_and_can_be_off() -> None:
    two = [_verdict("a", figs=_fig(700.0)), _verdict("b", figs=_fig(100.0))]
    assert all(not r.gate.startswith("outlier_") for v in judge_fleet(_spec(), two).nodes.values() for r in v.gates)
    three = [_verdict("a", figs=_fig(700.0)), _verdict("b", figs=_fig(700.0)), _verdict("c", figs=_fig(100.0))]
    f = judge_fleet(_spec(outlier_action="fail"), three, outliers=False)
    assert f.quarantined == {}
    f = judge_fleet(_spec(outlier_action="fail"), three)
    assert list(f.quarantined) == ["c"]


def test_fleet_outliers_skip_nodes_without_figures() -> None:
    nodes = [_verdict("a", figs=_fig(None, None)), _verdict("b", figs={}), _verdict("c", figs=_fig(1.0))]
    f = judge_fleet(_spec(outlier_action="fail"), nodes)
    assert [r.gate for r in f.nodes["a"].gates] == ["xid"]
    assert [(r.gate, r.status) for r in f.nodes["c"].gates] == [
        ("xid", S.PASS), ("outlier_bf16_gemm_tflops", S.SKIPPED), ("outlier_hbm_copy_tbps", S.SKIPPED)]


@pytest.mark.parametrize(("statuses", "worst"), [
    ([S.PASS, S.ERROR, S.FAIL], S.ERROR), ([S.PASS, S.FAIL, S.WARN], S.FAIL), ([S.SKIPPED, S.WARN], S.WARN),
    ([S.SKIPPED, S.PASS], S.PASS), ([S.SKIPPED], S.SKIPPED), ([], None),
])
def test_worst_status_of_a_gate(statuses: list[S], worst: S | None) -> None:
    v = _verdict("a")
    v.add([GateResult(gate="ecc", node="a", status=s, reason="r", required=False) for s in statuses])
    assert v.worst("ecc") is worst


def test_add_without_a_spec_keeps_the_validity_and_blocks() -> None:
    v = _verdict("a")
    assert v.certified and v.valid_until == "2026-05-02T12:00:00+00:00"
    v.add([GateResult(gate="ecc", node="a", status=S.PASS, reason="ok")])
    assert v.valid_until == "2026-05-02T12:00:00+00:00"
    v.add([GateResult(gate="xid", node="a", status=S.FAIL, reason="Xid 48")])
    assert (v.certified, v.valid_until, v.blocking) == (False, None, ["xid: Xid 48"])


def test_add_without_a_spec_applies_no_waiver() -> None:
    v = NodeVerdict(node="a", sku=H200, gpus_expected=8, profile="quick", certified=False, judged_at="2026-05-01")
    v.add([GateResult(gate="xid", node="a", status=S.FAIL, reason="Xid 48")])
    assert v.gates[0].waived is False and not v.certified


@pytest.mark.parametrize(("cert", "now", "ok"), [
    ({"certified": True, "profile": "quick", "valid_until": "2026-05-01T13:00:00+00:00"}, NOW, True),
    ({"certified": True, "profile": "quick", "valid_until": "2026-05-01T12:30:15.000999+00:00"}, NOW, False),
    ({"certified": True, "profile": "quick", "valid_until": "2026-05-01T12:00:00+00:00"}, NOW, False),
    ({"certified": False, "profile": "quick", "valid_until": "2026-05-01T13:00:00+00:00"}, NOW, False),
    ({"certified": True, "profile": "standard", "valid_until": "2026-05-01T13:00:00+00:00"}, NOW, False),
    ({"certified": True, "profile": "quick", "valid_until": None}, NOW, False),
    ({"certified": True, "profile": "quick", "valid_until": "2999-01-01T00:00:00+00:00"}, None, True),
    ({"certified": True, "profile": "quick", "valid_until": "2001-01-01T00:00:00+00:00"}, None, False),
])
def test_still_valid(cert: dict[str, Any], now: dt.datetime | None, ok: bool) -> None:
    assert still_valid(cert, _spec(), now) is ok


def test_the_sku_name_comes_from_the_catalog() -> None:
    v = judge_node(_spec(), catalog.lookup("h100"), None, now=NOW)
    assert v.sku == "H100-SXM5-80GB" and v.gpus_expected == 8
