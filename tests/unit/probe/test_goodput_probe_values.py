"""The goodput probe (gridready/probe/goodput.py) in-process against a torch double (tests/unit/probe/
fake_torch_train.py): the parameter count and FLOPs per token by the documented formula (6 N + 12 L d s; PaLM's
appendix B), the model's structure, initialisation and forward pass against a numpy reference written here, the
permutation-walk batches, one GPU's figures on a fake clock (tokens/s, model TFLOP/s, GiB), the data-parallel
worker and its NCCL environment, the transports read back, run_all's errors and parse's schema check."""

from __future__ import annotations

import json
import math
import os
import sys
import types
from typing import Any

import numpy as np
import pytest

from gridready.probe import goodput, nccl_debug
from tests.unit.probe import fake_torch_train as ft

TINY = {"d": 8, "layers": 2, "heads": 2, "vocab": 11, "seq": 5, "batch": 3}
TICK = 2.0 ** -30  # seconds per synchronize on the fake clock (exact in binary)


def documented_params(d: int, layers: int, vocab: int) -> int:
    """Every weight once: per layer q, k, v and out (d x d each), MLP up and down (4d x d each), two norms (d);
    the tied embedding (vocab x d) once and the final norm (d)."""
    per_layer = 3 * d * d + d * d + 4 * d * d + d * 4 * d + d + d
    return layers * per_layer + vocab * d + d


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> ft.FakeTorch:
    fake = ft.FakeTorch(sync_s=TICK)
    for name, mod in fake.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(goodput, "time", types.SimpleNamespace(perf_counter=fake.clock, monotonic=fake.clock))
    return fake


def test_the_reference_model_size_and_flops():
    """0.97B parameters (the docstring's figure) and 6 N + 12 L d s FLOPs per token."""
    assert goodput.n_params(goodput.MODEL) == documented_params(2048, 18, 32768) == 973_154_304
    assert goodput.flops_per_token(goodput.MODEL) == 6 * 973_154_304 + 12 * 18 * 2048 * 2048 == 6_744_895_488


@pytest.mark.parametrize("cfg", [TINY, {**TINY, "layers": 3, "d": 12}, {**TINY, "vocab": 7, "seq": 9}])
def test_params_and_flops_by_the_formula(cfg):
    n = documented_params(cfg["d"], cfg["layers"], cfg["vocab"])
    assert goodput.n_params(cfg) == n
    assert goodput.flops_per_token(cfg) == 6.0 * n + 12.0 * cfg["layers"] * cfg["d"] * cfg["seq"]


def rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 2.0 ** -7) * w  # bf16 weights: eps = finfo.eps = 2^-7


