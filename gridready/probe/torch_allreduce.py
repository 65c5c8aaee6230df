"""All-reduce bus-bandwidth sweep over all local GPUs with torch.distributed (NCCL), one process per GPU.

busbw = algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md). Rank 0 writes the result file; the parent collects it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import tempfile
import time
from typing import Any


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
    factor = 2 * (world - 1) / world
    buf = torch.zeros(max(cfg["sizes"]) // 2, dtype=torch.bfloat16, device=rank)
    rows = []
    for nbytes in cfg["sizes"]:
        view = buf[: nbytes // 2]
        for _ in range(cfg["warmup"]):
            dist.all_reduce(view)
        trials = []
        for _ in range(cfg["best_of"]):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(cfg["iters"]):
                dist.all_reduce(view)
            torch.cuda.synchronize()
            dt = torch.tensor([(time.perf_counter() - t0) / cfg["iters"]], dtype=torch.float64, device=rank)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the slowest rank sets the time
            trials.append(float(dt.item()))
        best = min(trials)
        rows.append({"bytes": nbytes, "time_us": best * 1e6, "algbw_gbps": nbytes / best / 1e9,
                     "busbw_gbps": nbytes / best / 1e9 * factor,
                     "busbw_trials_gbps": [nbytes / t / 1e9 * factor for t in trials]})
    # correctness: sum of (rank+1) over ranks, exact in bf16 for small worlds
    check = torch.full((1 << 20,), float(rank + 1), dtype=torch.bfloat16, device=rank)
    dist.all_reduce(check)
    wrong = int((check != world * (world + 1) / 2).sum().item())
    if rank == 0:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "wrong": wrong, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}, fh)
    dist.destroy_process_group()


def sweep(world: int, sizes: list[int], iters: int, warmup: int, best_of: int, env: dict[str, str],
          timeout_s: float) -> dict[str, Any]:
    """Spawn `world` processes; returns {world, env, dtype, sizes: [...], wrong, wall_s} or raises."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    cfg = {"sizes": sizes, "iters": iters, "warmup": warmup, "best_of": best_of, "env": env}
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
    return {"world": world, "env": env, "dtype": "bfloat16", "sizes": res["rows"], "wrong": res["wrong"],
            "nccl": res["nccl"], "wall_s": round(time.monotonic() - t0, 2)}
