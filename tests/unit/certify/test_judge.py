"""judge_node / judge_fleet: waivers, not-applicable gates, fail-closed cases, the failure policy, validity."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from gridready.certify.judge import GATE_NAMES, NodeVerdict, judge_fleet, judge_node, still_valid
from gridready.certify.result import GateResult, GateStatus
from gridready.exitcodes import ExitCode
from gridready.spec.certification import FailurePolicy
from tests.unit.certify.fixtures_io import group, probe_quick, spec

LOCAL = {"not_applicable": ["dcgm", "peermem"]}


def _node(name: str, doc: dict[str, Any] | None = None, **kw: Any) -> NodeVerdict:
    return judge_node(spec(**{**LOCAL, **kw}), group(), probe_quick() if doc is None else doc, node=name)


def _broken() -> dict[str, Any]:
    doc = copy.deepcopy(probe_quick())
    doc["torch"]["gpus"][1]["hbm_copy_tbps"] = 1.0
    return doc


def test_every_gate_reported_in_design_order() -> None:
    v = _node("a")
    gates = list(dict.fromkeys(r.gate for r in v.gates))
    # gpu_burn only where it ran; the collectives other than all_reduce only where the spec names them
    unchosen = {"gpu_burn", "nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall", "nccl_sendrecv"}
    assert gates[0] == "probe" and gates[1:] == [g for g in GATE_NAMES if g not in unchosen]
    assert v.certified and v.valid_until is not None and v.schema_version == "gridready.certification/1"


def test_no_probe_document_is_an_error() -> None:
    v = judge_node(spec(), group(), None, node="ghost")
    assert not v.certified and v.gates[0].status is GateStatus.ERROR and "no probe output" in v.blocking[0]


def test_wrong_schema_is_an_error() -> None:
    doc = copy.deepcopy(probe_quick())
    doc["schema"] = "something/else"
    assert not _node("a", doc).certified


def test_waive_turns_a_failure_non_blocking() -> None:
    v = _node("a", _broken())
    assert not v.certified
    assert v.blocking == ["hbm_bandwidth: GPU 1: HBM copy (read+write) 1 TB/s below the floor 3.3 TB/s"]
    w = _node("a", _broken(), waive=["hbm_bandwidth"])
    assert w.certified
    r = next(r for r in w.gates if r.gate == "hbm_bandwidth" and r.gpu == 1)
    assert r.waived and r.status is GateStatus.FAIL and "waived" in r.reason


def test_required_gate_erroring_blocks_and_not_applicable_does_not() -> None:
    v = judge_node(spec(not_applicable=[]), group(gdr=True), probe_quick(), node="a")
    assert {b.split(":")[0] for b in v.blocking} == {"dcgm", "peermem"}  # no DCGM, no peermem on the VM
    na = [r for r in _node("a").gates if r.status is GateStatus.SKIPPED]
    # sdc and training_goodput: the capture predates those probe steps (fixtures_io.BEFORE_ISSUE30)
    assert {r.gate for r in na} == {"dcgm", "peermem", "sdc", "training_goodput"} and all(not r.required for r in na)


def test_a_gate_that_raises_is_an_error(monkeypatch: Any) -> None:
    from gridready.certify import judge

    def boom(doc: dict[str, Any], exp: Any) -> list[GateResult]:
        raise KeyError("surprise")

    monkeypatch.setattr(judge, "GATES", (("clocks", boom),))
    v = _node("a")
    r = next(r for r in v.gates if r.gate == "clocks")
    assert r.status is GateStatus.ERROR and "KeyError" in r.reason and not v.certified


def test_policy_quarantine_keeps_going_with_enough_nodes() -> None:
    s = spec(**LOCAL, min_certified_nodes=1)
    f = judge_fleet(s, [_node("a"), _node("b", _broken())], outliers=False)
    assert f.exit_code == ExitCode.OK and f.status == "degraded"
    assert f.certified == ["a"] and list(f.quarantined) == ["b"] and "GPU 1" in f.quarantined["b"]
    assert f.messages[0].startswith("warning: 1 node(s) quarantined")


def test_policy_quarantine_below_minimum_exits_5() -> None:
    s = spec(**LOCAL, min_certified_nodes=2)
    f = judge_fleet(s, [_node("a"), _node("b", _broken())], outliers=False)
    assert f.exit_code == ExitCode.NOT_CERTIFIED and f.status == "not-certified"


def test_policy_stop_exits_5_on_any_failure() -> None:
    s = spec(**LOCAL, failure_policy=FailurePolicy.STOP)
    assert judge_fleet(s, [_node("a"), _node("b", _broken())]).exit_code == ExitCode.NOT_CERTIFIED
    assert judge_fleet(s, [_node("a")]).exit_code == ExitCode.OK


def test_reused_nodes_count_towards_the_minimum() -> None:
    s = spec(**LOCAL, min_certified_nodes=2)
    f = judge_fleet(s, [_node("a")], reused=["z"])
    assert f.exit_code == ExitCode.OK and f.certified == ["a", "z"] and f.reused == ["z"]


def test_fleet_outlier_flags_a_slow_node_above_the_floor() -> None:
    docs = []
    for i, scale in enumerate((1.0, 1.0, 1.0, 0.85)):
        d = copy.deepcopy(probe_quick())
        for g in d["torch"]["gpus"]:
            g["bf16_gemm_tflops"] = {k: v * scale * (1 + i / 1000) for k, v in g["bf16_gemm_tflops"].items()}
        docs.append(d)
    s = spec(**LOCAL, outlier_action="fail")
    f = judge_fleet(s, [_node(f"n{i}", d, outlier_action="fail") for i, d in enumerate(docs)])
    assert list(f.quarantined) == ["n3"] and f.quarantined["n3"].startswith("outlier_bf16_gemm_tflops")


def test_extra_results_from_the_fabric_phase_block() -> None:
    bad = GateResult(gate="hca_port", node="a", hca="mlx5_3", status=GateStatus.FAIL, reason="mlx5_3 port Down")
    f = judge_fleet(spec(**LOCAL), [_node("a"), _node("b")], extra={"a": [bad]}, outliers=False)
    assert f.quarantined == {"a": "hca_port: mlx5_3 port Down"}


def test_validity_window() -> None:
    v = _node("a", validity_hours=24)
    cert = v.model_dump(mode="json")
    s = spec(**LOCAL)
    assert still_valid(cert, s)
    later = dt.datetime.fromisoformat(v.judged_at) + dt.timedelta(hours=25)
    assert not still_valid(cert, s, now=later)
    assert not still_valid(cert, spec(**LOCAL, profile="standard"))
    assert not still_valid(_node("b", _broken()).model_dump(mode="json"), s)
