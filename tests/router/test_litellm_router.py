"""LiteLLM's proxy, configured as gridready_router configures it, against simulated engines: routing by model name,
weights within tolerance, streaming, per-key rate limits, its own keys, Prometheus metrics and failover."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from gridready.bench import router_overhead
from gridready.exitcodes import ExitCode
from gridready.serving import router
from gridready.spec import Slo
from gridready.spec.router import Route
from gridready.stages.serve import canary as canary
from tests.router.harness import Harness

from .conftest import CANARY_BASE, CANARY_MODEL, MODEL

pytestmark = [pytest.mark.slow, pytest.mark.extended]


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


def test_the_master_key_is_admitted_beside_the_client_keys(routed: Harness) -> None:
    """docs/serving.md: the serving API key (LiteLLM's master key) is admitted with client keys set. LiteLLM returns
    the custom_auth hook's verdict before any master-key check, so the hook itself must admit it (it refused it)."""
    status, body, _ = routed.request("/v1/models", key=routed.master_key)
    assert status == 200 and MODEL in {m["id"] for m in json.loads(body)["data"]}
    assert routed.request("/v1/models", key=routed.master_key + "x")[0] == 401


def served_by(headers: dict[str, str]) -> str:
    """The tier of the deployment that answered: LiteLLM's x-litellm-model-id header is its model_info.id
    (<model>@<tier>-<replica>, gridready.serving.router). Engines' own counters also see the router's background
    health checks, so they cannot attribute client requests."""
    ids = [v for k, v in headers.items() if k.lower() == "x-litellm-model-id"]
    assert ids, headers
    return ids[0].rsplit("@", 1)[1].rsplit("-", 1)[0]


def test_split_follows_the_weights(routed: Harness) -> None:
    n = 120
    got: dict[str, int] = {}
    for _ in range(n):
        status, _, headers = chat(routed, routed.keys["ci"])
        assert status == 200
        tier = served_by(headers)
        got[tier] = got.get(tier, 0) + 1
    assert set(got) <= {"batch", "hot"} and sum(got.values()) == n
    # weight 3:1 -> p(hot) = 0.25; 4 standard deviations of a binomial share over n requests
    tolerance = 4 * math.sqrt(0.25 * 0.75 / n)
    assert abs(got.get("hot", 0) / n - 0.25) <= tolerance, got


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


def test_canary_breaking_its_slo_is_rolled_back(routed: Harness, tmp_path: Path) -> None:
    applied: list[Route] = []
    record = canary.rollout(
        CANARY_BASE, "next", 30, Slo(ttft_ms_p99=300, tpot_ms_p99=60),
        router_url=routed.router_url, router_key=routed.keys["ci"],
        canary_metrics_url=f"http://127.0.0.1:{routed.engines['next'].port}/metrics",
        apply=applied.append, observe_s=5, requests=40, out_dir=tmp_path)
    # the router was started on the split this run applies first (on hosts the apply restarts the unit)
    assert applied[0] == router.with_canary(CANARY_BASE, "next", 30)
    assert record.request_errors == 0
    assert 3 <= record.gate.requests <= 25  # about 30 % of 40 went to the canary through the real router
    assert record.decision == "rollback" and record.exit_code == ExitCode.STAGE_FAILED
    assert record.gate.failed_slo == "ttft_ms_p99" and "ttft_ms_p99" in record.message
    assert applied[-1] == CANARY_BASE  # the route as it was: no canary
    assert [s.step for s in record.steps] == ["split", "observe", "rollback"]
    assert "rollback" in (tmp_path / "canary.md").read_text()
    assert json.loads((tmp_path / "canary.json").read_text())["gate"]["failed_slo"] == "ttft_ms_p99"
    assert record.model == CANARY_MODEL


def test_failover_to_the_other_tier_then_the_fallback(routed: Harness) -> None:
    routed.engines["hot"].proc.stop()
    answers = [chat(routed, routed.keys["ci"]) for _ in range(12)]
    assert [a[0] for a in answers] == [200] * 12
    assert {served_by(a[2]) for a in answers} == {"batch"}
    routed.engines["batch"].proc.stop()
    answers = [chat(routed, routed.keys["ci"]) for _ in range(4)]
    assert [a[0] for a in answers] == [200] * 4
    assert {served_by(a[2]) for a in answers} == {"spare"}
