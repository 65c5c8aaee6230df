"""Training goodput's every verdict as the whole record it returns (gate, status, reason, measured figures,
expected floor and its source, unit, evidence): n/a for the quick profile, the missing section and its reason, no
floor, GPUs the run left out, an incomplete or empty loss curve, a loss the probe marked non-finite, the loss-drop
rounding, and the data-parallel transport check (no run, no channel line, fallbacks with and without an example)."""

from __future__ import annotations

from typing import Any

from gridready import catalog
from gridready.certify import goodput
from gridready.certify.expectations import Expectations
from gridready.spec.certification import CertificationSpec

H200 = catalog.lookup("h200")
assert H200 is not None
SOURCE = f"catalog: H200-SXM-141GB ({H200.goodput_source})"
TRANSPORTS = {"equals": ["P2P", "NVLS"], "floor": None, "ceiling": None,
              "source": "NCCL transports inside a node: NVLink/PCIe peer access or NVLS, never sockets or host memory"}


def exp(gpus: int = 1, sku: catalog.Sku = H200, floor: float | None = None) -> Expectations:
    spec = {"floors": {"goodput_model_tflops": floor}} if floor is not None else {}
    return Expectations(node="n1", sku=sku, gpus=gpus, spec=CertificationSpec.model_validate(spec))


def dump(results: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in results]


def record(status: str, reason: str, **kw: Any) -> dict[str, Any]:
    base = {"gate": "training_goodput", "node": "n1", "gpu": None, "hca": None, "status": status, "measured": None,
            "expected": None, "unit": None, "reason": reason, "evidence": None, "required": True, "waived": False}
    return {**base, **kw}


def row(i: int, loss: list[float], tf: float | None = 494.5, **over: Any) -> dict[str, Any]:
    return {"index": i, "model_tflops": tf, "loss": loss, "loss_finite": True, "tokens_per_s": 33000.0,
            "params": 968_065_024, "tokens_per_step": 16384, "steps": len(loss), "peak_mem_gib": 36.2, **over}


def measured(tf: float | None, loss: list[float], mfu: float | None, drop: float | None) -> dict[str, Any]:
    return {"model_tflops": tf, "mfu_pct": mfu, "tokens_per_s": 33000.0, "params": 968_065_024,
            "tokens_per_step": 16384, "steps": len(loss), "loss": loss, "loss_drop": drop, "peak_mem_gib": 36.2}


def doc(*rows: dict[str, Any], ddp: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"goodput": {"present": True, "gpus": list(rows), "ddp": ddp}}


FALLING = [10.5, 10.4, 10.3, 10.2, 10.1, 9.4, 9.3, 9.2, 9.1, 9.0]  # first five 10.3, last five 9.2: drop 1.1


def test_the_quick_profile_is_not_applicable_with_the_probe_reason_or_the_default():
    got = goodput.training_goodput({"goodput": {"ran": False, "reason": "profile quick"}}, exp())
    assert dump(got) == [record("skipped", "n/a: profile quick", required=False)]
    got = goodput.training_goodput({"goodput": {"ran": False}}, exp())
    assert dump(got) == [record("skipped", "n/a: the profile runs no training steps", required=False)]


def test_no_section_is_an_error_with_the_probe_reason_or_the_default():
    assert dump(goodput.training_goodput({}, exp())) == [record(
        "error", "no training goodput figures: no goodput section in the probe document (probe without the goodput "
        "step)", evidence="goodput")]
    got = goodput.training_goodput({"goodput": {"present": False, "reason": "torch is not installed"}}, exp())
    assert dump(got) == [record("error", "no training goodput figures: torch is not installed", evidence="goodput")]


def test_a_sku_without_a_floor_and_a_spec_without_one_is_an_error_naming_the_setting():
    bare = H200.model_copy(update={"goodput_floor_tflops": None})
    assert dump(goodput.training_goodput(doc(row(0, FALLING)), exp(sku=bare))) == [record(
        "error", "no goodput floor for H200-SXM-141GB: set certification.floors.goodput_model_tflops",
        unit="TFLOP/s")]


def test_gpus_the_run_left_out_are_named_in_one_error():
    got = goodput.training_goodput(doc(row(0, FALLING)), exp(gpus=3))
    floor = {"floor": 385.0, "ceiling": None, "equals": None, "source": SOURCE}
    assert dump(got)[0] == record("error", "no training run on GPU 1, 2 of 3", expected=floor,
                                  evidence="raw.goodput")
    # 3 GPUs: the data-parallel check follows (no run recorded), then GPU 0's own verdict
    assert [r.status for r in got] == ["error", "error", "pass"] and got[2].gpu == 0


def test_the_pass_record_in_full():
    got = goodput.training_goodput(doc(row(0, FALLING)), exp(floor=400.0))
    assert dump(got) == [record(
        "pass", "GPU 0: 494.5 model TFLOP/s, 50.0% MFU of 989, loss 10.30 -> 9.20 in 10 steps", gpu=0,
        measured=measured(494.5, FALLING, 50.0, 1.1), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 400.0, "ceiling": None, "equals": None, "source": "spec"})]


def test_below_the_floor_in_full():
    got = goodput.training_goodput(doc(row(1, FALLING, tf=296.7)), exp(floor=300.0))
    assert dump(got)[-1] == record(
        "fail", "GPU 1: 296.7 model TFLOP/s (30.0% MFU of 989) is below 300", gpu=1,
        measured=measured(296.7, FALLING, 30.0, 1.1), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 300.0, "ceiling": None, "equals": None, "source": "spec"})


