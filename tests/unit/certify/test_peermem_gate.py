"""The peermem gate follows the RDMA stack: with the inbox (distro) stack GPUDirect RDMA goes through DMA-BUF and
nvidia_peermem (which cannot load there) is not demanded; with DOCA/MLNX_OFED it is."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify.judge import judge_node
from gridready.certify.result import GateStatus
from tests.unit.certify.fixtures_io import group, probe_quick, spec


def _peermem(loaded: bool, gdr: bool = True, **kw: Any) -> Any:
    doc = copy.deepcopy(probe_quick())
    doc["system"]["peermem_loaded"] = loaded
    v = judge_node(spec(not_applicable=["dcgm"]), group(gdr=gdr), doc, node="a", **kw)
    (r,) = [r for r in v.gates if r.gate == "peermem"]
    return r


def test_inbox_stack_does_not_demand_nvidia_peermem() -> None:
    r = _peermem(False, rdma_stack="distro")
    assert r.status is GateStatus.PASS
    assert "DMA-BUF" in r.reason and r.expected.equals == "any"


@pytest.mark.parametrize("stack", ["doca", None])
def test_doca_stack_or_an_unknown_one_demands_nvidia_peermem(stack: str | None) -> None:
    r = _peermem(False, rdma_stack=stack)
    assert r.status is GateStatus.FAIL and r.blocks_certification
    assert r.reason.startswith("nvidia_peermem is not loaded")
    assert ("with the doca RDMA stack" in r.reason) == (stack == "doca")


def test_doca_stack_with_nvidia_peermem_passes() -> None:
    assert _peermem(True, rdma_stack="doca").status is GateStatus.PASS


def test_without_gpudirect_rdma_nothing_is_demanded() -> None:
    assert _peermem(False, gdr=False, rdma_stack="doca").status is GateStatus.PASS
