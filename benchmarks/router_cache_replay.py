"""Cache-aware routing inside a tier against round-robin: a multi-turn chat replay through the tier router.

The tier: `--replicas` replicas of gridready's simulated engine in vLLM mode (SIMULATED: sandbox.engine, whose
prefix cache follows vLLM's automatic prefix caching: 16-token blocks, a hash chain of full blocks, LRU eviction
tail first; sandbox/engine/prefix_cache.py), behind the tier router (vllm-router, the PyPI wheel) with
`--policy cache_aware` and then `--policy round_robin`, every engine restarted between the two so both start cold.
The replay: `--conversations` chats, each opening with one of `--system-prompts` shared system prompts and growing
by a user turn and the assistant's answer per turn (`--turns`), `--concurrency` chats at a time, every request
streamed. Per policy: client TTFT p50/p90 and the engines' own prefix-cache hit rate (the difference of
vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total over the replay, summed over the replicas).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/router_cache_replay.py --rust-venv /tmp/router-venv \
        [--decision <serve dir>/decision/<model>/decision.json] [--out result.json]

With --decision the figures are added to that decision record (decision.json and decision.md, `routing`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.router_overhead import MODEL, start, start_engines  # noqa: E402
from gridready.bench.decision import Decision, PolicyFigures, RoutingComparison, routing_comparison  # noqa: E402
from gridready.bench.http import Connection, Url, fetch  # noqa: E402
from gridready.bench.record import routing_section  # noqa: E402
from gridready.bench.stats import percentile  # noqa: E402
from gridready.serving import tier_router  # noqa: E402
from tests.router.harness import Proc, free_port, wait_http  # noqa: E402

WORDS = ("grid", "ready", "node", "fabric", "tensor", "batch", "cache", "token", "model", "serve", "route", "tier")
HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(n))


def conversations(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(system prompt, user turns) per chat; the same seed gives both policies the same replay."""
    rng = random.Random(args.seed)
    systems = [words(rng, args.system_tokens) for _ in range(args.system_prompts)]
    return [(systems[i % len(systems)], [words(rng, args.user_tokens) for _ in range(args.turns)])
            for i in range(args.conversations)]


