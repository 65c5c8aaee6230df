"""LiteLLM in front of a tier router (vllm-router from the role's lock) in front of two replicas, on loopback: the
composition serving.router.tier_routers deploys. Requests through the one endpoint reach both replicas, and a
drain sent to the running tier router (gridready.serving.router_drain) takes a replica out under load with no
failed request and no restart."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from gridready.serving import router, router_drain, tier_router
from gridready.spec.router import Route, RouterSpec, RouteTarget
from sandbox import tier_router_venv
from tests.router.harness import Harness, Proc, free_port, wait_http

MODEL = "llama-pool"


def _received(engine_url: str) -> int:
    with urllib.request.urlopen(f"{engine_url}/gridready/requests", timeout=10) as resp:
        return len(json.loads(resp.read()))


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, tier_router.TierRouter]]:
    h = Harness.create(tmp_path_factory.mktemp("tier-router"))
    proc = None
    try:
        engines = [h.start_engine(f"pool-{i}", MODEL, "--ttft-ms", "5", "--itl-ms", "1", "--seed", str(i))
                   for i in range(2)]
        tr = tier_router.TierRouter(tier="pool", bind="127.0.0.1", port=free_port(),
                                    workers=tuple(f"http://127.0.0.1:{e.port}" for e in engines),
                                    policy="round_robin")
        argv = tier_router.argv(tr)
        log = h.workdir / "tier-router.log"
        with open(log, "ab") as out:
            proc = Proc(subprocess.Popen([str(tier_router_venv.ensure_venv() / argv[0]), *argv[1:]], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True), log)
        wait_http(f"{tr.url}/v1/models", 120)
        spec = RouterSpec(enabled=True, keys=[{"name": "ci", "vault_var": "k"}], num_retries=1)
        h.start_router(spec, [Route(model=MODEL, targets=[RouteTarget(tier="pool")])], {"ci": None},
                       upstreams={"pool": [router.Upstream("pool", f"{tr.url}/v1", MODEL)]})
        yield h, tr
    finally:
        if proc:
            proc.stop()
        h.close()


def _chat(h: Harness, n: int, out: list[int]) -> None:
    for i in range(n):
        status, _body, _headers = h.request("/v1/chat/completions", {
            "model": MODEL, "messages": [{"role": "user", "content": f"hello {i}"}], "max_tokens": 2},
            key=h.keys["ci"])
        out.append(status)


def test_the_one_endpoint_reaches_both_replicas_through_the_tier_router(composed):
    h, _tr = composed
    before = {t: _received(e.base_url.removesuffix("/v1")) for t, e in h.engines.items()}
    statuses: list[int] = []
    _chat(h, 12, statuses)
    assert statuses == [200] * 12
    got = {t: _received(e.base_url.removesuffix("/v1")) - before[t] for t, e in h.engines.items()}
    assert all(n >= 3 for n in got.values()), got  # round-robin inside the tier


def test_a_drain_under_load_takes_a_replica_out_with_no_failed_request(composed):
    h, tr = composed
    kept, drained = (f"http://127.0.0.1:{h.engines[t].port}" for t in ("pool-0", "pool-1"))
    statuses: list[int] = []
    load = threading.Thread(target=_chat, args=(h, 40, statuses))
    load.start()
    try:
        done = asyncio.run(router_drain.sync(tr.url, [kept]))
        assert (done.removed, done.error) == ([drained], None)
    finally:
        load.join(120)
    assert statuses == [200] * 40
    after_drain = _received(drained)  # (a request dispatched just before the drain may land after it)
    statuses.clear()
    _chat(h, 10, statuses)
    assert statuses == [200] * 10
    assert _received(drained) == after_drain  # nothing new reached the drained replica
    back = asyncio.run(router_drain.sync(tr.url, [kept, drained]))
    assert back.added == [drained] and back.error is None
