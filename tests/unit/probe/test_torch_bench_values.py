"""torch micro-benchmarks figure by figure, in process, on a torch stand-in with a simulated CUDA clock
(tests/unit/probe/fake_torch.py): each op takes the time a given rate gives it, so every figure the module reports
must come back as that rate (TFLOP/s = 2 n^3 / s / 1e12 for an n x n GEMM, TB/s counting read + write of a device
copy, GB/s = 1e9 B/s one way), the best of `trials`, warm-up calls outside the timed window, what a failed step or
pair yields, and the document shape certify reads (torch.gpus[] and torch.peer[])."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import gridready.probe
from tests.unit.probe.fake_torch import FakeTorch, Op, bfloat16, float8_e4m3fn, uint8

GIB = 1 << 30
# rates the simulated GPUs run at (an H100 SXM's order of magnitude)
BF16, FP8 = 700e12, 1400e12  # FLOP/s
HBM, H2D, D2H, PEER = 3.3e12, 55e9, 50e9, 350e9  # B/s; HBM counts read + write


def rated(op: Op) -> float:
    """Seconds one op takes at the rates above."""
    if op.kind in ("mm", "scaled_mm"):
        n = op.args[0].shape[0]
        return 2 * n**3 / (BF16 if op.kind == "mm" else FP8)
    dst, src = op.args
    if src.device is None:
        return src.nbytes / H2D
    if dst.device is None:
        return src.nbytes / D2H
    return 2 * src.nbytes / HBM if src.device == dst.device else src.nbytes / PEER


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeTorch], ModuleType]:
    """Imports gridready.probe.torch_bench against `fake` as its torch; sys.modules and the package as they were
    after the test."""

    def _load(fake: FakeTorch) -> ModuleType:
        name = "gridready.probe.torch_bench"
        monkeypatch.setitem(sys.modules, "torch", fake)
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setattr(gridready.probe, "torch_bench", None, raising=False)
        del sys.modules[name]
        delattr(gridready.probe, "torch_bench")
        from gridready.probe import torch_bench

        monkeypatch.setattr(torch_bench, "time", fake.time)
        return torch_bench

    return _load


def near(x: Any) -> Any:
    """Equal to 1e-9: a unit off by one part in 1e12 (1e12 + 1) shows."""
    return pytest.approx(x, rel=1e-9)


def by_seq(costs: list[float]) -> Callable[[Op], float]:
    """The n-th op (of its kind) takes costs[n] seconds."""
    return lambda op: costs[op.seq]


def test_timed_is_seconds_per_call_after_the_warmup(load: Callable[[FakeTorch], ModuleType]) -> None:
    warm, timed = [1.0, 2.0, 3.0], [0.002, 0.004, 0.003, 0.001, 0.005]
    fake = FakeTorch(["H100"], by_seq(warm + timed))
    tb = load(fake)
    a = fake.randn(8, 8, device=0, dtype=bfloat16)
    assert tb._timed(lambda: fake.mm(a, a), 5) == near(sum(timed) / 5)
    assert len(fake.ops) == 8
    assert fake.now >= fake.busy[0]  # the end event was waited for


def test_timed_with_a_given_warmup(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], by_seq([9.0, 0.5, 0.25]))
    tb = load(fake)
    a = fake.randn(8, 8, device=0, dtype=bfloat16)
    assert tb._timed(lambda: fake.mm(a, a), 2, warmup=1) == near(0.375)
    fake2 = FakeTorch(["H100"], by_seq([0.5, 0.25]))
    tb = load(fake2)
    b = fake2.randn(8, 8, device=0, dtype=bfloat16)
    assert tb._timed(lambda: fake2.mm(b, b), 2, warmup=0) == near(0.375)


def test_timed_uses_timing_events_on_the_current_device(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100", "H100"], lambda op: 0.01)
    tb = load(fake)
    a = fake.randn(8, 8, device=1, dtype=bfloat16)
    with fake.cuda.device(1):
        assert tb._timed(lambda: fake.mm(a, a), 4) == near(0.01)


def test_best_time_is_the_fastest_trial_and_only_the_first_warms_up_long(
        load: Callable[[FakeTorch], ModuleType]) -> None:
    # trial 0: 3 warm-up + 2 timed calls; trials 1 and 2: 1 warm-up + 2 timed
    costs = [5.0] * 3 + [0.03, 0.05] + [5.0] + [0.01, 0.03] + [5.0] + [0.02, 0.04]
    fake = FakeTorch(["H100"], by_seq(costs))
    tb = load(fake)
    a = fake.randn(8, 8, device=0, dtype=bfloat16)
    assert tb._best_time(lambda: fake.mm(a, a), 2, 3) == near(0.02)
    assert len(fake.ops) == len(costs)


@pytest.mark.parametrize("trials", [0, 1])
def test_best_time_runs_at_least_one_trial(load: Callable[[FakeTorch], ModuleType], trials: int) -> None:
    fake = FakeTorch(["H100"], by_seq([5.0, 5.0, 5.0, 0.25, 0.75]))
    tb = load(fake)
    a = fake.randn(8, 8, device=0, dtype=bfloat16)
    assert tb._best_time(lambda: fake.mm(a, a), 2, trials) == near(0.5)
    assert len(fake.ops) == 5


def test_gemm_bf16_tflops_on_the_named_gpu(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100", "H100"], rated)
    tb = load(fake)
    assert tb.gemm_bf16(1, 256, 4, trials=2) == near(BF16 / 1e12)
    assert len(fake.ops) == (3 + 4) + (1 + 4)
    for op in fake.ops:
        a, b = op.args
        assert (op.kind, op.device, a.shape, b.shape, a.dtype, b.dtype) == ("mm", 1, (256, 256), (256, 256),
                                                                           bfloat16, bfloat16)
        out = op.kwargs["out"]
        assert (out.shape, out.dtype, out.device) == ((256, 256), bfloat16, 1)
    assert fake.current == 0  # the device selection ends with the call


def test_gemm_fp8_tflops_with_unit_scales_into_bf16(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100", "H100"], rated)
    tb = load(fake)
    assert tb.gemm_fp8(1, 512, 3) == near(FP8 / 1e12)
    assert len(fake.ops) == 3 + 3
    for op in fake.ops:
        a, b = op.args
        assert (op.kind, a.device, b.device, a.dtype, b.dtype, a.shape, b.shape) == (
            "scaled_mm", 1, 1, float8_e4m3fn, float8_e4m3fn, (512, 512), (512, 512))
        assert (a.column_major, b.column_major) == (False, True)
        sa, sb = op.kwargs["scale_a"], op.kwargs["scale_b"]
        assert (sa.value, sb.value, sa.device, sb.device, sa.shape) == (1.0, 1.0, 1, 1, ())
        assert op.kwargs["out_dtype"] is bfloat16


def test_gemm_figures_scale_as_n_cubed(load: Callable[[FakeTorch], ModuleType]) -> None:
    # a GPU that takes 1 ms per GEMM whatever n: 2 n^3 / 1e-3 / 1e12 TFLOP/s
    fake = FakeTorch(["H100"], lambda op: 1e-3)
    tb = load(fake)
    assert tb.gemm_bf16(0, 1000, 2) == near(2.0)
    assert len(fake.ops) == 3 + 2  # one trial unless told
    assert tb.gemm_fp8(0, 2000, 2, trials=3) == near(16.0)
    assert len(fake.ops) == 5 + (3 + 2) + 2 * (1 + 2)
    assert tb.gemm_fp8(0, 2000, 2) == near(16.0)
    assert len(fake.ops) == 16 + 3 + 2


def test_hbm_copy_counts_read_and_write(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H200", "H200"], rated)
    tb = load(fake)
    assert tb.hbm_copy(1, 2 * GIB, 5, trials=2) == near(HBM / 1e12)
    assert len(fake.ops) == (3 + 5) + (1 + 5)
    for op in fake.ops:
        dst, src = op.args
        assert (src.device, dst.device, src.dtype, dst.dtype, src.nbytes, dst.nbytes) == (1, 1, uint8, uint8,
                                                                                          2 * GIB, 2 * GIB)
    fake.cost = lambda op: 1e-3  # 1 GB each way in 1 ms: 2 TB/s
    assert tb.hbm_copy(0, 10**9, 2) == near(2.0)
    assert len(fake.ops) == 14 + 3 + 2  # one trial unless told


def test_host_copies_gbps_each_way_from_pinned_memory(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100", "H100"], rated)
    tb = load(fake)
    assert tb.host_copies(1, GIB, 4, trials=2) == near({"h2d_gbps": H2D / 1e9, "d2h_gbps": D2H / 1e9})
    assert len(fake.ops) == 2 * ((3 + 4) + (1 + 4))
    h2d = [op for op in fake.ops if op.args[1].device is None]
    d2h = [op for op in fake.ops if op.args[0].device is None]
    assert len(h2d) == len(d2h) == 12
    for op in fake.ops:
        dst, src = op.args
        host, gpu = (src, dst) if src.device is None else (dst, src)
        assert (host.pinned, gpu.device, host.nbytes, gpu.nbytes, host.dtype, gpu.dtype) == (True, 1, GIB, GIB,
                                                                                             uint8, uint8)
        assert op.kwargs["non_blocking"] is True


def test_host_copies_gb_are_1e9_bytes(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], lambda op: 0.01 if op.args[1].device is None else 0.02)
    tb = load(fake)
    assert tb.host_copies(0, 10**9, 2) == near({"h2d_gbps": 100.0, "d2h_gbps": 50.0})
    assert len(fake.ops) == 2 * (3 + 2)  # one trial unless told


@pytest.mark.parametrize(("iters", "busy_copies"), [(3, 8), (8, 8), (12, 12)])
def test_host_copies_sample_the_link_while_copies_are_in_flight(load: Callable[[FakeTorch], ModuleType],
                                                                 iters: int, busy_copies: int) -> None:
    fake = FakeTorch(["H100", "H100"], lambda op: 0.1)
    tb = load(fake)
    seen: list[tuple[int, float]] = []

    def sample(dev: int) -> dict[str, Any]:
        seen.append((dev, fake.in_flight(dev)))
        return {"gen": 5, "width": 16}

    out = tb.host_copies(1, GIB, iters, sample=sample)
    assert out["pcie_under_load"] == {"gen": 5, "width": 16}
    assert out["h2d_gbps"] == near(GIB / 0.1 / 1e9)
    # max(iters, 8) copies queued, 20 ms of them done when the link is read; all of them done on return
    assert seen == [(1, near(busy_copies * 0.1 - 0.02))]
    assert fake.time.sleeps == [0.02]
    assert fake.in_flight(1) == 0.0
    assert len(fake.ops) == 2 * (3 + iters) + busy_copies


def test_host_copies_without_a_sampler_leave_no_copy_behind(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], lambda op: 0.1)
    tb = load(fake)
    assert "pcie_under_load" not in tb.host_copies(0, GIB, 2)
    assert len(fake.ops) == 2 * (3 + 2) and fake.time.sleeps == []


def test_peer_copy_best_of_trials_wall_clocked_on_both_gpus(load: Callable[[FakeTorch], ModuleType]) -> None:
    # 2 warm-up copies, then 3 trials of 2 copies
    fake = FakeTorch(["H100", "H100"], by_seq([1.0, 1.0, 0.03, 0.03, 0.01, 0.02, 0.05, 0.05]))
    tb = load(fake)
    assert tb.peer_copy(1, 0, 10**9, 2, trials=3) == near(10**9 / 0.015 / 1e9)
    assert len(fake.ops) == 8
    dst, src = fake.ops[0].args
    assert (src.device, dst.device, src.nbytes, dst.nbytes, src.dtype) == (1, 0, 10**9, 10**9, uint8)
    assert all(op.kwargs["non_blocking"] is True for op in fake.ops)
    assert fake.syncs == [1, 0] * 6  # both GPUs before and after each trial


def test_peer_copy_at_the_pair_rate(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"] * 3, rated)
    tb = load(fake)
    assert tb.peer_copy(0, 2, GIB, 4) == near(PEER / 1e9)
    assert len(fake.ops) == 2 + 4


@pytest.mark.parametrize("trials", [0, 1])
def test_peer_copy_runs_at_least_one_trial(load: Callable[[FakeTorch], ModuleType], trials: int) -> None:
    fake = FakeTorch(["H100", "H100"], by_seq([1.0, 1.0, 0.5, 0.25]))
    tb = load(fake)
    assert tb.peer_copy(0, 1, 10**9, 2, trials=trials) == near(10**9 / 0.375 / 1e9)


def test_gemm_burn_windows_until_the_time_is_up(load: Callable[[FakeTorch], ModuleType]) -> None:
    per_window = [0.001, 0.0015, 0.0008, 0.0012, 0.001, 0.002]  # s per GEMM; a window is 200 GEMMs
    fake = FakeTorch(["H100", "H100"], lambda op: per_window[op.seq // 200])
    tb = load(fake)
    out = tb.gemm_burn(1, 1.0, n=500)
    # windows start at 0, 0.2, 0.5, 0.66 and 0.9 s: five before 1 s
    flops = 2 * 500**3
    tflops = sorted(flops / c / 1e12 for c in per_window[:5])
    assert out == {"seconds": 1.0, "windows": 5, "min_tflops": near(flops / 0.0015 / 1e12),
                   "median_tflops": near(tflops[2])}
    assert len(fake.ops) == 1000
    a, b = fake.ops[0].args
    assert (fake.ops[0].device, a.shape, a.dtype, b.dtype) == (1, (500, 500), bfloat16, bfloat16)


def test_gemm_burn_median_of_an_even_count_is_the_upper_one(load: Callable[[FakeTorch], ModuleType]) -> None:
    per_window = [0.004, 0.001, 0.002, 0.003]
    fake = FakeTorch(["H100"], lambda op: per_window[op.seq // 200])
    tb = load(fake)
    out = tb.gemm_burn(0, 200 * (0.004 + 0.001 + 0.002) + 1e-3, n=100)
    assert out["windows"] == 4
    assert out["median_tflops"] == near(2 * 100**3 / 0.002 / 1e12)
    assert out["min_tflops"] == near(2 * 100**3 / 0.004 / 1e12)


def test_gemm_burn_of_zero_seconds_has_no_window(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], lambda op: 0.001)
    tb = load(fake)
    assert tb.gemm_burn(0, 0) == {"seconds": 0, "windows": 0, "min_tflops": None, "median_tflops": None}
    assert fake.ops == []


def test_gemm_burn_default_size_is_8192(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], rated)
    tb = load(fake)
    out = tb.gemm_burn(0, 0.5)
    assert out["min_tflops"] == near(BF16 / 1e12) and out["median_tflops"] == near(BF16 / 1e12)
    assert {op.args[0].shape for op in fake.ops} == {(8192, 8192)}
    # 200 GEMMs of 8192^3 at 700 TFLOP/s take 0.314 s: two windows start before 0.5 s
    assert out["windows"] == 2


PROF = {"gemm_sizes": [256, 512], "fp8_sizes": [512], "gemm_iters": 3, "copy_iters": 2, "hbm_bytes": 2 * GIB,
        "h2d_bytes": GIB, "peer_bytes": GIB, "trials": 2, "gemm_burn_s": 0}


def test_run_all_two_gpus(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["NVIDIA H100 80GB HBM3", "NVIDIA H200"], rated, peer_access={(0, 1)})
    tb = load(fake)
    errors: list[dict[str, str]] = []
    doc = tb.run_all(PROF, None, errors)
    gpu = {"bf16_gemm_tflops": {"256": near(700.0), "512": near(700.0)},
           "fp8_gemm_tflops": {"512": near(1400.0)}, "hbm_copy_tbps": near(3.3),
           "h2d_gbps": near(55.0), "d2h_gbps": near(50.0)}
    assert doc == {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", **gpu},
                            {"index": 1, "name": "NVIDIA H200", **gpu}],
                   "peer": [{"src": 0, "dst": 1, "access": True, "gbps": near(350.0)},
                            {"src": 1, "dst": 0, "access": False, "gbps": near(350.0)}]}
    assert errors == []
    assert fake.empty_cache_calls == 2
    # per GPU: GEMMs of 3 iters, copies of 2, best of 2 trials (3 + 1 warm-ups); peers: 2 warm-ups + 2 trials x 2
    per_gpu = 3 * (3 + 3 + 1 + 3) + 3 * (3 + 2 + 1 + 2)
    assert len(fake.ops) == 2 * per_gpu + 2 * (2 + 2 * 2)
    sizes = [(op.kind, op.device, op.args[0].shape[0]) for op in fake.ops if op.kind != "copy"]
    assert sizes == [(k, d, n) for d in (0, 1) for k, n in (("mm", 256), ("mm", 512), ("scaled_mm", 512))
                     for _ in range(10)]
    copies = [(op.args[1].device, op.args[0].device, op.args[1].nbytes) for op in fake.ops if op.kind == "copy"]
    assert copies == [c for d in (0, 1) for c in [(d, d, 2 * GIB)] * 8 + [(None, d, GIB)] * 8 + [(d, None, GIB)] * 8
                      ] + [(0, 1, GIB)] * 6 + [(1, 0, GIB)] * 6


def test_run_all_one_trial_by_default_and_the_sampler_and_burn(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], rated)
    tb = load(fake)
    prof = {k: v for k, v in PROF.items() if k != "trials"} | {"gemm_sizes": [256], "fp8_sizes": [],
                                                                 "gemm_burn_s": 0.0001}
    doc = tb.run_all(prof, lambda dev: {"dev": dev}, [])
    g = doc["gpus"][0]
    assert doc["peer"] == []
    assert g["pcie_under_load"] == {"dev": 0}
    assert g["gemm_burn"] == {"seconds": 0.0001, "windows": 1, "min_tflops": near(700.0),
                              "median_tflops": near(700.0)}
    assert g["fp8_gemm_tflops"] == {}
    # one trial: 3 warm-ups each; the burn's one window of 200 GEMMs of 8192
    mm = [op.args[0].shape[0] for op in fake.ops if op.kind == "mm"]
    assert mm == [256] * (3 + 3) + [8192] * 200
    copies = [op for op in fake.ops if op.kind == "copy"]
    assert len(copies) == 3 * (3 + 2) + 8


def test_run_all_keeps_the_other_figures_when_one_step_fails(load: Callable[[FakeTorch], ModuleType]) -> None:
    def fail(op: Op) -> Exception | None:
        if op.kind == "mm" and op.device == 1 and op.args[0].shape[0] == 512:
            return RuntimeError("CUDA out of memory")
        if op.kind == "scaled_mm" and op.device == 0:
            return ValueError("no fp8 on this GPU")
        if op.kind == "copy" and op.args[1].device == 0 and op.args[0].device is None:
            return RuntimeError("d2h failed")
        if op.kind == "copy" and (op.args[1].device, op.args[0].device) == (1, 0):
            return RuntimeError("peer access denied")
        return None

    fake = FakeTorch(["H100", "H100"], rated, fail=fail)
    tb = load(fake)
    errors: list[dict[str, str]] = []
    doc = tb.run_all(PROF, None, errors)
    g0, g1 = doc["gpus"]
    assert g0["bf16_gemm_tflops"] == {"256": near(700.0), "512": near(700.0)}
    assert g0["fp8_gemm_tflops"] == {} and g1["fp8_gemm_tflops"] == {"512": near(1400.0)}
    assert g1["bf16_gemm_tflops"] == {"256": near(700.0)}
    assert g0["hbm_copy_tbps"] == near(3.3) and g1["hbm_copy_tbps"] == near(3.3)
    assert "h2d_gbps" not in g0 and g1["d2h_gbps"] == near(50.0)
    assert errors == [
        {"collector": "torch.fp8_gemm_512", "gpu": "0", "error": "ValueError: no fp8 on this GPU"},
        {"collector": "torch.host_copies", "gpu": "0", "error": "RuntimeError: d2h failed"},
        {"collector": "torch.bf16_gemm_512", "gpu": "1", "error": "RuntimeError: CUDA out of memory"},
        {"collector": "torch.peer_copy", "gpu": "1->0", "error": "RuntimeError: peer access denied"}]
    assert doc["peer"] == [{"src": 0, "dst": 1, "access": False, "gbps": near(350.0)},
                           {"src": 1, "dst": 0, "access": False, "gbps": None}]


def test_run_all_names_the_copy_and_burn_steps_that_failed(load: Callable[[FakeTorch], ModuleType]) -> None:
    def fail(op: Op) -> Exception | None:
        if op.kind == "copy" and op.args[1].device == op.args[0].device == 1:
            return RuntimeError("HBM copy failed")
        if op.kind == "mm" and op.device == 0 and op.args[0].shape[0] == 8192:
            return RuntimeError("burn failed")
        return None

    fake = FakeTorch(["H100", "H100"], rated, fail=fail)
    tb = load(fake)
    errors: list[dict[str, str]] = []
    doc = tb.run_all(PROF | {"gemm_burn_s": 0.0001}, None, errors)
    assert errors == [{"collector": "torch.gemm_burn", "gpu": "0", "error": "RuntimeError: burn failed"},
                      {"collector": "torch.hbm_copy", "gpu": "1", "error": "RuntimeError: HBM copy failed"}]
    g0, g1 = doc["gpus"]
    assert "gemm_burn" not in g0 and "hbm_copy_tbps" not in g1
    assert g0["hbm_copy_tbps"] == near(3.3) and g1["gemm_burn"]["windows"] == 1


def test_run_all_peer_copies_are_one_trial_unless_told(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100", "H100"], rated)
    tb = load(fake)
    prof = {k: v for k, v in PROF.items() if k != "trials"}
    doc = tb.run_all(prof, None, [])
    assert [p["gbps"] for p in doc["peer"]] == [near(350.0), near(350.0)]
    peers = [op for op in fake.ops if op.kind == "copy" and None not in (op.args[0].device, op.args[1].device)
             and op.args[0].device != op.args[1].device]
    assert len(peers) == 2 * (2 + PROF["copy_iters"])


def test_units_are_exactly_1e12(load: Callable[[FakeTorch], ModuleType]) -> None:
    # every op takes 2^-10 s and n = 1024: the seconds per call are exact in binary, so each figure is exactly
    # 2^41 / 1e12 (a unit off by one part in 1e12 shows at 1e-14)
    fake = FakeTorch(["H100"], lambda op: 2.0**-10)
    tb = load(fake)
    want = pytest.approx(2**41 / 1e12, rel=1e-14)
    assert tb.gemm_bf16(0, 1024, 4) == want
    assert tb.gemm_fp8(0, 1024, 4, trials=2) == want
    assert tb.hbm_copy(0, 2**30, 4) == want
    burn = tb.gemm_burn(0, 0.1, n=1024)
    assert (burn["min_tflops"], burn["median_tflops"]) == (want, want)


def test_a_burn_window_due_exactly_at_the_deadline_does_not_run(load: Callable[[FakeTorch], ModuleType]) -> None:
    fake = FakeTorch(["H100"], lambda op: 2.0**-10)
    tb = load(fake)
    tick = fake.time.TICK
    # reads of the clock: the deadline (at 1 tick), the first window's start (2 ticks), then 200 GEMMs, then the
    # second window's start at 3 ticks + 200 x 2^-10 s: exactly the deadline
    out = tb.gemm_burn(0, 2 * tick + 200 * 2.0**-10, n=64)
    assert out["windows"] == 1
