"""Training goodput gate (issue 30, item 2): the real H200 run (docs/examples/h200x1/issue30) passes with its MFU and
loss curve in the result; a loss that does not fall, a figure under the floor and missing runs do not pass; with 2+
GPUs the data-parallel run's NCCL transports are read from real NCCL_DEBUG=INFO lines (tests/fixtures/public/
nccl-debug): a socket fallback fails."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gridready import catalog
from gridready.certify import goodput
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe import nccl_debug, offline
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import pub

RUN = json.loads((Path(__file__).parents[3] / "docs/examples/h200x1/issue30/goodput_vs_reference.json").read_text())
PROBE_RUN = RUN["rows"][0]["probe_run"]


def _exp(gpus: int = 1, **spec: Any) -> Expectations:
    return Expectations(node="n", sku=catalog.lookup("h200"), gpus=gpus,  # type: ignore[arg-type]
                        spec=CertificationSpec.model_validate(spec), platform="passthrough")


def _doc(runs: list[dict[str, Any]], ddp: dict[str, Any] | None = None) -> dict[str, Any]:
    text = json.dumps({"schema": "gridready.goodput/1", "gpus": runs, "ddp": ddp})
    return offline.doc_from_outputs({"goodput": text})


def test_real_h200_run_passes_with_mfu_and_loss_curve() -> None:
    (r,) = goodput.training_goodput(_doc([PROBE_RUN]), _exp())
    assert r.status is S.PASS and "544.4 model TFLOP/s, 55.0% MFU of 989" in r.reason
    assert r.measured["loss"] == PROBE_RUN["loss"] and r.measured["loss_drop"] > 1.0
    assert r.expected.floor == 385.0 and "544.4 measured on an H200" in r.expected.source


def test_flat_loss_fails_and_low_figure_fails() -> None:
    flat = {**PROBE_RUN, "loss": [10.8] * 35}
    (r,) = goodput.training_goodput(_doc([flat]), _exp())
    assert r.status is S.FAIL and "loss did not fall" in r.reason
    slow = {**PROBE_RUN, "model_tflops": 300.0}
    (r,) = goodput.training_goodput(_doc([slow]), _exp())
    assert r.status is S.FAIL and "below 385" in r.reason
    (r,) = goodput.training_goodput(_doc([slow]), _exp(floors={"goodput_model_tflops": 250}))
    assert r.status is S.PASS and r.expected.source == "spec"
    nan = {**PROBE_RUN, "loss": [*PROBE_RUN["loss"][:-1], float("nan")], "loss_finite": False}
    (r,) = goodput.training_goodput(_doc([nan]), _exp())
    assert r.status is S.FAIL and "not finite" in r.reason


def test_missing_runs_are_errors_and_quick_is_not_applicable() -> None:
    (r,) = goodput.training_goodput(offline.doc_from_outputs({}), _exp())
    assert r.status is S.ERROR
    rs = goodput.training_goodput(_doc([PROBE_RUN]), _exp(gpus=2))
    assert {x.status for x in rs} == {S.ERROR, S.PASS}  # GPU 1 missing, no data-parallel run
    (r,) = goodput.training_goodput({"goodput": {"present": False, "ran": False, "reason": "quick"}}, _exp())
    assert r.status is S.SKIPPED and not r.required


def test_nccl_transport_parser_on_real_lines() -> None:
    sock = nccl_debug.parse(pub("nccl-debug", "socket-fallback"))
    assert sock["families"] == {"P2P": 14, "NET/Socket": 2} and sock["connections"] == 16
    p2p = nccl_debug.parse(pub("nccl-debug", "p2p-direct-pointer"))
    assert p2p["families"] == {"P2P": 17}


def _two(ddp: dict[str, Any]) -> list[Any]:
    second = {**copy.deepcopy(PROBE_RUN), "index": 1}
    return goodput.training_goodput(_doc([PROBE_RUN, second], ddp), _exp(gpus=2))


def test_data_parallel_socket_fallback_fails_and_p2p_passes() -> None:
    base = {"present": True, "world": 2, "model_tflops_per_gpu": 500.0, "loss": [10.8, 9.9]}
    rs = _two({**base, "transports": nccl_debug.parse(pub("nccl-debug", "socket-fallback"))})
    (t,) = [r for r in rs if r.gpu is None]
    assert t.status is S.FAIL and "NET/Socket (2 connections)" in t.reason and "via NET/Socket/3" in t.reason
    rs = _two({**base, "transports": nccl_debug.parse(pub("nccl-debug", "p2p-direct-pointer"))})
    (t,) = [r for r in rs if r.gpu is None]
    assert t.status is S.PASS and "P2P x17" in t.reason
    rs = _two({**base, "transports": nccl_debug.parse("")})
    (t,) = [r for r in rs if r.gpu is None]
    assert t.status is S.ERROR
