"""The load generator: drive one endpoint at one level (fixed concurrency or Poisson rate), bounded in
requests and time, and return every request's result."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from gridready.bench.http import Connection, Url
from gridready.bench.protocols import Api, Prompt, RequestResult, execute
from gridready.bench.workload import Level, Workload


@dataclass
class LevelRun:
    level: Level
    results: list[RequestResult] = field(default_factory=list)
    started: float = 0.0  # perf_counter of the run start (t0)
    wall_s: float = 0.0  # first send to last completion


async def _one(conn: Connection, api: Api, model: str, prompt: Prompt, rid: str, t0: float, scheduled: float,
               wl: Workload) -> RequestResult:
    try:
        async with asyncio.timeout(wl.request_timeout_s):  # no extra task per request, unlike wait_for
            res, _ = await execute(conn, api, model, prompt, rid, t0, ignore_eos=wl.ignore_eos)
    except TimeoutError:
        conn.close()
        res = RequestResult(rid, error=f"timed out after {wl.request_timeout_s:g} s",
                            prompt_tokens=prompt.input_tokens)
        res.sent = scheduled
    res.scheduled = scheduled
    return res


async def _warmup(url: Url, api: Api, model: str, prompts: list[Prompt], wl: Workload) -> None:
    conn = Connection(url)
    try:
        for i, p in enumerate(prompts[: wl.warmup]):
            await _one(conn, api, model, Prompt(p.text, p.input_tokens, min(p.output_tokens, 4)),
                       f"warmup-{i}", time.perf_counter(), 0.0, wl)
    finally:
        conn.close()


async def run_level(url: Url, api: Api, model: str, level: Level, wl: Workload, tag: str = "") -> LevelRun:
    """Run one level. Stops issuing at num_prompts or duration_s; requests in flight then finish."""
    prompts = wl.prompts()
    if wl.warmup:
        await _warmup(url, api, model, prompts, wl)
    run = LevelRun(level)
    t0 = time.perf_counter()
    run.started = t0
    deadline = t0 + wl.duration_s
    prefix = f"{tag}{level.label}-"
    if level.kind == "concurrency":
        await _fixed_concurrency(url, api, model, prompts, int(level.value), wl, run, t0, deadline, prefix)
    else:
        await _poisson(url, api, model, prompts, level.value, wl, run, t0, deadline, prefix)
    done = [r.sent + (r.e2e or 0.0) for r in run.results if r.ok]
    first = min((r.sent for r in run.results), default=0.0)
    run.wall_s = max(done, default=first) - first
    return run


async def _fixed_concurrency(url: Url, api: Api, model: str, prompts: list[Prompt], c: int, wl: Workload,
                             run: LevelRun, t0: float, deadline: float, prefix: str) -> None:
    queue = iter(enumerate(prompts))

    async def worker() -> None:
        conn = Connection(url)
        try:
            while time.perf_counter() < deadline:
                nxt = next(queue, None)
                if nxt is None:
                    return
                i, p = nxt
                run.results.append(await _one(conn, api, model, p, f"{prefix}{i}", t0, time.perf_counter() - t0, wl))
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(c)))


async def _poisson(url: Url, api: Api, model: str, prompts: list[Prompt], rate: float, wl: Workload,
                   run: LevelRun, t0: float, deadline: float, prefix: str) -> None:
    rng = random.Random(wl.seed)
    idle: list[Connection] = []
    cap = asyncio.Semaphore(wl.max_concurrency) if wl.max_concurrency else None
    tasks: list[asyncio.Task[None]] = []

    async def fire(i: int, p: Prompt, scheduled: float) -> None:
        conn = idle.pop() if idle else Connection(url)
        try:
            run.results.append(await _one(conn, api, model, p, f"{prefix}{i}", t0, scheduled, wl))
        finally:
            if conn.reusable:
                idle.append(conn)
            else:
                conn.close()
            if cap is not None:
                cap.release()

    at = 0.0
    for i, p in enumerate(prompts):
        at += rng.expovariate(rate)
        if t0 + at >= deadline:
            break
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if cap is not None:
            await cap.acquire()
        tasks.append(asyncio.create_task(fire(i, p, at)))
    await asyncio.gather(*tasks)
    for conn in idle:
        conn.close()
