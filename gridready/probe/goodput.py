"""Training goodput: a small decoder language model (about 1B parameters) trains on each GPU, bf16.

The model: pre-norm decoder blocks (RMSNorm, causal self-attention through scaled_dot_product_attention, a GELU MLP
of 4 x d), tied input/output embeddings; weights in bf16, fused AdamW. The task is learnable and synthetic: each
sequence walks a fixed random permutation of the vocabulary (token t+1 = perm[token t]) from a random start, so the
loss must fall from ln(vocab) as the model learns the map. Measured after `warmup` steps: tokens/s, model TFLOP/s
per GPU = tokens/s x (6 N + 12 L d s) (N every parameter, tied embedding once; attention 12 L d s per token as
PaLM's appendix B counts it, the causal half included), and the loss of every step. MFU is the gate's: model
TFLOP/s over the catalog's dense bf16 peak of the SKU.

Reference on one H200 (issue 30): PyTorch eager, 0.94B parameters, 16,384 tokens per step, fused AdamW: 514 model
TFLOP/s (52% of 989), loss 10.56 -> 8.80 in 35 steps, 36 GiB peak. `benchmarks/probe_vs_best.py --goodput`
measures this module against an independent implementation in the same run.

Imported only when torch imports. `parse` reads the JSON text run_all writes (`raw.goodput`). Each GPU's run goes
through `isolated`, a fresh interpreter, so that what the calling process imported cannot break it.
"""

from __future__ import annotations

import glob
import json
import math
import os
import tempfile
import time
from typing import Any

from . import nccl_debug

SCHEMA = "gridready.goodput/1"
# d_model, layers, heads, vocab, seq, batch: 0.97B parameters, 16,384 tokens per step
MODEL: dict[str, int] = {"d": 2048, "layers": 18, "heads": 16, "vocab": 32768, "seq": 2048, "batch": 8}


def n_params(cfg: dict[str, int]) -> int:
    d, v = cfg["d"], cfg["vocab"]
    per_layer = 4 * d * d + 8 * d * d + 2 * d  # attention qkv+out, MLP 4d in and out, two norm weights
    return cfg["layers"] * per_layer + v * d + d  # + tied embedding + final norm


def flops_per_token(cfg: dict[str, int]) -> float:
    return 6.0 * n_params(cfg) + 12.0 * cfg["layers"] * cfg["d"] * cfg["seq"]


def build(torch: Any, cfg: dict[str, int], dev: int) -> Any:
    nn, fn = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = cfg["d"]
            self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x: Any) -> Any:
            b, s, d = x.shape
            h = cfg["heads"]
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
            a = fn.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.down(fn.gelu(self.up(self.n2(x)), approximate="tanh"))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(cfg["vocab"], cfg["d"])
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.norm = nn.RMSNorm(cfg["d"])
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx: Any) -> Any:
            x = self.emb(idx)
            for blk in self.blocks:
                x = blk(x)
            return fn.linear(self.norm(x), self.emb.weight)

    return Decoder().to(device=dev, dtype=torch.bfloat16)


def batches(torch: Any, cfg: dict[str, int], dev: int, seed: int = 30) -> Any:
    """Endless (input, target) batches of the permutation walk, drawn on the GPU from a seeded generator."""
    g = torch.Generator(device=f"cuda:{dev}")
    g.manual_seed(seed)
    v, s, b = cfg["vocab"], cfg["seq"], cfg["batch"]
    perm = torch.randperm(v, device=dev, generator=g)
    # powers of the permutation: row j is perm applied j times, so a sequence is start -> perm^j[start]
    while True:
        start = torch.randint(0, v, (b,), device=dev, generator=g)
        seq = torch.empty(b, s + 1, dtype=torch.long, device=dev)
        seq[:, 0] = start
        for j in range(1, s + 1):
            seq[:, j] = perm[seq[:, j - 1]]
        yield seq[:, :-1], seq[:, 1:]


