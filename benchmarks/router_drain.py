"""Drain under load: a node drained in the ledger stops receiving requests through the tier router, none failing.

One tier of `--replicas` replicas of gridready's simulated engine (SIMULATED, sandbox.engine on 127.0.0.1; replica
i stands for node<i+1>) behind its tier router (vllm-router, gridready.serving.tier_router), a ledger of those nodes
in a scratch artifacts root, and the drain follower (gridready.serving.router_drain.follow) syncing the router from
the ledger every `--interval` seconds. A steady load (`--rate` requests/s, Poisson, streamed) runs `--seconds`;
after `--drain-at` seconds the last node is drained in the ledger (gridready.ledger.drain, as `invoke watch`
records it). Reported: when the router dropped the replica after the drain was recorded, the last request the
drained engine received after the drain (from the engine's own request log, the same monotonic clock), requests
sent and failed. Goal: the drained node receives nothing later than 10 s after the drain, 0 failed.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/router_drain.py --rust-venv /tmp/router-venv [--out result.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.router_overhead import BODY, start, start_engines  # noqa: E402
from gridready import ledger  # noqa: E402
from gridready.bench.http import Connection, HttpError, Url, fetch  # noqa: E402
from gridready.serving import router_drain, tier_router  # noqa: E402
from tests.router.harness import free_port, wait_http  # noqa: E402

CUSTOMER = "drainbench"


@dataclass(frozen=True)
class Replica:
    head: str
    nodes: tuple[str, ...]


def seed_ledger(root: Path, nodes: list[str]) -> None:
    summary = root / CUSTOMER / "runs" / "certify" / "summary.json"
    entries = {n: ledger.NodeEntry(verdict="certified", run_id="bench", judged_at="2026-12-06T00:00:00Z",
                                   profile="quick", summary=str(summary)) for n in nodes}
    ledger.update(root, CUSTOMER, lambda book: book.model_copy(update={"nodes": entries}))


async def load(url: str, rate: float, seconds: float, seed: int) -> dict[str, int]:
    """Poisson arrivals at `rate`/s for `seconds`, each request streamed to its end on its own connection."""
    rng = random.Random(seed)
    counts = {"sent": 0, "ok": 0, "failed": 0}
    body = json.loads(BODY) | {"stream": True, "max_tokens": 4}

    async def one() -> None:
        conn = Connection(Url.parse(url))
        try:
            resp = await conn.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                      {"Content-Type": "application/json"})
            events = [d async for _t, d in conn.sse(resp)] if resp.status == 200 else [await conn.read(resp)]
            counts["ok" if resp.status == 200 and events and events[-1] == b"[DONE]" else "failed"] += 1
        except (HttpError, OSError):
            counts["failed"] += 1
        finally:
            conn.close()

    tasks = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        tasks.append(asyncio.create_task(one()))
        counts["sent"] += 1
        await asyncio.sleep(rng.expovariate(rate))
    await asyncio.gather(*tasks)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rust-venv", type=Path, required=True, help="venv with vllm-router (the tier router)")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--rate", type=float, default=60.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--drain-at", type=float, default=10.1,
                    help="seconds into the load (10.1: just after a sync at 0, 2, 4 ...: the worst case)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between the follower's syncs")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="gridready-drain-bench-"))
    nodes = [f"node{i + 1}" for i in range(args.replicas)]
    engines, urls = start_engines(root, args.replicas)
    replicas = [Replica(head=n, nodes=(n,)) for n in nodes]
    url_of = dict(zip(nodes, urls, strict=True))
    seed_ledger(root, nodes)
    proc = None
    stop = threading.Event()
    removed_at: dict[str, float] = {}

    def wanted() -> dict[str, list[str]]:
        drained = {n for n, e in ledger.read(root, CUSTOMER)[1].nodes.items() if e.drained}
        return {router.url: router_drain.wanted_workers(replicas, lambda r: url_of[r.head], drained)}

    def report(results: list[router_drain.SyncResult]) -> None:
        for r in results:
            for url in r.removed:
                removed_at.setdefault(url, time.perf_counter())

    try:
        router = tier_router.TierRouter(tier="bench", bind="127.0.0.1", port=free_port(), workers=tuple(urls))
        argv_ = tier_router.argv(router)
        proc = start(root, "vllm-router", [str(args.rust_venv / "bin" / argv_[0]), *argv_[1:]])
        wait_http(f"{router.url}/v1/models", 120)
        follower = threading.Thread(target=router_drain.follow, kwargs={
            "read_wanted": wanted, "interval_s": args.interval, "until": stop.is_set, "report": report}, daemon=True)
        follower.start()
        drained_node, drained_url = nodes[-1], urls[-1]
        drain_recorded: list[float] = []

        def drain() -> None:
            time.sleep(args.drain_at)
            ledger.update(root, CUSTOMER, lambda book: ledger.drain(book, drained_node, "drain benchmark"))
            drain_recorded.append(time.perf_counter())

        threading.Thread(target=drain, daemon=True).start()
        counts = asyncio.run(load(router.url, args.rate, args.seconds, seed=47))
        stop.set()
        follower.join(10)
        records = asyncio.run(fetch(drained_url, "/gridready/requests"))[2]
        received = [r["received"] for r in json.loads(records)]
        t_drain = drain_recorded[0]
        after = [t - t_drain for t in received if t >= t_drain]
        result: dict[str, Any] = {
            "simulated": True, "router": f"vllm-router {tier_router.VERSION}", "replicas": args.replicas,
            "rate_rps": args.rate, "seconds": args.seconds, "sync_interval_s": args.interval,
            "drained_node": drained_node, "requests": counts,
            "router_dropped_after_s": round(removed_at[drained_url] - t_drain, 2) if drained_url in removed_at
            else None,
            "last_request_to_drained_after_s": round(max(after), 2) if after else 0.0,
            "requests_to_drained_after_drain": len(after),
            "requests_to_drained_before_drain": len(received) - len(after)}
        result["goal_met"] = (result["router_dropped_after_s"] is not None
                              and result["last_request_to_drained_after_s"] <= 10.0 and counts["failed"] == 0)
    finally:
        stop.set()
        if proc:
            proc.stop()
        for e in engines:
            e.stop()
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    shutil.rmtree(root, ignore_errors=True)
    return 0 if result["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
