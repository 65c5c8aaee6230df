"""Training goodput at the value level: the TFLOP/s floor and the loss drop at their boundaries (equal passes, just
below fails), the loss windows (first and last five of at least ten steps), MFU against the SKU's dense peak,
and the data-parallel transports over mixed families."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import goodput
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec


def exp(gpus: int = 1, floor: float | None = 400.0) -> Expectations:
    spec = {"floors": {"goodput_model_tflops": floor}} if floor is not None else {}
    return Expectations(node="n", sku=catalog.lookup("h200"), gpus=gpus,  # type: ignore[arg-type]
                        spec=CertificationSpec.model_validate(spec), platform="passthrough")


def run(i: int = 0, tf: float | None = 494.5, first: float = 10.0, last: float = 9.0, steps: int = 10,
        **over: Any) -> dict[str, Any]:
    half = steps // 2
    loss = [first] * half + [last] * (steps - half)
    return {"index": i, "model_tflops": tf, "loss": loss, "loss_finite": True, **over}


def doc(*rows: dict[str, Any], ddp: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"goodput": {"present": True, "gpus": list(rows), "ddp": ddp}}


@pytest.mark.parametrize(("tf", "status"), [(400.0, S.PASS), (399.9, S.FAIL), (400.1, S.PASS)])
def test_tflops_floor_boundary(tf, status):
    (r,) = goodput.training_goodput(doc(run(tf=tf)), exp())
    assert r.status is status


@pytest.mark.parametrize(("last", "status"), [(9.5, S.PASS), (9.51, S.FAIL), (9.49, S.PASS)])
def test_loss_drop_boundary(last, status):
    (r,) = goodput.training_goodput(doc(run(first=10.0, last=last)), exp())
    assert r.status is status


def test_pass_reason_and_figures():
    (r,) = goodput.training_goodput(doc(run(tf=494.5, tokens_per_s=1.5, params=1e9)), exp())
    assert r.reason == "GPU 0: 494.5 model TFLOP/s, 50.0% MFU of 989, loss 10.00 -> 9.00 in 10 steps"
    assert (r.measured["mfu_pct"], r.measured["loss_drop"], r.measured["tokens_per_s"]) == (50.0, 1.0, 1.5)
    assert r.expected.floor == 400.0 and r.unit == "TFLOP/s" and r.gpu == 0


def test_below_floor_reason():
    (r,) = goodput.training_goodput(doc(run(tf=395.6)), exp())
    assert r.reason == "GPU 0: 395.6 model TFLOP/s (40.0% MFU of 989) is below 400"


def test_loss_windows_are_the_first_and_last_five():
    """12 steps: 10 10 10 10 10 | 9.8 9.8 | 9 9 9 9 9: the middle two steps are in neither mean."""
    loss = [10.0] * 5 + [9.8] * 2 + [9.0] * 5
    (r,) = goodput.training_goodput(doc({**run(), "loss": loss}), exp())
    assert r.measured["loss_drop"] == 1.0 and "in 12 steps" in r.reason


def test_loss_did_not_fall_reason():
    (r,) = goodput.training_goodput(doc(run(first=10.0, last=9.8)), exp())
    assert r.reason == ("GPU 0: loss did not fall (10.00 -> 9.80, mean of the first and last 5 of 10 steps; at least "
                        "0.5 expected)")


@pytest.mark.parametrize(("steps", "status"), [(10, S.PASS), (9, S.ERROR)])
def test_ten_steps_at_least(steps, status):
    (r,) = goodput.training_goodput(doc(run(steps=steps)), exp())
    assert r.status is status
    if status is S.ERROR:
        assert r.reason == "GPU 0: training run incomplete (9 losses, model TFLOP/s 494.5)"


def test_a_nan_in_the_loss_fails_even_when_the_probe_said_finite():
    bad = run()
    bad["loss"][3] = float("nan")
    (r,) = goodput.training_goodput(doc(bad), exp())
    assert r.status is S.FAIL and "loss not finite" in r.reason


def test_catalog_floor_when_the_spec_sets_none():
    (r,) = goodput.training_goodput(doc(run(tf=390.0)), exp(floor=None))
    assert r.status is S.PASS and r.expected.floor == 385.0 and r.expected.source.startswith("catalog: ")


def ddp(families: dict[str, int], connections: int = 8) -> dict[str, Any]:
    return {"present": True, "world": 2, "transports": {"connections": connections, "families": families,
                                                         "examples": {f: f"line {f}" for f in families}}}


@pytest.mark.parametrize(("families", "status"), [
    ({"P2P": 6, "NVLS": 2}, S.PASS),
    ({"P2P": 6, "SHM": 2}, S.FAIL),
    ({"NET/Socket": 8}, S.FAIL),
    ({"NVLS": 8}, S.PASS),
])
def test_data_parallel_transports_over_mixed_families(families, status):
    rs = goodput.training_goodput(doc(run(0), run(1), ddp=ddp(families)), exp(gpus=2))
    (t,) = [r for r in rs if r.gpu is None]
    assert t.status is status
    if status is S.FAIL:
        bad = {f: n for f, n in families.items() if f not in ("P2P", "NVLS")}
        first = next(iter(bad))
        assert t.reason == ("data-parallel run over 2 GPUs: NCCL fell back to "
                            + ", ".join(f"{f} ({n} connections)" for f, n in bad.items())
                            + f" instead of NVLink/P2P — e.g. line {first}")
    else:
        assert t.reason == "data-parallel run over 2 GPUs: NCCL chose " + ", ".join(
            f"{f} x{n}" for f, n in families.items())


def test_no_channel_line_is_an_error_and_one_gpu_has_no_transport_check():
    rs = goodput.training_goodput(doc(run(0), run(1), ddp=ddp({}, connections=0)), exp(gpus=2))
    assert [r.status for r in rs if r.gpu is None] == [S.ERROR]
    assert all(r.gpu is not None for r in goodput.training_goodput(doc(run(0)), exp(gpus=1)))
