"""The compute gates (bf16/fp8 GEMM, HBM copy) per GPU against the catalog floors, on the real 2x H200 probe document,
and the gpu_burn verdict on real gpu-burn logs: the exact status, figure, floor and sentence of each case."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import compute, transfer
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from tests.unit.certify.fixtures_io import h200_doc, probe_quick, pub
from tests.unit.certify.test_gates_public import exp

H200 = exp("h200", 2, "passthrough")


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


# ---- torch_missing ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("torch", "why"), [
    (None, "PyTorch not importable on the node (not collected); provision installs it (software.probe_torch, role "
           "gridready_probe_runtime)"),
    ({"present": False, "import_error": "No module named 'torch'"},
     "PyTorch not importable on the node (No module named 'torch'); provision installs it (software.probe_torch, "
     "role gridready_probe_runtime)"),
    ({"present": True, "cuda_available": False, "gpus": [{"index": 0}]}, "PyTorch found no CUDA device"),
    ({"present": True, "cuda_available": True, "gpus": []}, "PyTorch found no CUDA device"),
    ({"present": True, "cuda_available": True, "gpus": [{"index": 0}]}, None),
])
def test_torch_missing_says_why(torch: dict[str, Any] | None, why: str | None) -> None:
    assert compute.torch_missing({"torch": torch} if torch is not None else {}) == why


def test_without_torch_each_gate_is_one_error_with_its_floor() -> None:
    doc = _doc()
    doc["torch"] = {"present": True, "cuda_available": False}
    (r,) = compute.gemm_fp8(doc, H200)
    assert (r.gate, r.status, r.reason) == ("gemm_fp8", S.ERROR, "PyTorch found no CUDA device")
    assert r.expected.floor == 1020.0 and r.unit == "TFLOP/s" and r.evidence == "torch" and r.gpu is None


# ---- the per-GPU figures ----------------------------------------------------------------------------------------

def test_healthy_capture_passes_each_gate_with_the_best_size() -> None:
    doc = _doc()
    bf16 = compute.gemm_bf16(doc, H200)
    assert [(r.gpu, r.status, r.reason) for r in bf16] == [
        (0, S.PASS, "GPU 0: bf16 dense GEMM 806.1 TFLOP/s"), (1, S.PASS, "GPU 1: bf16 dense GEMM 793.9 TFLOP/s")]
    assert bf16[0].measured == 806.086 and bf16[0].expected.floor == 600.0 and bf16[0].unit == "TFLOP/s"
    assert bf16[0].evidence == "torch.gpus[0].bf16_gemm_tflops" and bf16[0].gate == "gemm_bf16"
    fp8 = compute.gemm_fp8(doc, H200)
    assert [(r.gpu, r.status, r.reason) for r in fp8] == [
        (0, S.PASS, "GPU 0: fp8 GEMM 1379 TFLOP/s"), (1, S.PASS, "GPU 1: fp8 GEMM 1347 TFLOP/s")]
    assert fp8[1].measured == 1346.649 and fp8[1].evidence == "torch.gpus[1].fp8_gemm_tflops"
    hbm = compute.hbm_bandwidth(doc, H200)
    assert [(r.gpu, r.status, r.reason) for r in hbm] == [
        (0, S.PASS, "GPU 0: HBM copy (read+write) 4.049 TB/s"), (1, S.PASS, "GPU 1: HBM copy (read+write) 4.004 TB/s")]
    assert hbm[0].measured == 4.049 and hbm[0].unit == "TB/s" and hbm[0].expected.floor == 3.3


@pytest.mark.parametrize(("best", "status"), [(600.0, S.PASS), (599.9, S.FAIL)])
def test_bf16_floor_is_inclusive(best: float, status: S) -> None:
    doc = _doc()
    doc["torch"]["gpus"][1]["bf16_gemm_tflops"] = {"8192": best, "16384": best - 100}
    r = compute.gemm_bf16(doc, H200)[1]
    assert r.status is status and r.measured == best
    if status is S.FAIL:
        assert r.reason == "GPU 1: bf16 dense GEMM 600 TFLOP/s below the floor 600 TFLOP/s"


def test_fp8_below_the_floor_fails_with_both_figures() -> None:
    doc = _doc()
    doc["torch"]["gpus"][0]["fp8_gemm_tflops"] = {"16384": 812.44}
    r = compute.gemm_fp8(doc, H200)[0]
    assert (r.gate, r.status, r.gpu) == ("gemm_fp8", S.FAIL, 0)
    assert r.reason == "GPU 0: fp8 GEMM 812 TFLOP/s below the floor 1020 TFLOP/s"


def test_scalar_figure_and_spec_floor() -> None:
    doc = _doc()
    low = exp("h200", 2, "passthrough", floors={"hbm_copy_tbps": 4.01})
    res = compute.hbm_bandwidth(doc, low)
    assert [r.status for r in res] == [S.PASS, S.FAIL]
    assert res[1].reason == "GPU 1: HBM copy (read+write) 4 TB/s below the floor 4.01 TB/s"
    assert res[1].expected.source == "spec"


@pytest.mark.parametrize("raw", [None, {}, "fast"])
def test_missing_figure_is_an_error(raw: Any) -> None:
    doc = _doc()
    doc["torch"]["gpus"][0]["bf16_gemm_tflops"] = raw
    r = compute.gemm_bf16(doc, H200)[0]
    assert r.status is S.ERROR and r.reason == "GPU 0: no bf16 dense GEMM measurement" and r.measured is None
    assert r.gpu == 0 and r.evidence == "torch.gpus[0].bf16_gemm_tflops" and r.expected.floor == 600.0


def test_missing_figure_without_an_error_list() -> None:
    doc = _doc()
    doc.pop("errors", None)
    doc["torch"]["gpus"][1]["hbm_copy_tbps"] = None
    r = compute.hbm_bandwidth(doc, H200)[1]
    assert r.status is S.ERROR and r.reason == "GPU 1: no HBM copy (read+write) measurement"


def test_missing_figure_points_at_the_benchmark_error_of_that_gpu() -> None:
    doc = _doc()
    doc["torch"]["gpus"][1].pop("fp8_gemm_tflops")
    doc["torch"]["gpus"][0].pop("fp8_gemm_tflops")
    doc["errors"] = [{"collector": "torch.fp8_gemm", "gpu": "1", "error": "RuntimeError: no fp8"},
                     {"collector": "nvml", "gpu": "0", "error": "unrelated"}]
    res = compute.gemm_fp8(doc, H200)
    assert [r.reason for r in res] == ["GPU 0: no fp8 GEMM measurement",
                                       "GPU 1: no fp8 GEMM measurement (benchmark raised, see errors)"]


@pytest.mark.parametrize(("sag", "extra"), [(600.0, False), (412.5, True)])
def test_bf16_sag_during_the_burn_below_the_floor_fails(sag: float, extra: bool) -> None:
    doc = _doc()
    burn = {"min_tflops": sag, "seconds": 30.0}
    doc["torch"]["gpus"][0]["gemm_burn"] = burn
    res = [r for r in compute.gemm_bf16(doc, H200) if r.gpu == 0]
    assert res[0].status is S.PASS
    if extra:
        assert len(res) == 2 and res[1].status is S.FAIL and res[1].measured == burn
        assert res[1].reason == "GPU 0: bf16 GEMM sagged to 412 TFLOP/s during a 30 s burn"
        assert res[1].expected.floor == 600.0 and res[1].unit == "TFLOP/s"
    else:
        assert len(res) == 1
    assert len(compute.gemm_fp8(doc, H200)) == 2  # the burn is a bf16 figure only


def test_burn_without_minimum_adds_nothing() -> None:
    doc = _doc()
    doc["torch"]["gpus"][0]["gemm_burn"] = {"min_tflops": None, "seconds": 30}
    assert len(compute.gemm_bf16(doc, H200)) == 2


# ---- gpu_burn on the real logs ----------------------------------------------------------------------------------

def _burn(name: str) -> dict[str, Any]:
    return doc_from_outputs({"gpu_burn": pub("gpu-burn", name)})


def test_gpu_burn_not_run_gives_no_verdict() -> None:
    assert compute.gpu_burn({}, exp("h100", 8)) == []


def test_gpu_burn_all_faulty_names_every_gpu_in_order() -> None:
    (r,) = compute.gpu_burn(_burn("FAIL-all-FAULTY"), exp("h100", 16))
    assert r.status is S.FAIL and r.gate == "gpu_burn" and r.evidence == "raw.gpu_burn"
    assert r.reason == f"gpu_burn: GPU {', '.join(map(str, range(16)))} FAULTY (exit code 0 ignored)"
    assert r.measured == {str(i): "FAULTY" for i in range(16)}


def test_gpu_burn_ok_log_passes_and_one_faulty_gpu_fails() -> None:
    doc = _burn("ok-all-GPUs")
    (ok,) = compute.gpu_burn(doc, exp("h100", 8))
    assert ok.status is S.PASS and ok.reason == "gpu_burn: all 8 GPUs OK"
    assert ok.evidence == "raw.gpu_burn" and ok.measured == {str(i): "OK" for i in range(8)}
    doc["gpu_burn"]["parsed"]["gpus"]["10"] = "FAULTY"
    doc["gpu_burn"]["parsed"]["gpus"]["3"] = "FAULTY"
    doc["gpu_burn"]["rc"] = 1
    (bad,) = compute.gpu_burn(doc, exp("h100", 8))
    assert bad.status is S.FAIL and bad.reason == "gpu_burn: GPU 3, 10 FAULTY (exit code 1 ignored)"


def test_gpu_burn_testing_fewer_gpus_than_the_node_has_fails() -> None:
    (r,) = compute.gpu_burn(_burn("ok-all-GPUs"), exp("h100", 16))
    assert r.status is S.FAIL and r.reason == "gpu_burn tested 8 GPUs, the node has 16"
    assert r.evidence == "raw.gpu_burn" and r.measured == {str(i): "OK" for i in range(8)}


def test_gpu_burn_without_a_tested_line_is_judged_on_the_verdicts() -> None:
    doc = _burn("ok-all-GPUs")
    doc["gpu_burn"]["parsed"]["tested"] = None
    (r,) = compute.gpu_burn(doc, exp("h100", 16))
    assert r.status is S.PASS


@pytest.mark.parametrize(("edit", "reason"), [
    ({"timed_out": True}, "gpu_burn printed no per-GPU verdict (timed out)"),
    ({"parsed": {"tested": 8, "gpus": {}}}, "gpu_burn printed no per-GPU verdict"),
    ({"parsed": None}, "gpu_burn printed no per-GPU verdict"),
])
def test_gpu_burn_without_verdicts_is_an_error(edit: dict[str, Any], reason: str) -> None:
    doc = _burn("ok-all-GPUs")
    doc["gpu_burn"].update(edit)
    (r,) = compute.gpu_burn(doc, exp("h100", 8))
    assert r.status is S.ERROR and r.reason == reason and r.evidence == "raw.gpu_burn"


# ---- every GPU nvidia-smi or the inventory lists is judged, not only those torch enumerated (issue 46) -----------

def _one_torch_gpu() -> dict[str, Any]:
    """The real 2-GPU capture where CUDA enumerated GPU 0 only (GPU 1 failed to initialise or was hidden)."""
    doc = h200_doc()
    doc["torch"]["gpus"] = [g for g in doc["torch"]["gpus"] if g["index"] == 0]
    return doc


@pytest.mark.parametrize("gate", ["gemm_bf16", "hbm_bandwidth", "h2d_bandwidth"])
def test_a_gpu_torch_did_not_enumerate_fails_naming_it(gate: str) -> None:
    fn = getattr(compute, gate, None) or getattr(transfer, gate)
    res = fn(_one_torch_gpu(), exp("h200", 2, "passthrough"))
    (r,) = [r for r in res if r.gpu == 1]
    assert r.status is S.FAIL and r.reason.startswith("GPU 1 (0000:00:07.0): listed by nvidia-smi or the inventory "
                                                      "but not enumerated by PyTorch/CUDA")


def test_inventory_count_beyond_nvidia_smi_is_judged_too() -> None:
    res = compute.hbm_bandwidth(_one_torch_gpu(), exp("h200", 4, "passthrough"))
    assert [(r.gpu, r.status) for r in res if r.status is S.FAIL] == [(1, S.FAIL), (2, S.FAIL), (3, S.FAIL)]
