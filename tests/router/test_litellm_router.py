"""LiteLLM's proxy, configured as gridready_router configures it, against simulated engines: routing by model name,
weights within tolerance, streaming, per-key rate limits, its own keys, Prometheus metrics and failover."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from gridready.bench import router_overhead
from gridready.sandbox.router_harness import Harness

from .conftest import MODEL

pytestmark = pytest.mark.slow


def chat(h: Harness, key: str, **extra: object) -> tuple[int, bytes, dict[str, str]]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, **extra}
    return h.request("/v1/chat/completions", body, key=key)


def test_models_lists_the_route_and_needs_a_key(routed: Harness) -> None:
    status, body, _ = routed.request("/v1/models", key=routed.keys["ci"])
    assert status == 200
    assert MODEL in {m["id"] for m in json.loads(body)["data"]}
    assert routed.request("/v1/models", key="sk-not-a-key")[0] == 401
    # no key at all is refused, but as a 500: the DB-less proxy's auth error path imports the optional `prisma`
    # (BerriAI/litellm#38978, open; fix proposed in #39244)
    status, body, _ = routed.request("/v1/models")
    assert status in (401, 500) and MODEL.encode() not in body


def test_split_follows_the_weights(routed: Harness) -> None:
    before = {t: routed.engines[t].served_requests() for t in ("batch", "hot")}
    n = 120
    for _ in range(n):
        assert chat(routed, routed.keys["ci"])[0] == 200
    got = {t: routed.engines[t].served_requests() - before[t] for t in before}
    assert sum(got.values()) == n
    # weight 3:1 -> p(hot) = 0.25; 4 standard deviations of a binomial share over n requests
    tolerance = 4 * math.sqrt(0.25 * 0.75 / n)
    assert abs(got["hot"] / n - 0.25) <= tolerance, got


def test_streaming_is_passed_through(routed: Harness) -> None:
    status, body, headers = chat(routed, routed.keys["ci"], stream=True, max_tokens=8)
    assert status == 200
    assert headers.get("content-type", headers.get("Content-Type", "")).startswith("text/event-stream")
    events = [line for line in body.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert len(events) >= 3  # several content chunks, not one buffered answer


def test_per_key_rate_limit(routed: Harness) -> None:
    codes = [chat(routed, routed.keys["tight"])[0] for _ in range(4)]
    assert codes[:2] == [200, 200]
    assert 429 in codes[2:], codes


def test_metrics_need_a_key_and_count_requests(routed: Harness) -> None:
    assert routed.request("/metrics/")[0] == 401
    status, body, _ = routed.request("/metrics/", key=routed.keys["ci"])
    assert status == 200
    assert "litellm_" in body.decode()


def test_router_overhead_is_measured_beside_direct_access(routed: Harness) -> None:
    report = asyncio.run(router_overhead.measure(routed.engines["batch"].base_url.removesuffix("/v1"),
                                                 routed.router_url, MODEL, routed.keys["ci"], n=40))
    assert report.direct.errors == 0 and report.routed.errors == 0
    assert report.routed.p50_ms > report.direct.p50_ms > 0  # the proxy hop costs something, and it is measured
    assert report.added_p99_ms == round(report.routed.p99_ms - report.direct.p99_ms, 2)
    print(f"router overhead over {report.requests} pairs: {report.model_dump_json()}")


def test_failover_to_the_other_tier_then_the_fallback(routed: Harness) -> None:
    routed.engines["hot"].proc.stop()
    before = routed.engines["batch"].served_requests()
    codes = [chat(routed, routed.keys["ci"])[0] for _ in range(12)]
    assert codes == [200] * 12
    assert routed.engines["batch"].served_requests() - before == 12
    routed.engines["batch"].proc.stop()
    spare_before = routed.engines["spare"].served_requests()
    codes = [chat(routed, routed.keys["ci"])[0] for _ in range(4)]
    assert codes == [200] * 4
    assert routed.engines["spare"].served_requests() - spare_before == 4
