"""The SDC probe (gridready/probe/sdc.py) in-process against a torch double (tests/unit/probe/fake_torch_sdc.py): the
digest equals the documented two position-weighted sums modulo 2^64 (computed here in plain Python), one flipped
bit changes both halves, the seeded inputs per dtype (fp8's second operand column-major, as torch._scaled_mm wants),
the warm-up's GEMM count on a fake clock, each GPU's row (repeats, majority digest, repeat check, host sha256, TF32
off during the GEMMs and restored after), run_all's defaults and its per-GPU errors, parse's schema check."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from typing import Any

import numpy as np
import pytest

from gridready.probe import sdc
from tests.unit.probe import fake_torch_sdc as ft

M64 = 2**64
GOLDEN, MIX = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9


def reference_digest(bits: list[int]) -> str:
    """The module docstring's digest: sum of bits[i] x odd weight, two weight streams, modulo 2^64, hex."""
    s1 = sum(b * (2 * (i * GOLDEN + 0x2545F491) + 1) for i, b in enumerate(bits)) % M64
    s2 = sum(b * (2 * ((i ^ 0x5DEECE66D) * MIX) + 1) for i, b in enumerate(bits)) % M64
    return f"{s1:016x}{s2:016x}"


def signed(patterns: np.ndarray, width: int) -> list[int]:
    return [int(p) - (1 << width) if int(p) >> (width - 1) else int(p) for p in patterns.reshape(-1)]


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> ft.FakeTorch:
    fake = ft.FakeTorch(gpus=("NVIDIA H200", "NVIDIA H200"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(sdc, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


def bf16(values: list[float]) -> ft.Tensor:
    return ft.Tensor.of(ft.encode(np.array(values, dtype=np.float32), ft.bfloat16), ft.bfloat16, ft.Device(0))


def test_digest_of_bf16_is_the_documented_sums_over_signed_16_bit_patterns(torch):
    t = bf16([1.0, -2.0, 0.5, -0.0, 3.140625, 65280.0, -1e-3])
    want = reference_digest(signed(t.data, 16))
    assert sdc.digest(torch, t) == want and len(want) == 32
    # the patterns: 1.0 is 0x3F80, -2.0 0xC000 (negative as int16)
    assert signed(t.data, 16)[:2] == [0x3F80, 0xC000 - 0x10000]


def test_digest_of_fp32_reads_32_bit_patterns_of_a_2d_output(torch):
    vals = np.array([[1.0, -1.5, 2.0 ** -20], [7.0, -3.25e5, 0.1]], dtype=np.float32)
    t = ft.Tensor.of(vals, ft.float32, ft.Device(0))
    assert sdc.digest(torch, t) == reference_digest(signed(vals.view(np.uint32), 32))


def test_digest_of_a_single_element_and_a_zero_output(torch):
    assert sdc.digest(torch, bf16([1.0])) == reference_digest([0x3F80])
    zero = sdc.digest(torch, bf16([0.0] * 4))
    assert zero == "0" * 32


@pytest.mark.parametrize(("pos", "bit"), [(0, 0), (5, 7), (9, 14), (9, 15)])
def test_one_flipped_bit_changes_both_halves(torch, pos, bit):
    t = bf16([float(v) for v in range(1, 11)])
    flipped = t.data.copy()
    flipped[pos] ^= np.uint16(1 << bit)
    a, b = sdc.digest(torch, t), sdc.digest(torch, ft.Tensor.of(flipped, ft.bfloat16, ft.Device(0)))
    assert a[:16] != b[:16] and a[16:] != b[16:]
    assert b == reference_digest(signed(flipped, 16))


def test_the_digest_reads_a_transposed_output_in_its_logical_order(torch):
    vals = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ft.Tensor.of(vals, ft.float32, ft.Device(0)).t()
    assert sdc.digest(torch, t) == reference_digest(signed(np.ascontiguousarray(vals.T).view(np.uint32), 32))


def drawn(torch: ft.FakeTorch, dev: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The two float32 matrices a seeded generator on GPU `dev` gives, drawn here without the module."""
    g = torch.Generator(device=f"cuda:{dev}").manual_seed(seed)
    return (torch.randn(n, n, device=dev, generator=g, dtype=torch.float32).values(),
            torch.randn(n, n, device=dev, generator=g, dtype=torch.float32).values())


@pytest.mark.parametrize(("dtype", "want"), [("bf16", ft.bfloat16), ("fp8", ft.float8_e4m3fn), ("fp32", ft.float32)])
def test_inputs_are_the_seeded_draws_rounded_to_the_dtype(torch, dtype, want):
    a, b = sdc._inputs(torch, 1, dtype, 6, 30)
    ra, rb = drawn(ft.FakeTorch(), 1, 6, 30)
    assert (a.dtype, b.dtype, a.shape, b.shape) == (want, want, (6, 6), (6, 6))
    assert np.array_equal(a.values(), ft.decode(ft.encode(ra, want), want))
    assert np.array_equal(b.values(), ft.decode(ft.encode(rb, want), want))
    assert [c[1:] for c in torch.calls if c[0] == "randn"] == [((6, 6), 1, ft.Device("cuda:1"), ft.float32)] * 2


def test_inputs_fp8_second_operand_is_column_major_and_other_seeds_differ(torch):
    a, b = sdc._inputs(torch, 0, "fp8", 4, 30)
    assert a.data.flags.c_contiguous and b.data.flags.f_contiguous and not b.data.flags.c_contiguous
    a2, _ = sdc._inputs(torch, 0, "fp8", 4, 31)
    a3, _ = sdc._inputs(torch, 0, "fp8", 4, 30)
    assert not np.array_equal(a.data, a2.data) and np.array_equal(a.data, a3.data)
    assert not np.array_equal(a.values(), b.values())


def test_gemm_per_dtype(torch):
    a, b = sdc._inputs(torch, 0, "bf16", 5, 30)
    out = sdc._gemm(torch, "bf16", a, b)
    ref = ft.encode((a.values().astype(np.float64) @ b.values().astype(np.float64)).astype(np.float32), ft.bfloat16)
    assert out.dtype is ft.bfloat16 and np.array_equal(out.data, ref)
    a8, b8 = sdc._inputs(torch, 0, "fp8", 5, 30)
    out8 = sdc._gemm(torch, "fp8", a8, b8)
    ref8 = ft.encode((a8.values().astype(np.float64) @ b8.values().astype(np.float64)).astype(np.float32),
                     ft.bfloat16)
    assert out8.dtype is ft.bfloat16 and np.array_equal(out8.data, ref8)
    assert [c[0] for c in torch.calls if c[0] in ("mm", "_scaled_mm")] == ["mm", "_scaled_mm"]


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_no_warm_up_runs_nothing(torch, seconds):
    assert sdc._warm(torch, 0, seconds) == 0.0
    assert torch.calls == []


def test_warm_up_runs_twenty_gemms_per_synchronize_until_the_time_is_spent(torch):
    # each synchronize costs 0.25 s on the fake clock: 4 rounds reach 1.0 s, the loop stops at 1.0 (not < 1.0)
    assert sdc._warm(torch, 1, 1.0) == 1.0
    assert torch.count("mm") == 80 and torch.count("synchronize") == 4
    assert [c for c in torch.calls if c[0] == "randn"] == [("randn", (8192, 8192), 1, None, ft.bfloat16)]
    assert {c[1:3] for c in torch.calls if c[0] == "mm"} == {(ft.bfloat16, (8192, 8192))}
    assert {c[1] for c in torch.calls if c[0] == "synchronize"} == {1}


def test_the_row_warms_the_gpu_it_measures(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    row = sdc.run_gpu(1, ["bf16_gemm_6"], repeats=1, warm_s=0.25)
    assert row["warm_s"] == 0.25
    assert [c for c in torch.calls if c[0] == "randn" and c[1] == (8192, 8192)] == [
        ("randn", (8192, 8192), 1, None, ft.bfloat16)]


def test_warm_up_rounds_the_seconds_to_hundredths(torch):
    torch.sync_s = 0.3337
    assert sdc._warm(torch, 0, 0.5) == 0.67


SMALL = (("bf16_gemm_6", "bf16", 6), ("fp8_gemm_8", "fp8", 8), ("fp32_gemm_5", "fp32", 5))


def expected_digest(torch: ft.FakeTorch, dev: int, dtype: str, n: int, seed: int) -> str:
    ra, rb = drawn(torch, dev, n, seed)
    if dtype == "fp32":
        x, y, out = ra, rb, ft.float32
    else:
        want = ft.bfloat16 if dtype == "bf16" else ft.float8_e4m3fn
        x, y, out = ft.decode(ft.encode(ra, want), want), ft.decode(ft.encode(rb, want), want), ft.bfloat16
    product = ft.encode((x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32), out)
    return reference_digest(signed(product.view(np.uint16 if out is ft.bfloat16 else np.uint32), 8 * out.itemsize))


def test_one_gpu_row_in_full(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    row = sdc.run_gpu(1, ["fp32_gemm_5", "bf16_gemm_6"], repeats=3, warm_s=0.5)
    d_bf16, d_fp32 = (expected_digest(ft.FakeTorch(), 1, "bf16", 6, 30),
                      expected_digest(ft.FakeTorch(), 1, "fp32", 5, 30))
    assert row == {"index": 1, "name": "NVIDIA H200", "warm_s": 0.5, "workloads": {
        "bf16_gemm_6": {"dtype": "bf16", "n": 6, "seed": 30, "repeats": 3, "digest": d_bf16,
                        "digests": [d_bf16] * 3, "repeat_ok": True, "seconds_per_check": round(0.25 / 3, 4)},
        "fp32_gemm_5": {"dtype": "fp32", "n": 5, "seed": 30, "repeats": 3, "digest": d_fp32,
                        "digests": [d_fp32] * 3, "repeat_ok": True, "seconds_per_check": round(0.25 / 3, 4)}}}
    # the GEMMs ran on GPU 1 with TF32 off; the setting is restored after, the cache emptied once
    assert {(c[3], c[4]) for c in torch.calls if c[0] == "mm"} == {(False, 1)}
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert [c for c in torch.calls if c[0] in ("device", "empty_cache")] == [("device", 1), ("empty_cache", 1)]


def test_fp8_and_a_seed_in_the_row(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    row = sdc.run_gpu(0, ["fp8_gemm_8"], repeats=2, warm_s=0, seed=7)
    d = expected_digest(ft.FakeTorch(), 0, "fp8", 8, 7)
    assert row["warm_s"] == 0.0 and row["workloads"]["fp8_gemm_8"]["digests"] == [d, d]
    assert row["workloads"]["fp8_gemm_8"]["seed"] == 7 and row["workloads"]["fp8_gemm_8"]["dtype"] == "fp8"


def test_no_repeat_asked_still_runs_once(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    w = sdc.run_gpu(0, ["bf16_gemm_6"], repeats=0, warm_s=0)["workloads"]["bf16_gemm_6"]
    assert (w["repeats"], len(w["digests"]), w["seconds_per_check"]) == (1, 1, 0.25)


def test_a_flipped_bit_in_one_repeat_is_outvoted_and_breaks_the_repeat(monkeypatch):
    fake = ft.FakeTorch(flip=frozenset({2}))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(sdc, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    w = sdc.run_gpu(0, ["bf16_gemm_6"], repeats=3, warm_s=0, host_sha256=True)["workloads"]["bf16_gemm_6"]
    good = expected_digest(ft.FakeTorch(), 0, "bf16", 6, 30)
    assert w["digest"] == good and w["digests"][0] == good == w["digests"][2] and w["digests"][1] != good
    assert w["repeat_ok"] is False and w["host_sha256_repeat_ok"] is False
    ra, rb = drawn(ft.FakeTorch(), 0, 6, 30)
    x, y = (ft.decode(ft.encode(v, ft.bfloat16), ft.bfloat16).astype(np.float64) for v in (ra, rb))
    first = ft.encode((x @ y).astype(np.float32), ft.bfloat16)  # the first repeat, not the corrupted second
    assert w["host_sha256"] == hashlib.sha256(first.astype("<u2").tobytes()).hexdigest()


def test_host_sha256_is_the_sha256_of_the_output_bytes(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    w = sdc.run_gpu(0, ["bf16_gemm_6"], repeats=2, warm_s=0, host_sha256=True)["workloads"]["bf16_gemm_6"]
    ra, rb = drawn(ft.FakeTorch(), 0, 6, 30)
    x, y = (ft.decode(ft.encode(v, ft.bfloat16), ft.bfloat16).astype(np.float64) for v in (ra, rb))
    product = ft.encode((x @ y).astype(np.float32), ft.bfloat16)
    assert w["host_sha256"] == hashlib.sha256(product.astype("<u2").tobytes()).hexdigest()
    assert w["host_sha256_repeat_ok"] is True
    assert "host_sha256" not in sdc.run_gpu(0, ["bf16_gemm_6"], repeats=1, warm_s=0)["workloads"]["bf16_gemm_6"]


def test_tf32_is_restored_even_when_a_gpu_fails(torch, monkeypatch):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.fail_on = frozenset({0})
    with pytest.raises(RuntimeError, match="uncorrectable ECC"):
        sdc.run_gpu(0, ["bf16_gemm_8192"], repeats=1, warm_s=0)
    assert torch.backends.cuda.matmul.allow_tf32 is True
    torch.backends.cuda.matmul.allow_tf32 = False  # a caller that had it off gets it back off
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    sdc.run_gpu(1, ["bf16_gemm_6"], repeats=1, warm_s=0)
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_run_all_defaults_and_a_failing_gpu_kept_apart(torch, monkeypatch):
    seen: list[tuple[Any, ...]] = []

    def run_gpu(d: int, workloads: list[str], repeats: int, warm_s: float) -> dict[str, Any]:
        seen.append((d, workloads, repeats, warm_s))
        if d == 0:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return {"index": d}

    monkeypatch.setattr(sdc, "run_gpu", run_gpu)
    errors: list[dict[str, str]] = []
    doc = json.loads(sdc.run_all({}, errors))
    first3 = ["bf16_gemm_8192", "fp8_gemm_8192", "fp32_gemm_4096"]
    assert seen == [(0, first3, 4, 1.0), (1, first3, 4, 1.0)]
    assert doc == {"schema": "gridready.sdc/1", "tool": "gridready.probe.sdc", "torch": "2.9.0+cu130",
                   "cuda": "13.0", "workloads": first3, "gpus": [{"index": 1}]}
    assert errors == [{"collector": "torch.sdc", "gpu": "0",
                       "error": "RuntimeError: CUDA error: an illegal memory access was encountered"}]


def test_run_all_reads_the_profile(torch, monkeypatch):
    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sdc, "run_gpu", lambda *a: seen.append(a) or {"index": a[0]})
    doc = json.loads(sdc.run_all({"sdc_workloads": ["bf16_gemm_16384"], "sdc_repeats": "6", "sdc_warm_s": "2.5"},
                                 []))
    assert seen == [(0, ["bf16_gemm_16384"], 6, 2.5), (1, ["bf16_gemm_16384"], 6, 2.5)]
    assert doc["workloads"] == ["bf16_gemm_16384"] and [g["index"] for g in doc["gpus"]] == [0, 1]


def test_run_all_end_to_end_through_the_double_parses_back(torch, monkeypatch):
    monkeypatch.setattr(sdc, "WORKLOADS", SMALL)
    doc = sdc.parse(sdc.run_all({"sdc_repeats": 2, "sdc_warm_s": 0}, []))
    assert [g["index"] for g in doc["gpus"]] == [0, 1]
    assert doc["gpus"][0]["workloads"]["fp8_gemm_8"]["digest"] == expected_digest(ft.FakeTorch(), 0, "fp8", 8, 30)
    assert all(w["repeat_ok"] for g in doc["gpus"] for w in g["workloads"].values())


def test_parse_recomputes_the_repeat_check_from_the_digests():
    text = json.dumps({"schema": "gridready.sdc/1", "gpus": [
        {"index": 0, "workloads": {"a": {"digests": ["x", "x"], "repeat_ok": False},
                                   "b": {"digests": ["x", "y"], "repeat_ok": True},
                                   "c": {"digests": [], "repeat_ok": True}}},
        {"index": 1}, {"index": 2, "workloads": None}]})
    doc = sdc.parse(text)
    assert {n: w["repeat_ok"] for n, w in doc["gpus"][0]["workloads"].items()} == {"a": True, "b": False,
                                                                                   "c": False}
    assert sdc.parse(json.dumps({"schema": "gridready.sdc/1", "gpus": None}))["gpus"] is None


@pytest.mark.parametrize("text", ['{"schema": "gridready.sdc/2"}', "[1]", '{"gpus": []}'])
def test_parse_refuses_another_document(text):
    with pytest.raises(ValueError, match=r"^not a gridready\.sdc/1 document$"):
        sdc.parse(text)