def reference_logits(model: Any, idx: np.ndarray, cfg: dict[str, int]) -> np.ndarray:
    """The docstring's pre-norm decoder, written out: causal multi-head attention and a tanh-GELU MLP of 4 d,
    each added to the residual stream; logits through the tied embedding."""
    d, h = cfg["d"], cfg["heads"]
    emb = model.emb.weight.a
    x = emb[idx]
    b, s, _ = x.shape
    for blk in model.blocks:
        qkv = rms(x, blk.n1.weight.a) @ blk.qkv.weight.a.T
        heads = [qkv[..., i * d:(i + 1) * d].reshape(b, s, h, d // h).transpose(0, 2, 1, 3) for i in range(3)]
        q, k, v = heads
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // h)
        att = np.where(np.tril(np.ones((s, s), dtype=bool)), att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        a = (att / att.sum(-1, keepdims=True)) @ v
        x = x + a.transpose(0, 2, 1, 3).reshape(b, s, d) @ blk.proj.weight.a.T
        u = rms(x, blk.n2.weight.a) @ blk.up.weight.a.T
        g = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        x = x + g @ blk.down.weight.a.T
    return rms(x, model.norm.weight.a) @ emb.T


def reference_loss(logits: np.ndarray, y: np.ndarray) -> float:
    z = logits.reshape(-1, logits.shape[-1])
    t = y.reshape(-1)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    return float((lse - z[np.arange(len(t)), t]).mean())


def test_build_holds_exactly_the_counted_parameters_in_bf16_on_the_gpu(torch):
    model = goodput.build(torch, TINY, 1)
    params = list(model.parameters())
    assert sum(p.numel() for p in params) == documented_params(8, 2, 11)
    assert model.moved == (1, "bfloat16") and {p.dtype for p in params} == {"bfloat16"}
    blk = next(iter(model.blocks))
    assert (blk.qkv.weight.shape, blk.proj.weight.shape, blk.up.weight.shape, blk.down.weight.shape) == (
        (24, 8), (8, 8), (32, 8), (8, 32))
    assert len(list(model.blocks)) == 2 and model.emb.weight.shape == (11, 8)


def test_build_draws_every_matrix_from_a_normal_of_std_0_02_and_leaves_the_norms_at_one(torch):
    model = goodput.build(torch, TINY, 0)
    drawn = [c for c in torch.calls if c[0] == "normal_"]
    matrices = [p.shape for p in model.parameters() if p.dim() == 2]
    assert [c[1] for c in drawn] == matrices and len(matrices) == 1 + 4 * 2
    assert {(c[2], c[3]) for c in drawn} == {(0.0, 0.02)}
    assert all(np.all(p.a == 1.0) for p in model.parameters() if p.dim() == 1)


def test_the_forward_pass_equals_the_reference_decoder(torch):
    torch.manual_seed(4)
    model = goodput.build(torch, TINY, 0)
    idx = np.array([[1, 4, 9, 0, 2], [10, 3, 3, 7, 5], [6, 6, 8, 1, 0]])
    logits = model(ft.T(idx, "int64"))
    assert logits.shape == (3, 5, 11)
    np.testing.assert_allclose(logits.a, reference_logits(model, idx, TINY), rtol=1e-9, atol=1e-12)
    sdpa = [c for c in torch.calls if c[0] == "sdpa"]
    assert [c[1:] for c in sdpa] == [((3, 2, 5, 4), (3, 2, 5, 4), (3, 2, 5, 4), {"is_causal": True})] * 2
    assert [c[1] for c in torch.calls if c[0] == "gelu"] == ["tanh", "tanh"]


def test_the_forward_pass_on_another_shape(torch):
    cfg = {**TINY, "d": 12, "heads": 3, "layers": 1, "seq": 4, "vocab": 5}
    model = goodput.build(torch, cfg, 0)
    idx = np.array([[4, 0, 1, 3]])
    np.testing.assert_allclose(model(ft.T(idx, "int64")).a, reference_logits(model, idx, cfg), rtol=1e-9,
                               atol=1e-12)


def test_batches_walk_the_seeded_permutation(torch):
    data = goodput.batches(torch, TINY, 2, seed=41)
    x, y = next(data)
    x2, _ = next(data)
    (g,) = torch.generators
    assert (g.device, g.seeds) == ("cuda:2", [41])
    perm = np.random.default_rng(41).permutation(11)  # the generator's first draw
    assert x.shape == y.shape == (3, 5) and x.a.dtype == np.int64 and x.device == y.device == "cuda:2"
    assert np.array_equal(y.a, perm[x.a])  # token t+1 = perm[token t]
    assert np.array_equal(x.a[:, 1:], y.a[:, :-1])
    assert sorted(set(perm)) == list(range(11)) and not np.array_equal(x.a, x2.a)
    starts = np.random.default_rng(41)
    starts.permutation(11)
    assert np.array_equal(x.a[:, 0], starts.integers(0, 11, (3,)))


def test_batches_default_seed_is_30(torch):
    next(goodput.batches(torch, TINY, 0))
    assert torch.generators[0].seeds == [30] and torch.generators[0].device == "cuda:0"


def expected_losses(cfg: dict[str, int], steps: int, pre_n: int, seed: int, data_seed: int = 30, dev: int = 0
                    ) -> list[float]:
    fake = ft.FakeTorch()
    fake.manual_seed(seed)
    model = goodput.build(fake, cfg, dev)
    data = goodput.batches(fake, cfg, dev, seed=data_seed)
    pre = [next(data) for _ in range(pre_n)]
    per = [reference_loss(reference_logits(model, x.a, cfg), y.a) for x, y in pre]
    return [per[i % pre_n] for i in range(steps)]


def test_one_gpu_figures_in_full(torch):
    out = goodput.train(1, steps=10, warmup=3, cfg=TINY)
    n = documented_params(8, 2, 11)
    fpt = 6.0 * n + 12.0 * 2 * 8 * 5
    tps = 7 * 3 * 5 / TICK  # 7 timed steps of 15 tokens in one synchronize
    want = expected_losses(TINY, 10, 8, 30)
    loss = out.pop("loss")
    assert loss == pytest.approx(want, abs=1e-4) and loss[8] == loss[0] and loss[9] == loss[1]
    assert loss == [round(v, 4) for v in loss]
    assert out == {"schema": "gridready.goodput/1", "index": 1, "name": "NVIDIA H200 #1", "model": TINY, "params": n,
                   "flops_per_token": fpt, "steps": 10, "warmup": 3, "tokens_per_step": 15, "seconds_timed": 0.0,
                   "tokens_per_s": round(tps, 1), "model_tflops": round(tps * fpt / 1e12, 1),
                   "loss_first": loss[0], "loss_last": loss[9], "loss_finite": True,
                   "peak_mem_gib": 36.3,  # 39e9 bytes in GiB (2^30), not GB
                   "torch": "2.9.0+cu130"}
    assert out["model_tflops"] == 1233.9


def test_one_gpu_run_asks_torch_what_the_docstring_says(torch):
    goodput.train(0, steps=5, warmup=2, cfg=TINY, lr=1e-3)
    assert torch.calls[0] == ("manual_seed", 30)
    assert ("device", 0) in torch.calls and ("reset_peak", 0) in torch.calls
    (adam,) = [c for c in torch.calls if c[0] == "AdamW"]
    # every parameter tensor: the embedding, 2 norms and 4 matrices per layer, the final norm
    assert adam[1:] == (1 + 2 * (2 + 4) + 1, {"lr": 1e-3, "betas": (0.9, 0.95), "weight_decay": 0.0, "fused": True})
    assert torch.count("step") == 5 and [c for c in torch.calls if c[0] == "zero_grad"] == [
        ("zero_grad", {"set_to_none": True})] * 5
    syncs = [c for c in torch.calls if c[0] == "synchronize"]
    assert syncs == [("synchronize", 0)] * 2  # at the warm-up's end and after the last step
    assert torch.calls[-1] == ("empty_cache",)


# a clock step that puts 105 tokens x 10,944 FLOPs exactly on 0.75 TFLOP/s (a hair above): it rounds to 0.8
AT_075 = 1.5321599999999895e-06


def test_tflops_are_10_to_the_12_flops_at_the_rounding_boundary(torch):
    torch.sync_s = AT_075
    out = goodput.train(0, steps=10, warmup=3, cfg=TINY)
    assert out["model_tflops"] == 0.8 and 105 / AT_075 * 10944 / 1e12 > 0.75


def test_seconds_tokens_per_s_rounded_and_the_last_loss(torch):
    torch.sync_s = 0.123456
    out = goodput.train(0, steps=10, warmup=3, cfg=TINY)
    assert out["seconds_timed"] == 0.123 and out["tokens_per_s"] == round(105 / 0.123456, 1) == 850.5
    torch.sync_s = 0.3
    out = goodput.train(0, steps=4, warmup=1, cfg=TINY)
    assert out["tokens_per_s"] == round(45 / 0.3, 1) == 150.0 and isinstance(out["tokens_per_s"], float)
    assert out["loss_last"] == out["loss"][3] and out["loss_first"] == out["loss"][0]
    assert out["loss"][3] != out["loss"][1]


def test_one_timed_step_has_a_rate_and_a_clock_that_did_not_move_has_none(torch):
    assert goodput.train(0, steps=4, warmup=3, cfg=TINY)["tokens_per_s"] == round(15 / TICK, 1)
    torch.sync_s = 0.0
    out = goodput.train(0, steps=4, warmup=1, cfg=TINY)
    assert (out["tokens_per_s"], out["model_tflops"], out["seconds_timed"]) == (None, None, 0.0)


def test_the_model_and_the_data_are_on_the_gpu_measured(torch):
    seen: list[int] = []
    goodput.train(3, steps=2, warmup=1, cfg=TINY, model_builder=lambda t, c, d: seen.append(d) or goodput.build(
        t, c, d))
    assert seen == [3] and [g.device for g in torch.generators] == ["cuda:3"]


def test_defaults_three_warm_up_steps_and_a_learning_rate_of_3e_4(torch):
    out = goodput.train(0, steps=5, cfg=TINY)
    assert out["warmup"] == 3 and out["tokens_per_s"] == round(2 * 15 / TICK, 1)
    (adam,) = [c for c in torch.calls if c[0] == "AdamW"]
    assert adam[2]["lr"] == 3e-4


def test_the_clock_starts_after_the_warm_up(torch):
    torch.sync_s = 0.25
    out = goodput.train(0, steps=6, warmup=2, cfg=TINY)
    assert out["seconds_timed"] == 0.25 and out["tokens_per_s"] == 4 * 15 / 0.25 == 240.0
    assert out["model_tflops"] == round(240.0 * goodput.flops_per_token(TINY) / 1e12, 1)


def test_the_batches_are_drawn_before_the_clock_eight_at_most(torch):
    loss = goodput.train(0, steps=3, warmup=1, cfg=TINY)["loss"]
    assert loss == pytest.approx(expected_losses(TINY, 3, 3, 30), abs=1e-4)


@pytest.mark.parametrize(("steps", "warmup"), [(3, 3), (2, 5)])
def test_no_timed_step_has_no_rate(torch, steps, warmup):
    out = goodput.train(0, steps=steps, warmup=warmup, cfg=TINY)
    assert (out["tokens_per_s"], out["model_tflops"], out["seconds_timed"]) == (None, None, 0.0)
    assert len(out["loss"]) == steps


def test_a_diverging_model_is_reported_not_finite(torch):
    class Nan(ft.Module):
        def forward(self, idx: ft.T) -> ft.T:
            return ft.T(np.full((*idx.shape, 11), np.nan), "bfloat16")

    out = goodput.train(0, steps=4, warmup=1, cfg=TINY, model_builder=lambda t, cfg, dev: Nan())
    assert out["loss_finite"] is False and len(out["loss"]) == 4
    assert all(math.isnan(v) for v in out["loss"])


def test_no_step_at_all(torch):
    out = goodput.train(0, steps=0, warmup=0, cfg=TINY)
    assert (out["loss"], out["loss_first"], out["loss_last"], out["loss_finite"]) == ([], None, None, True)


@pytest.fixture
def ddp_env(monkeypatch: pytest.MonkeyPatch, torch: ft.FakeTorch) -> ft.FakeTorch:
    monkeypatch.setattr(goodput, "MODEL", TINY)
    for k in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(k, "unset-by-test")  # restored after the test whatever the worker sets
    return torch


def test_the_data_parallel_rank_0_writes_the_figures(ddp_env, tmp_path):
    torch = ddp_env
    goodput._ddp_worker(0, 2, 6, 2, 29611, str(tmp_path))
    res = json.loads((tmp_path / "result.json").read_text())
    tps = 4 * 15 / TICK
    want = expected_losses(TINY, 6, 4, 30, data_seed=30)
    assert res["loss"] == pytest.approx(want, abs=1e-4) and res["loss"][4] == res["loss"][0]
    assert res["loss"] == [round(v, 4) for v in res["loss"]]
    assert {k: v for k, v in res.items() if k != "loss"} == {
        "tokens_per_s_per_gpu": tps, "model_tflops_per_gpu": round(tps * goodput.flops_per_token(TINY) / 1e12, 1),
        "seconds_timed": 0.0}
    (init,) = [c for c in torch.calls if c[0] == "init_process_group"]
    assert init[1:5] == ("nccl", 0, 2, "cuda:0")
    assert init[5]["MASTER_ADDR"] == "127.0.0.1" and init[5]["MASTER_PORT"] == "29611"
    assert ("set_device", 0) in torch.calls and ("DDP", [0], (0, "bfloat16")) in torch.calls
    assert torch.calls[-1] == ("destroy_process_group",)
    (adam,) = [c for c in torch.calls if c[0] == "AdamW"]
    assert adam[2] == {"lr": 3e-4, "betas": (0.9, 0.95), "weight_decay": 0.0, "fused": True}
    assert [c for c in torch.calls if c[0] == "synchronize"] == [("synchronize", 0)] * 2
    assert torch.count("step") == 6 and ("zero_grad", {"set_to_none": True}) in torch.calls


def test_the_other_ranks_draw_their_own_data_and_write_nothing(ddp_env, tmp_path):
    torch = ddp_env
    goodput._ddp_worker(1, 2, 3, 1, 29612, str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert [(g.device, g.seeds) for g in torch.generators] == [("cuda:1", [31])]
    assert ("manual_seed", 30) in torch.calls and ("set_device", 1) in torch.calls
    assert ("DDP", [1], (1, "bfloat16")) in torch.calls
    assert torch.calls[-1] == ("destroy_process_group",)


def test_a_failing_rank_still_leaves_the_process_group(ddp_env, tmp_path, monkeypatch):
    def build(*a: Any) -> Any:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(goodput, "build", build)
    with pytest.raises(RuntimeError, match="out of memory"):
        goodput._ddp_worker(0, 2, 3, 1, 29613, str(tmp_path))
    assert ddp_env.calls[-1] == ("destroy_process_group",)


def test_a_rank_rounds_its_seconds_and_tflops(ddp_env, tmp_path):
    ddp_env.sync_s = 8.755199999999948e-07  # 60 tokens x 10,944 FLOPs a hair above 0.75 TFLOP/s
    goodput._ddp_worker(0, 1, 6, 2, 29615, str(tmp_path))
    assert json.loads((tmp_path / "result.json").read_text())["model_tflops_per_gpu"] == 0.8
    ddp_env.sync_s = 0.123456
    goodput._ddp_worker(0, 1, 6, 2, 29615, str(tmp_path))
    assert json.loads((tmp_path / "result.json").read_text())["seconds_timed"] == 0.123


def test_a_timed_rank_without_a_timed_step_writes_no_rate(ddp_env, tmp_path):
    goodput._ddp_worker(0, 1, 2, 2, 29614, str(tmp_path))
    res = json.loads((tmp_path / "result.json").read_text())
    assert (res["tokens_per_s_per_gpu"], res["model_tflops_per_gpu"], res["seconds_timed"]) == (None, None, 0.0)


CHANNELS = ("node1:{rank}:7 [{rank}] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
            "node1:{rank}:7 [{rank}] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct")


def test_the_data_parallel_run_in_full(ddp_env, monkeypatch):
    torch = ddp_env
    torch.lines = CHANNELS
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_SUBSYS", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    out = goodput.train_ddp(2, 5, warmup=2)
    log = "".join(ln.replace("{rank}", str(r)) + "\n" for r in (0, 1) for ln in CHANNELS)
    tps = 3 * 15 / TICK
    assert out.pop("loss") == pytest.approx(expected_losses(TINY, 5, 4, 30), abs=1e-4)
    assert out == {"present": True, "world": 2, "nccl_debug_tail": log, "transports": nccl_debug.parse(log),
                   "tokens_per_s_per_gpu": tps, "seconds_timed": 0.0,
                   "model_tflops_per_gpu": round(tps * goodput.flops_per_token(TINY) / 1e12, 1)}
    assert out["transports"]["families"] == {"P2P": 2, "SHM": 2}
    (start,) = [c for c in torch.calls if c[0] == "start_processes"]
    port = 29500 + os.getpid() % 2000
    assert start[1] == "_ddp_worker" and start[2][:4] == (2, 5, 2, port) and start[3:] == (2, False, "spawn")
    envs = [c[5] for c in torch.calls if c[0] == "init_process_group"]
    assert [(e["NCCL_DEBUG"], e["NCCL_DEBUG_SUBSYS"]) for e in envs] == [("INFO", "INIT,P2P,NET")] * 2
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in os.environ
    assert "NCCL_DEBUG_FILE" not in os.environ
    assert os.path.basename(start[2][4]).startswith("gridready-ddp-")


def test_a_log_with_bytes_that_are_not_utf8_is_read_with_replacements(ddp_env, monkeypatch):
    def start(fn: Any, args: tuple[Any, ...], **kw: Any) -> ft.Ranks:
        with open(os.environ["NCCL_DEBUG_FILE"].replace("%h", "n").replace("%p", "1"), "wb") as fh:
            fh.write(b"node1:1:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\nbad \xff\xfe\n")
        os.environ.pop("NCCL_DEBUG_SUBSYS")  # a callee that removed a variable the run set
        return ft.Ranks()

    monkeypatch.delenv("NCCL_DEBUG_SUBSYS", raising=False)
    ddp_env.multiprocessing.start_processes = start
    out = goodput.train_ddp(2, 3)
    assert out["nccl_debug_tail"].endswith("bad \ufffd\ufffd\n") and out["transports"]["families"] == {"SHM": 1}
    assert "NCCL_DEBUG_SUBSYS" not in os.environ


def test_the_nccl_log_tail_keeps_the_last_20000_characters(ddp_env):
    line = "node1:{rank}:7 [{rank}] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read " + "x" * 60
    ddp_env.lines = (line,) * 200
    out = goodput.train_ddp(2, 3, warmup=1)
    full = "".join(line.replace("{rank}", str(r)) + "\n" for r in (0, 1) for _ in range(200))
    assert len(full) > 20000 and out["nccl_debug_tail"] == full[-20000:]
    assert out["transports"]["connections"] == 400  # read from the whole log, not its tail


def test_a_failing_data_parallel_run_is_a_reason_cut_at_400_characters(ddp_env):
    ddp_env.fail_rank = 0
    out = goodput.train_ddp(2, 3)
    assert out == {"present": False, "world": 2,
                   "reason": "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
                   "nccl_debug_tail": "", "transports": {"connections": 0, "families": {}, "examples": {}}}

    def long_failure(*a: Any, **k: Any) -> None:
        raise ValueError("y" * 500)

    ddp_env.multiprocessing.start_processes = long_failure
    assert goodput.train_ddp(2, 3)["reason"] == "ValueError: " + "y" * 400


def test_the_data_parallel_run_warms_up_three_steps_by_default(ddp_env):
    out = goodput.train_ddp(2, 5)
    (start,) = [c for c in ddp_env.calls if c[0] == "start_processes"]
    assert start[2][:3] == (2, 5, 3) and out["tokens_per_s_per_gpu"] == 2 * 15 / TICK


def test_a_run_without_a_result_says_so(ddp_env):
    ddp_env.multiprocessing.start_processes = lambda *a, **k: ft.Ranks()
    out = goodput.train_ddp(3, 3)
    assert (out["present"], out["world"], out["reason"]) == (False, 3, "the data-parallel run wrote no result")


def test_run_all_trains_each_gpu_then_data_parallel(torch, monkeypatch):
    torch.gpus = 3
    seen: list[tuple[Any, ...]] = []

    def isolated(name: str, *args: int, **kw: Any) -> Any:
        seen.append((name, *args))
        if args[0] == 1:
            raise RuntimeError("train in a fresh interpreter exited 1: CUDA error")
        return {"index": args[0]}

    monkeypatch.setattr(goodput, "isolated", isolated)
    monkeypatch.setattr(goodput, "train_ddp", lambda world, steps: seen.append(("ddp", world, steps)) or {"w": world})
    errors: list[dict[str, str]] = []
    doc = json.loads(goodput.run_all({"goodput_steps": "20"}, errors))
    assert seen == [("train", 0, 20), ("train", 1, 20), ("train", 2, 20), ("ddp", 3, 12)]
    assert doc == {"schema": "gridready.goodput/1", "tool": "gridready.probe.goodput",
                   "gpus": [{"index": 0}, {"index": 2}], "ddp": {"w": 3}}
    assert errors == [{"collector": "torch.goodput", "gpu": "1",
                       "error": "RuntimeError: train in a fresh interpreter exited 1: CUDA error"}]


def test_run_all_defaults_and_a_failing_data_parallel_run(torch, monkeypatch):
    torch.gpus = 2
    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(goodput, "isolated", lambda name, *a, **k: seen.append((name, *a)) or {"index": a[0]})

    def ddp(world: int, steps: int) -> Any:
        seen.append(("ddp", world, steps))
        raise OSError("no free port")

    monkeypatch.setattr(goodput, "train_ddp", ddp)
    errors: list[dict[str, str]] = []
    doc = json.loads(goodput.run_all({}, errors))
    assert seen == [("train", 0, 35), ("train", 1, 35), ("ddp", 2, 12)]
    assert doc["ddp"] is None and errors == [{"collector": "torch.goodput_ddp", "error": "OSError: no free port"}]
    seen.clear()
    goodput.run_all({"goodput_steps": 9}, [])
    assert seen[-1] == ("ddp", 2, 9)


def test_run_all_on_one_gpu_has_no_data_parallel_run(torch, monkeypatch):
    monkeypatch.setattr(goodput, "isolated", lambda name, *a, **k: {"index": a[0]})
    monkeypatch.setattr(goodput, "train_ddp", lambda *a: pytest.fail("data-parallel on one GPU"))
    assert json.loads(goodput.run_all({}, []))["ddp"] is None


def test_parse_reads_back_and_refuses_another_document():
    text = json.dumps({"schema": "gridready.goodput/1", "gpus": [{"index": 0}], "ddp": None})
    assert goodput.parse(text) == json.loads(text)
    for bad in ('{"schema": "gridready.sdc/1"}', "[]", "{}"):
        with pytest.raises(ValueError, match=r"^not a gridready\.goodput/1 document$"):
            goodput.parse(bad)


class _Rank:
    """multiprocessing.Process as the context lists it: alive or not, kill() and join() recorded."""

    def __init__(self, alive: bool) -> None:
        self.alive, self.calls = alive, []

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.calls.append("kill")
        self.alive = False

    def join(self) -> None:
        self.calls.append("join")


class _Hung:
    """A ProcessContext whose ranks exit at the given clock times (None: never); join(timeout) waits on a fake
    clock as torch's does on the ranks' sentinels: until all have exited (True) or the timeout passed (False)."""

    def __init__(self, clock: list[float], exits: list[float | None]) -> None:
        self.clock, self.exits, self.joins = clock, exits, []
        self.processes = [_Rank(True) for _ in exits]

    def join(self, timeout: float | None = None) -> bool:
        self.joins.append(timeout)
        assert timeout is not None
        pending = [t for t in self.exits if t is None or t > self.clock[0]]
        if pending and all(t is not None and t <= self.clock[0] + timeout for t in pending):
            self.clock[0] = max(t for t in pending if t is not None)
        else:
            self.clock[0] += timeout
        for proc, t in zip(self.processes, self.exits, strict=True):
            proc.alive = t is None or t > self.clock[0]
        return not any(p.alive for p in self.processes)


def _hang(ddp_env, monkeypatch, exits: list[float | None]) -> _Hung:
    clock = [1000.0]
    ranks = _Hung(clock, exits)
    monkeypatch.setattr(goodput.time, "monotonic", lambda: clock[0])
    ddp_env.multiprocessing.start_processes = lambda *a, **k: ranks
    return ranks


def test_a_hung_rank_is_killed_at_the_timeout_and_the_run_says_so(ddp_env, monkeypatch):
    ranks = _hang(ddp_env, monkeypatch, [5.0 + 1000, None])
    out = goodput.train_ddp(2, 3)
    assert out["present"] is False
    assert out["reason"] == "TimeoutError: the data-parallel run did not finish within 900 s"
    assert ranks.joins == [900.0] and ranks.clock[0] == 1900.0
    assert [p.calls for p in ranks.processes] == [["join"], ["kill", "join"]]


def test_the_timeout_is_the_callers_and_counts_from_the_start(ddp_env, monkeypatch):
    ranks = _hang(ddp_env, monkeypatch, [1030.0, None])
    out = goodput.train_ddp(2, 3, timeout_s=60.5)
    assert out["reason"] == "TimeoutError: the data-parallel run did not finish within 60.5 s"
    assert ranks.joins == [60.5] and ranks.clock[0] == 1060.5
    assert ranks.processes[1].calls == ["kill", "join"]


def test_ranks_that_exit_one_by_one_inside_the_timeout_are_waited_for(ddp_env, monkeypatch):
    ranks = _hang(ddp_env, monkeypatch, [1010.0, 1899.0])
    clock = ranks.clock
    first = ranks.join
    seen: list[float] = []

    def one_at_a_time(timeout: float | None = None) -> bool:
        assert timeout is not None
        seen.append(timeout)
        if len(seen) == 1:  # the first rank's exit wakes the wait, the second still runs
            clock[0] = 1010.0
            ranks.processes[0].alive = False
            return False
        return first(timeout)

    ranks.join = one_at_a_time
    out = goodput.train_ddp(2, 3)
    assert seen == [900.0, 890.0] and clock[0] == 1899.0
    assert out["reason"] == "the data-parallel run wrote no result"
    assert all(p.calls == [] for p in ranks.processes)


def test_a_deadline_reached_between_waits_never_asks_for_a_negative_wait(ddp_env, monkeypatch):
    ranks = _hang(ddp_env, monkeypatch, [None])
    first = ranks.join

    def late(timeout: float | None = None) -> bool:
        first(timeout)
        ranks.clock[0] += 7.0  # the process was descheduled past the deadline after the wait
        return False

    ranks.join = late
    out = goodput.train_ddp(1, 3, timeout_s=10)
    assert ranks.joins == [10] and out["reason"].startswith("TimeoutError")
    assert ranks.processes[0].calls == ["kill", "join"]