def train(dev: int, steps: int, warmup: int = 3, cfg: dict[str, int] | None = None, lr: float = 3e-4,
          model_builder: Any = None) -> dict[str, Any]:
    """Train `steps` steps on GPU `dev`; figures over the steps after `warmup`."""
    import torch

    cfg = {**MODEL, **(cfg or {})}
    torch.manual_seed(30)
    with torch.cuda.device(dev):
        torch.cuda.reset_peak_memory_stats(dev)
        model = (model_builder or build)(torch, cfg, dev)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
        data = batches(torch, cfg, dev)
        pre = [next(data) for _ in range(min(steps, 8))]  # data off the clock: the walk is a Python loop
        losses: list[float] = []
        loss_t = []
        t_start = None
        for i in range(steps):
            if i == warmup:
                torch.cuda.synchronize(dev)
                t_start = time.perf_counter()
            x, y = pre[i % len(pre)]
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, cfg["vocab"]).float(), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss_t.append(loss.detach())
        torch.cuda.synchronize(dev)
        wall = time.perf_counter() - (t_start or time.perf_counter())
        losses = [round(float(v), 4) for v in loss_t]
        timed = steps - warmup
        tokens = timed * cfg["batch"] * cfg["seq"]
        tps = tokens / wall if wall > 0 and timed > 0 else None
        out = {"schema": SCHEMA, "index": dev, "name": torch.cuda.get_device_name(dev), "model": cfg,
               "params": n_params(cfg), "flops_per_token": flops_per_token(cfg), "steps": steps, "warmup": warmup,
               "tokens_per_step": cfg["batch"] * cfg["seq"], "seconds_timed": round(wall, 3),
               "tokens_per_s": round(tps, 1) if tps else None,
               "model_tflops": round(tps * flops_per_token(cfg) / 1e12, 1) if tps else None,
               "loss": losses, "loss_first": losses[0] if losses else None,
               "loss_last": losses[-1] if losses else None,
               "loss_finite": all(math.isfinite(v) for v in losses),
               "peak_mem_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 1),
               "torch": torch.__version__}
        del model, opt, pre
        torch.cuda.empty_cache()
    return out


