"""Drain through the tier routers: the ledger's drained nodes leave their tiers' rotation in seconds, no restart.

Each tier router (gridready.serving.tier_router) holds its tier's replicas as a run-time set (vllm-router's
GET /list_workers, POST /remove_worker?url=, POST /add_worker?url=). A sync reads what the router holds, compares
it with the replicas the ledger allows (every replica with no drained node; a tier left with none keeps them all,
as the front router's drain does: gridready.stages.serve.drain) and sends only the difference. A removed replica
finishes the requests it holds and gets no new one; a returned node is added back the same way.
`follow` repeats the sync every `interval_s`, so a drain recorded by any writer of the ledger (the watcher, a roll,
a hand edit) reaches the routers within one interval plus one sync.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from gridready.bench.http import HttpError, fetch
from gridready.serving.tier_router import worker_changes


class _Replica(Protocol):
    head: str
    nodes: tuple[str, ...]


def replica_url(ip: str, port: int) -> str:
    return f"http://{ip}:{port}"


def wanted_workers(replicas: Sequence[_Replica], url_of: Callable[[_Replica], str], drained: set[str]) -> list[str]:
    """The replica URLs a tier router should hold: those with no drained node; all of them when none is left."""
    every = [url_of(r) for r in replicas]
    kept = [url_of(r) for r in replicas if not set(r.nodes) & drained]
    return kept or every


@dataclass
class SyncResult:
    router: str
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"router": self.router, "removed": self.removed, "added": self.added, "error": self.error}


async def sync(router_url: str, wanted: Iterable[str], timeout_s: float = 5.0) -> SyncResult:
    """Make the router at `router_url` hold exactly `wanted`; a failure is reported, never raised."""
    out = SyncResult(router_url)
    try:
        status, _headers, body = await fetch(router_url, "/list_workers", timeout=timeout_s)
        if status != 200:
            out.error = f"GET /list_workers answered {status}"
            return out
        listed = json.loads(body).get("urls", [])
        out.removed, out.added = worker_changes(listed, wanted)
        for verb, urls in (("remove_worker", out.removed), ("add_worker", out.added)):
            for url in urls:
                status, _headers, body = await fetch(router_url, f"/{verb}?url={quote(url, safe='')}",
                                                     method="POST", timeout=timeout_s)
                if status != 200:
                    out.error = f"POST /{verb} {url} answered {status}: {body[:200].decode(errors='replace')}"
                    return out
    except (HttpError, OSError, ValueError) as err:
        out.error = f"{type(err).__name__}: {err}"
    return out


async def held(router_url: str, timeout_s: float = 3.0) -> tuple[list[str], str | None]:
    """(the replicas the router holds, sorted; None) or ([], why it could not be read)."""
    try:
        status, _headers, body = await fetch(router_url, "/list_workers", timeout=timeout_s)
        if status != 200:
            return [], f"GET /list_workers answered {status}"
        return sorted(u.rstrip("/") for u in json.loads(body).get("urls", [])), None
    except (HttpError, OSError, ValueError) as err:
        return [], f"{type(err).__name__}: {err}"


def held_all(router_urls: list[str], timeout_s: float = 3.0) -> dict[str, tuple[list[str], str | None]]:
    async def go() -> list[tuple[list[str], str | None]]:
        return list(await asyncio.gather(*(held(u, timeout_s) for u in router_urls)))
    return dict(zip(router_urls, asyncio.run(go()), strict=True))


def sync_all(wanted: Mapping[str, Iterable[str]], timeout_s: float = 5.0) -> list[SyncResult]:
    """`sync` of every router URL -> its wanted replicas, concurrently."""
    async def go() -> list[SyncResult]:
        return list(await asyncio.gather(*(sync(url, ws, timeout_s) for url, ws in wanted.items())))
    return asyncio.run(go())


def follow(read_wanted: Callable[[], Mapping[str, Iterable[str]]], interval_s: float = 2.0,
           until: Callable[[], bool] = lambda: False,
           report: Callable[[list[SyncResult]], None] = lambda _r: None) -> None:
    """Sync every `interval_s` (the wanted replicas read afresh each time, e.g. from the ledger) until `until()`."""
    while not until():
        started = time.monotonic()
        results = sync_all(read_wanted())
        if any(r.removed or r.added or r.error for r in results):
            report(results)
        time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
