"""Collective bus-bandwidth sweeps over all local GPUs with torch.distributed (NCCL), one process per GPU.

Sizes and busbw as nccl-tests defines them (doc/PERFORMANCE.md and src/<collective>.cu): `size` is the larger
buffer of a rank (all_gather: the gathered output, reduce_scatter: the input), algbw = size / time, and busbw =
algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather, reduce_scatter and alltoall, x 1 for sendrecv (each rank
sends to rank+1 and receives from rank-1). Each sweep ends with a correctness check of its collective (`wrong`
counts bad elements). Rank 0 writes the result file; the parent collects it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import tempfile
import time
from typing import Any

FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n, "sendrecv": lambda n: 1.0}


def _op(dist: Any, coll: str, world: int, rank: int, buf: Any, out: Any, elems: int) -> Any:
    """One call of `coll` on `elems` elements (the nccl-tests `size` / 2 bytes of bf16)."""
    elems -= elems % world  # shards of equal size
    if coll == "all_reduce":
        return lambda: dist.all_reduce(buf[:elems])
    if coll == "all_gather":
        return lambda: dist.all_gather_into_tensor(out[:elems], buf[: elems // world])
    if coll == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(out[: elems // world], buf[:elems])
    if coll == "alltoall":
        return lambda: dist.all_to_all_single(out[:elems], buf[:elems])
    peer_to, peer_from = (rank + 1) % world, (rank - 1) % world

    def sendrecv() -> None:
        ops = [dist.P2POp(dist.isend, buf[:elems], peer_to), dist.P2POp(dist.irecv, out[:elems], peer_from)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return sendrecv


def _check(torch: Any, dist: Any, coll: str, world: int, rank: int) -> int:
    """Bad elements after one call on data whose right result is known exactly in bf16 (small worlds). The element
    count is a multiple of `world`: all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single refuse
    shards of unequal size (ProcessGroupNCCL: a ValueError on a 3- or 6-GPU node otherwise)."""
    n = (1 << 20) - (1 << 20) % world
    src = torch.full((n,), float(rank + 1), dtype=torch.bfloat16, device=rank)
    out = torch.zeros(n, dtype=torch.bfloat16, device=rank)
    if coll == "all_reduce":
        dist.all_reduce(src)
        got, want = src, torch.full_like(src, world * (world + 1) / 2)
    elif coll == "all_gather":
        dist.all_gather_into_tensor(out, src[: n // world])
        want = torch.arange(1, world + 1, device=rank).repeat_interleave(n // world).to(torch.bfloat16)
        got = out[: want.numel()]
    elif coll == "reduce_scatter":
        dist.reduce_scatter_tensor(out[: n // world], src)
        got, want = out[: n // world], torch.full((n // world,), world * (world + 1) / 2, device=rank)
    elif coll == "alltoall":
        dist.all_to_all_single(out, src)  # chunk j of the output comes from rank j
        want = torch.arange(1, world + 1, device=rank).repeat_interleave(n // world).to(torch.bfloat16)
        got = out[: want.numel()]
    else:
        _op(dist, "sendrecv", world, rank, src, out, n)()
        got, want = out, torch.full_like(out, float((rank - 1) % world + 1))
    bad = torch.tensor([int((got != want.to(got.dtype)).sum().item())], device=rank)
    dist.all_reduce(bad)
    return int(bad.item())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, cfg: dict[str, Any], path: str) -> None:
    os.environ.update(cfg["env"])
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    coll = cfg.get("collective", "all_reduce")
    factor = FACTORS[coll](world)
    buf = torch.zeros(max(cfg["sizes"]) // 2, dtype=torch.bfloat16, device=rank)
    out = torch.zeros_like(buf) if coll != "all_reduce" else buf
    rows = []
    for nbytes in cfg["sizes"]:
        op = _op(dist, coll, world, rank, buf, out, nbytes // 2)
        for _ in range(cfg["warmup"]):
            op()
        trials = []
        for _ in range(cfg["best_of"]):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(cfg["iters"]):
                op()
            torch.cuda.synchronize()
            dt = torch.tensor([(time.perf_counter() - t0) / cfg["iters"]], dtype=torch.float64, device=rank)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the slowest rank sets the time
            trials.append(float(dt.item()))
        best = min(trials)
        rows.append({"bytes": nbytes, "time_us": best * 1e6, "algbw_gbps": nbytes / best / 1e9,
                     "busbw_gbps": nbytes / best / 1e9 * factor,
                     "busbw_trials_gbps": [nbytes / t / 1e9 * factor for t in trials]})
    wrong = _check(torch, dist, coll, world, rank)
    if rank == 0:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "wrong": wrong, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}, fh)
    dist.destroy_process_group()


def sweep(world: int, sizes: list[int], iters: int, warmup: int, best_of: int, env: dict[str, str],
          timeout_s: float, collective: str = "all_reduce") -> dict[str, Any]:
    """Spawn `world` processes; returns {world, collective, env, dtype, sizes: [...], wrong, wall_s} or raises."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    cfg = {"sizes": sizes, "iters": iters, "warmup": warmup, "best_of": best_of, "env": env, "collective": collective}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "allreduce.json")
        procs = [ctx.Process(target=_worker, args=(r, world, port, cfg, path)) for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(1.0, deadline - time.monotonic()))
        hung = [p for p in procs if p.is_alive()]
        for p in hung:
            p.kill()
        codes = [p.exitcode for p in procs]
        if hung:
            raise TimeoutError(f"all-reduce sweep exceeded {timeout_s:.0f} s")
        if any(c != 0 for c in codes) or not os.path.exists(path):
            raise RuntimeError(f"all-reduce workers exited with {codes}")
        with open(path, encoding="utf-8") as fh:
            res = json.load(fh)
    return {"world": world, "collective": collective, "env": env, "dtype": "bfloat16", "sizes": res["rows"],
            "wrong": res["wrong"],
            "nccl": res["nccl"], "wall_s": round(time.monotonic() - t0, 2)}