def _ddp_worker(rank: int, world: int, steps: int, warmup: int, port: int, outdir: str) -> None:
    """One rank of the data-parallel run (torch.multiprocessing spawn); rank 0 writes the figures."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device(f"cuda:{rank}"))
    try:
        cfg = dict(MODEL)
        torch.manual_seed(30)
        model = DistributedDataParallel(build(torch, cfg, rank), device_ids=[rank])
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
        data = batches(torch, cfg, rank, seed=30 + rank)
        pre = [next(data) for _ in range(min(steps, 4))]
        loss_t, t0 = [], None
        for i in range(steps):
            if i == warmup:
                torch.cuda.synchronize(rank)
                t0 = time.perf_counter()
            x, y = pre[i % len(pre)]
            loss = torch.nn.functional.cross_entropy(model(x).view(-1, cfg["vocab"]).float(), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss_t.append(loss.detach())
        torch.cuda.synchronize(rank)
        wall = time.perf_counter() - (t0 or time.perf_counter())
        if rank == 0:
            tps = (steps - warmup) * cfg["batch"] * cfg["seq"] / wall if wall > 0 else None
            with open(os.path.join(outdir, "result.json"), "w", encoding="utf-8") as fh:
                json.dump({"tokens_per_s_per_gpu": tps, "loss": [round(float(v), 4) for v in loss_t],
                           "model_tflops_per_gpu": round(tps * flops_per_token(cfg) / 1e12, 1) if tps else None,
                           "seconds_timed": round(wall, 3)}, fh)
    finally:
        dist.destroy_process_group()


def _join_within(ranks: Any, timeout_s: float) -> None:
    """Every rank of a torch ProcessContext joined within `timeout_s` (its `join(timeout)` is True once all have
    exited and raises when one failed); ranks still running then are killed and the run is a TimeoutError: a rank
    hung in an NCCL call would otherwise hold the probe and its GPUs for good."""
    deadline = time.monotonic() + timeout_s
    while not ranks.join(timeout=max(0.0, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            for proc in ranks.processes:
                if proc.is_alive():
                    proc.kill()
                proc.join()
            raise TimeoutError(f"the data-parallel run did not finish within {timeout_s:g} s")


def train_ddp(world: int, steps: int, warmup: int = 3, timeout_s: float = 900.0) -> dict[str, Any]:
    """The model data-parallel over `world` local GPUs with NCCL_DEBUG=INFO: figures and the transports chosen."""
    import torch.multiprocessing as mp

    out: dict[str, Any] = {"present": False, "world": world}
    with tempfile.TemporaryDirectory(prefix="gridready-ddp-") as td:
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,P2P,NET", "NCCL_DEBUG_FILE": f"{td}/nccl.%h.%p.log"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            port = 29500 + os.getpid() % 2000
            ranks = mp.start_processes(_ddp_worker, args=(world, steps, warmup, port, td), nprocs=world,
                                       join=False, start_method="spawn")
            _join_within(ranks, timeout_s)
        except Exception as exc:
            out["reason"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        log = ""
        for name in sorted(glob.glob(f"{td}/nccl.*")):
            with open(name, encoding="utf-8", errors="replace") as fh:
                log += fh.read()
        out["nccl_debug_tail"] = log[-20000:]
        out["transports"] = nccl_debug.parse(log)
        res = os.path.join(td, "result.json")
        if os.path.exists(res):
            with open(res, encoding="utf-8") as fh:
                out.update(json.load(fh), present=True)
        elif "reason" not in out:
            out["reason"] = "the data-parallel run wrote no result"
    return out


def _intern_is_builtin() -> bool:
    """Whether `sys.intern` is Python's own (ansible-core replaces it; torch._dynamo then refuses to import:
    `substitute_in_graph expects a function`)."""
    import sys

    return type(sys.intern).__name__ == "builtin_function_or_method"


def isolated(name: str, *args: int, timeout_s: float = 1800.0) -> Any:
    """`name(*args)` of this module in a fresh interpreter, its JSON result: the measurement does not depend on what
    the calling process imported (a pytest process that imported ansible-core, whose `sys.intern` patch breaks
    torch._dynamo, which fused AdamW and SDPA reach). Raises RuntimeError with the child's last lines on failure."""
    import subprocess
    import sys

    code = ("import json, sys; from gridready.probe import goodput as g; "
            "print('GOODPUT-RESULT ' + json.dumps(getattr(g, sys.argv[1])(*map(int, sys.argv[2:]))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run([sys.executable, "-c", code, name, *map(str, args)], capture_output=True, text=True,
                         timeout=timeout_s, env=env, check=False)
    line = next((ln for ln in reversed(run.stdout.splitlines()) if ln.startswith("GOODPUT-RESULT ")), None)
    if run.returncode != 0 or line is None:
        raise RuntimeError(f"{name} in a fresh interpreter exited {run.returncode}: {run.stderr.strip()[-600:]}")
    return json.loads(line.removeprefix("GOODPUT-RESULT "))


def run_all(prof: dict[str, Any], errors: list[dict[str, str]]) -> str:
    """Every local GPU, one after the other, then (2+ GPUs) the data-parallel run; the JSON text the probe keeps
    as `raw.goodput`."""
    import torch

    gpus = []
    steps = int(prof.get("goodput_steps", 35))
    for d in range(torch.cuda.device_count()):
        try:
            gpus.append(isolated("train", d, steps))
        except Exception as exc:
            errors.append({"collector": "torch.goodput", "gpu": str(d), "error": f"{type(exc).__name__}: {exc}"})
    ddp = None
    if torch.cuda.device_count() >= 2:
        try:
            ddp = train_ddp(torch.cuda.device_count(), min(steps, 12))
        except Exception as exc:
            errors.append({"collector": "torch.goodput_ddp", "error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"schema": SCHEMA, "tool": "gridready.probe.goodput", "gpus": gpus, "ddp": ddp})


def parse(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document")
    return doc
