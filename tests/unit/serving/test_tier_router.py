"""The tier router (vllm-router in front of one tier's replicas): its command line, and the drain path that turns
the ledger's drained nodes into the router's replica set (gridready.serving.router_drain)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest

from gridready.serving import router_drain, tier_router
from gridready.serving.tier_router import TierRouter


@dataclass(frozen=True)
class Replica:
    head: str
    nodes: tuple[str, ...]


def test_argv_balances_the_tier_replicas_cache_aware_with_no_secret():
    r = TierRouter(tier="hot", bind="10.0.0.1", port=4100, workers=("http://10.0.0.1:8000", "http://10.0.0.2:8000"))
    argv = tier_router.argv(r)
    assert argv[0] == "vllm-router"
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    assert argv[argv.index("--worker-urls") + 1:argv.index("--policy")] == list(r.workers)
    assert argv[argv.index("--host") + 1:argv.index("--host") + 4] == ["10.0.0.1", "--port", "4100"]
    assert "--api-key" not in argv  # the replicas check the client's key; argv is world-readable
    assert r.url == "http://10.0.0.1:4100"


@pytest.mark.parametrize(("policy", "workers", "msg"), [
    ("least_cost", ("http://a:1",), "tier router policy 'least_cost'"),
    ("round_robin", (), "tier hot: a tier router needs at least one replica")])
def test_bad_tier_router_settings_are_refused(policy, workers, msg):
    with pytest.raises(ValueError, match=msg):
        TierRouter(tier="hot", bind="b", port=1, workers=workers, policy=policy)


def test_worker_changes_sends_only_the_difference():
    assert tier_router.worker_changes(["http://a:1/", "http://b:1"], ["http://b:1", "http://c:1"]) == (
        ["http://a:1"], ["http://c:1"])
    assert tier_router.worker_changes(["http://a:1"], ["http://a:1/"]) == ([], [])


def test_wanted_workers_leaves_out_replicas_on_drained_nodes():
    replicas = [Replica("n1", ("n1",)), Replica("n2", ("n2", "n3")), Replica("n4", ("n4",))]
    ips = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n4": "10.0.0.4"}

    def url(r: Replica) -> str:
        return router_drain.replica_url(ips[r.head], 8000)

    assert router_drain.wanted_workers(replicas, url, set()) == [
        "http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.4:8000"]
    # a worker node drained takes its whole multi-node replica out
    assert router_drain.wanted_workers(replicas, url, {"n3"}) == ["http://10.0.0.1:8000", "http://10.0.0.4:8000"]
    # a tier left with no replica keeps them all (an empty router answers 503 to everything)
    assert len(router_drain.wanted_workers(replicas, url, {"n1", "n2", "n4"})) == 3


class FakeTierRouter:
    """vllm-router's worker API on loopback (GET /list_workers, POST /remove_worker|/add_worker?url=), the
    shape measured against vllm-router 0.1.17; `refuse` answers 500 to one verb."""

    def __init__(self, urls: list[str], refuse: str | None = None) -> None:
        self.urls, self.refuse, self.calls = list(urls), refuse, []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        method, target, _ = line.split(" ", 2)
        parts = urlsplit(target)
        url = parse_qs(parts.query).get("url", [""])[0]
        self.calls.append((method, parts.path, url))
        status, body = 200, b""
        if parts.path == "/list_workers":
            body = json.dumps({"urls": self.urls}).encode()
        elif parts.path.strip("/") == self.refuse:
            status, body = 500, b"no"
        elif parts.path == "/remove_worker":
            self.urls.remove(url)
            body = f"Successfully removed worker: {url}".encode()
        elif parts.path == "/add_worker":
            self.urls.append(url)
            body = f"Successfully added worker: {url}".encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)
        await writer.drain()
        writer.close()


@pytest.fixture
def fake() -> Iterator[tuple[FakeTierRouter, asyncio.AbstractEventLoop, str]]:
    loop = asyncio.new_event_loop()
    router = FakeTierRouter(["http://10.0.0.1:8000", "http://10.0.0.2:8000"])
    server = loop.run_until_complete(asyncio.start_server(router.handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    try:
        yield router, loop, f"http://127.0.0.1:{port}"
    finally:
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def test_sync_removes_the_drained_replica_and_adds_a_returned_one(fake):
    router, loop, url = fake
    done = loop.run_until_complete(router_drain.sync(url, ["http://10.0.0.1:8000"]))
    assert (done.removed, done.added, done.error) == (["http://10.0.0.2:8000"], [], None)
    assert router.urls == ["http://10.0.0.1:8000"]
    again = loop.run_until_complete(router_drain.sync(url, ["http://10.0.0.1:8000"]))
    assert (again.removed, again.added) == ([], [])  # nothing to change: one GET, no POST
    assert [c[0] for c in router.calls].count("POST") == 1
    back = loop.run_until_complete(router_drain.sync(url, ["http://10.0.0.1:8000", "http://10.0.0.2:8000"]))
    assert back.added == ["http://10.0.0.2:8000"] and sorted(router.urls) == [
        "http://10.0.0.1:8000", "http://10.0.0.2:8000"]


def test_sync_reports_a_refused_change_and_an_unreachable_router(fake):
    router, loop, url = fake
    router.refuse = "remove_worker"
    done = loop.run_until_complete(router_drain.sync(url, []))
    assert done.error and done.error.startswith("POST /remove_worker http://10.0.0.1:8000 answered 500")
    gone = loop.run_until_complete(router_drain.sync("http://127.0.0.1:9", ["x"], timeout_s=1))
    assert gone.error and gone.removed == [] and gone.added == []
