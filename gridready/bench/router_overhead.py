"""The router's own added latency: the same small request, interleaved, straight to a tier and through the router.

Each pair goes direct then routed on keep-alive connections, so drift of the engine affects both alike; the report
gives p50/p99 of each path and their difference (routed - direct), in milliseconds.
"""

from __future__ import annotations

import json
import time

from pydantic import BaseModel

from gridready.bench.http import Connection, Url
from gridready.bench.stats import percentile


class PathLatency(BaseModel):
    p50_ms: float
    p99_ms: float
    errors: int


class RouterOverhead(BaseModel):
    requests: int
    model: str
    direct: PathLatency
    routed: PathLatency
    added_p50_ms: float
    added_p99_ms: float


async def _once(conn: Connection, path: str, body: bytes, headers: dict[str, str]) -> float | None:
    start = time.perf_counter()
    resp = await conn.request("POST", path, body, headers)
    await conn.read(resp)
    return (time.perf_counter() - start) * 1000 if resp.status == 200 else None


def _path(samples: list[float | None]) -> PathLatency:
    ok = [s for s in samples if s is not None]
    return PathLatency(p50_ms=round(percentile(ok, 50), 2), p99_ms=round(percentile(ok, 99), 2),
                       errors=len(samples) - len(ok))


async def measure(direct_url: str, router_url: str, model: str, router_key: str, direct_key: str | None = None,
                  n: int = 100, max_tokens: int = 1) -> RouterOverhead:
    """`n` interleaved pairs of one chat completion of `max_tokens` tokens (headers carry the keys, never argv)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "ping"}],
                       "max_tokens": max_tokens}).encode()
    direct, routed = Connection(Url.parse(direct_url)), Connection(Url.parse(router_url))
    base = {"Content-Type": "application/json"}
    d_hdrs = base | ({"Authorization": f"Bearer {direct_key}"} if direct_key else {})
    r_hdrs = base | {"Authorization": f"Bearer {router_key}"}
    d_path = r_path = "/v1/chat/completions"  # under each URL's own base path
    d_samples: list[float | None] = []
    r_samples: list[float | None] = []
    try:
        for _ in range(3):  # warm both paths (connections, the router's first-request setup)
            await _once(direct, d_path, body, d_hdrs)
            await _once(routed, r_path, body, r_hdrs)
        for _ in range(n):
            d_samples.append(await _once(direct, d_path, body, d_hdrs))
            r_samples.append(await _once(routed, r_path, body, r_hdrs))
    finally:
        direct.close()
        routed.close()
    d, r = _path(d_samples), _path(r_samples)
    return RouterOverhead(requests=n, model=model, direct=d, routed=r,
                          added_p50_ms=round(r.p50_ms - d.p50_ms, 2), added_p99_ms=round(r.p99_ms - d.p99_ms, 2))