async def prefix_counters(urls: list[str]) -> tuple[float, float]:
    hits = queries = 0.0
    for url in urls:
        _status, _headers, body = await fetch(url, "/metrics")
        for line in body.decode().splitlines():
            m = re.match(r"^([a-z:_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
            if m and m.group(1) == HITS:
                hits += float(m.group(3))
            elif m and m.group(1) == QUERIES:
                queries += float(m.group(3))
    return hits, queries


async def chat(url: str, system: str, turns: list[str], max_tokens: int, ttfts: list[float], failed: list[int]
               ) -> None:
    conn = Connection(Url.parse(url))
    messages = [{"role": "system", "content": system}]
    try:
        for user in turns:
            messages.append({"role": "user", "content": user})
            body = json.dumps({"model": MODEL, "messages": messages, "max_tokens": max_tokens,
                               "stream": True}).encode()
            resp = await conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            if resp.status != 200:
                await conn.read(resp)
                failed[0] += 1
                continue
            first, answer = None, []
            async for t, data in conn.sse(resp):
                if data == b"[DONE]":
                    continue
                delta = json.loads(data)["choices"][0].get("delta", {}).get("content")
                if delta:
                    first = first or t
                    answer.append(delta)
            if first is not None:
                ttfts.append((first - resp.sent) * 1000)
            messages.append({"role": "assistant", "content": "".join(answer)})
    finally:
        conn.close()


async def replay(url: str, engines: list[str], chats: list[tuple[str, list[str]]], concurrency: int,
                 max_tokens: int) -> PolicyFigures:
    h0, q0 = await prefix_counters(engines)
    ttfts: list[float] = []
    failed = [0]
    gate = asyncio.Semaphore(concurrency)

    async def one(system: str, turns: list[str]) -> None:
        async with gate:
            await chat(url, system, turns, max_tokens, ttfts, failed)

    started = time.monotonic()
    await asyncio.gather(*(one(s, t) for s, t in chats))
    h1, q1 = await prefix_counters(engines)
    return PolicyFigures(requests=len(ttfts) + failed[0], failed=failed[0],
                         ttft_p50_ms=round(percentile(ttfts, 50), 1), ttft_p90_ms=round(percentile(ttfts, 90), 1),
                         prefix_hit_rate=round((h1 - h0) / (q1 - q0), 4) if q1 > q0 else 0.0,
                         seconds=round(time.monotonic() - started, 1))


def run_policy(args: argparse.Namespace, policy: str, chats: list[tuple[str, list[str]]]) -> PolicyFigures:
    workdir = Path(tempfile.mkdtemp(prefix=f"gridready-replay-{policy}-"))
    engine_flags = ["--prefill-us-per-token", str(args.prefill_us_per_token), "--ttft-ms", "5", "--itl-ms", "2",
                    "--num-gpu-blocks-override", str(args.kv_blocks)]
    engines, urls = start_engines(workdir, args.replicas, engine_flags)
    router: Proc | None = None
    try:
        port = free_port()
        argv = tier_router.argv(tier_router.TierRouter(tier="replay", bind="127.0.0.1", port=port,
                                                       workers=tuple(urls), policy=policy))
        router = start(workdir, "vllm-router", [str(args.rust_venv / "bin" / argv[0]), *argv[1:]])
        wait_http(f"http://127.0.0.1:{port}/v1/models", 120)
        return asyncio.run(replay(f"http://127.0.0.1:{port}", urls, chats, args.concurrency, args.max_tokens))
    finally:
        if router:
            router.stop()
        for proc in engines:
            proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def attach(decision_file: Path, comparison: RoutingComparison) -> None:
    """Add the figures to a decision record: decision.json's `routing`, and its section in decision.md (before
    "Who would win", replacing an earlier one; the rest of the record as it was written)."""
    decision = Decision.model_validate_json(decision_file.read_text())
    decision = decision.model_copy(update={"routing": comparison})
    decision_file.write_text(decision.model_dump_json(indent=2) + "\n")
    md_file = decision_file.parent / "decision.md"
    lines = md_file.read_text().splitlines()
    heading = [i for i, line in enumerate(lines) if line.startswith("## Routing inside a tier")]
    if heading:  # an earlier section: up to the next line that is not part of it
        end = next(i for i in range(heading[0] + 1, len(lines)) if lines[i].startswith(("Who would win", "## ")))
        lines[heading[0] - 1:end - 1] = []
    at = next((i - 1 for i, line in enumerate(lines) if line.startswith("Who would win")), len(lines))
    lines[at:at] = routing_section(comparison)
    md_file.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rust-venv", type=Path, required=True, help="venv with vllm-router (the tier router)")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--system-prompts", type=int, default=4)
    ap.add_argument("--system-tokens", type=int, default=200)
    ap.add_argument("--conversations", type=int, default=48)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--user-tokens", type=int, default=150)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prefill-us-per-token", type=float, default=50.0,
                    help="simulated prefill cost per uncached prompt token")
    ap.add_argument("--kv-blocks", type=int, default=1024,
                    help="each replica's KV pool in 16-token blocks (vLLM --num-gpu-blocks-override)")
    ap.add_argument("--seed", type=int, default=47)
    ap.add_argument("--decision", type=Path, help="decision.json to add the figures to")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    chats = conversations(args)
    figures = {policy: run_policy(args, policy, chats) for policy in ("cache_aware", "round_robin")}
    workload = {k: getattr(args, k) for k in ("replicas", "system_prompts", "system_tokens", "conversations",
                                              "turns", "user_tokens", "max_tokens", "concurrency",
                                              "prefill_us_per_token", "kv_blocks", "seed")}
    comparison = routing_comparison(figures["cache_aware"], figures["round_robin"], workload,
                                    router=f"vllm-router {tier_router.VERSION}", simulated=True)
    text = comparison.model_dump_json(indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    if args.decision:
        attach(args.decision, comparison)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