def test_no_tflops_figure_with_a_full_loss_curve_is_incomplete():
    got = goodput.training_goodput(doc(row(0, FALLING, tf=None)), exp())
    assert dump(got) == [record(
        "error", "GPU 0: training run incomplete (10 losses, model TFLOP/s None)", gpu=0,
        measured=measured(None, FALLING, None, 1.1), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 385.0, "ceiling": None, "equals": None, "source": SOURCE})]


def test_an_empty_loss_curve_is_incomplete():
    got = goodput.training_goodput(doc(row(0, [])), exp())
    assert dump(got) == [record(
        "error", "GPU 0: training run incomplete (0 losses, model TFLOP/s 494.5)", gpu=0,
        measured=measured(494.5, [], 50.0, None), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 385.0, "ceiling": None, "equals": None, "source": SOURCE})]


def test_a_loss_the_probe_marked_not_finite_fails_naming_the_last_five():
    twelve = [10.5, 10.4, 10.3, 10.2, 10.1, 9.9, 9.6, 9.4, 9.3, 9.2, 9.1, 9.0]  # the last five are not loss[5:]
    got = goodput.training_goodput(doc(row(0, twelve, loss_finite=False)), exp())
    assert dump(got) == [record(
        "fail", "GPU 0: loss not finite during training: [9.4, 9.3, 9.2, 9.1, 9.0]", gpu=0,
        measured=measured(494.5, twelve, 50.0, 1.1), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 385.0, "ceiling": None, "equals": None, "source": SOURCE})]


def test_a_row_without_the_finite_flag_is_judged_on_its_losses():
    r = row(0, FALLING)
    del r["loss_finite"]
    assert [x.status for x in goodput.training_goodput(doc(r), exp())] == ["pass"]


def test_a_flat_loss_in_full_and_the_drop_rounded_to_three_places():
    flat = [10.0, 10.0, 10.0, 10.0, 10.0, 9.81234, 9.81234, 9.81234, 9.81234, 9.81234]
    got = goodput.training_goodput(doc(row(0, flat)), exp())
    assert dump(got) == [record(
        "fail", "GPU 0: loss did not fall (10.00 -> 9.81, mean of the first and last 5 of 10 steps; at least 0.5 "
        "expected)", gpu=0, measured=measured(494.5, flat, 50.0, 0.188), unit="TFLOP/s", evidence="raw.goodput",
        expected={"floor": 385.0, "ceiling": None, "equals": None, "source": SOURCE})]


def ddp(**over: Any) -> dict[str, Any]:
    return {"present": True, "world": 2, "model_tflops_per_gpu": 470.2, "loss": [10.4, 9.9], **over}


def transport(d: dict[str, Any] | None) -> dict[str, Any]:
    (t,) = [r for r in dump(goodput.training_goodput(doc(row(0, FALLING), row(1, FALLING), ddp=d), exp(gpus=2)))
            if r["gpu"] is None]
    return t


def ddp_measured(fams: dict[str, int]) -> dict[str, Any]:
    return {"world": 2, "transports": fams, "model_tflops_per_gpu": 470.2, "loss": [10.4, 9.9]}


def test_no_data_parallel_run_is_an_error_with_its_reason_or_the_default():
    assert transport(None) == record("error", "data-parallel training over 2 GPUs: no data-parallel run recorded",
                                     evidence="goodput.ddp")
    assert transport({"present": False, "reason": "ProcessRaisedException: NCCL error"}) == record(
        "error", "data-parallel training over 2 GPUs: ProcessRaisedException: NCCL error", evidence="goodput.ddp")


def test_no_channel_line_in_full():
    fams: dict[str, int] = {}
    assert transport(ddp(transports={"connections": 0, "families": fams})) == record(
        "error", "data-parallel run: no NCCL channel line recorded (NCCL_DEBUG=INFO): the transport NCCL chose is "
        "unknown", measured=ddp_measured(fams), expected=TRANSPORTS, evidence="raw.goodput (ddp.nccl_debug_tail)")


def test_two_fallbacks_in_full_the_first_with_its_line():
    fams = {"P2P": 4, "SHM": 2, "NET/Socket": 2}
    line = "n1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"
    assert transport(ddp(transports={"connections": 8, "families": fams, "examples": {"SHM": line}})) == record(
        "fail", "data-parallel run over 2 GPUs: NCCL fell back to SHM (2 connections), NET/Socket (2 connections) "
        f"instead of NVLink/P2P — e.g. {line}", measured=ddp_measured(fams), expected=TRANSPORTS,
        evidence="raw.goodput (ddp.nccl_debug_tail)")


def test_a_fallback_without_an_example_line_names_none():
    fams = {"SHM": 8}
    t = transport(ddp(transports={"connections": 8, "families": fams}))
    assert t["status"] == "fail"
    assert t["reason"] == "data-parallel run over 2 GPUs: NCCL fell back to SHM (8 connections) instead of " \
                          "NVLink/P2P — e.g. "


def test_the_transport_pass_in_full():
    fams = {"P2P": 6, "NVLS": 2}
    assert transport(ddp(transports={"connections": 8, "families": fams})) == record(
        "pass", "data-parallel run over 2 GPUs: NCCL chose P2P x6, NVLS x2", measured=ddp_measured(fams),
        expected=TRANSPORTS, evidence="raw.goodput (ddp.nccl_debug_tail)")
