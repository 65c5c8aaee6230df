"""Issue 34, finding 10: a node re-certified alone, or the survivor of a pair, still gets its HCA and multi-node
gates (paired with a node still certified from an earlier run), or the multi-node gate is recorded as not run and
blocks; the old stage ran the fabric phase only when two nodes probed in this run passed, and said nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gridready.certify.judge import NodeVerdict
from gridready.stages import certify as certify_stage
from gridready.stages import fabric as fabric_stage

from .fakefabric import FakeFabric, make_inventory


def _passed(node: str) -> NodeVerdict:
    return NodeVerdict(node=node, sku="H200-SXM-141GB", gpus_expected=8, profile="quick", certified=True,
                       judged_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def _stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> tuple[Any, Any]:
    inv = make_inventory(n)
    fab = FakeFabric(inv, {})
    real = fabric_stage.run_fabric_phase
    monkeypatch.setattr(certify_stage, "run_fabric_phase",
                        lambda inv, ctx, nodes, **kw: real(inv, ctx, nodes, fab, out_dir=tmp_path, **kw))
    return inv, SimpleNamespace(stage_dir=lambda _stage: tmp_path)


def test_node_recertified_alone_is_paired_with_a_still_certified_peer(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    inv, ctx = _stage(tmp_path, monkeypatch, 4)
    res = certify_stage.fabric_results(inv, ctx, [_passed("gpu01")], peers=["gpu02", "gpu03", "gpu04"])
    assert res is not None and list(res.node_results) == ["gpu01"]  # the peers keep their earlier verdicts
    gates = {g.gate: g for g in res.node_results["gpu01"]}
    assert gates["nccl_multinode_all_reduce"].status == "pass"
    assert any(g.startswith("hca_") for g in gates) and not any(g.blocks_certification for g in gates.values())


def test_lone_survivor_without_peers_gets_its_hca_gates_and_is_not_certified(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    inv, ctx = _stage(tmp_path, monkeypatch, 2)  # a two-node fleet whose other node failed single-node gates
    res = certify_stage.fabric_results(inv, ctx, [_passed("gpu01")])
    assert res is not None
    gates = {g.gate: g for g in res.node_results["gpu01"]}
    assert any(g.startswith("hca_") for g in gates)
    mn = gates["nccl_multinode_all_reduce"]
    assert mn.status == "skipped" and mn.blocks_certification and "not run" in mn.reason
