"""HAProxy from the OS's package, configured by gridready.serving.router_haproxy as the role configures it, against
simulated engines: keys, routing by the body's model, weights, streaming, request limits, metrics, a canary by
hitless reload, and failover to the fallback tier. Skipped only where the `haproxy` binary is absent (CI installs
it: .ci/run)."""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridready.exitcodes import ExitCode
from gridready.serving import router
from gridready.spec import Slo
from gridready.spec.router import HAProxySettings, Route, RouterKey, RouterSpec, RouteTarget
from gridready.stages.serve import canary as canary
from tests.router.harness import HAPROXY, HAProxyRouter, Harness, start_haproxy

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAPROXY, reason="no haproxy binary on PATH (apt-get install haproxy)")]

MODEL = "llama-sim"
CANARY_MODEL = "llama-sim-next"
CANARY_BASE = Route(model=CANARY_MODEL, targets=[RouteTarget(tier="edge")])
TIER_KEY = "sk-tier-only"


@pytest.fixture(scope="module")
def hap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, HAProxyRouter]]:
    """Tiers `batch` (weight 3, with an API key) and `hot` (weight 1) behind MODEL, `spare` its fallback; keys
    `ci` (no limit) and `tight` (2 requests per minute). CANARY_MODEL is served by `edge` alone; its canary `next`
    answers its first token after 900 ms (over a 300 ms SLO). HAProxy passes the body on unchanged: a route's
    model is the served name of its tiers."""
    h = Harness.create(tmp_path_factory.mktemp("haproxy"))
    try:
        h.start_engine("batch", MODEL, "--ttft-ms", "5", "--itl-ms", "1", "--seed", "7", "--api-key", TIER_KEY)
        for tier in ("hot", "spare"):
            h.start_engine(tier, MODEL, "--ttft-ms", "5", "--itl-ms", "1", "--seed", "7")
        h.start_engine("edge", CANARY_MODEL, "--ttft-ms", "5", "--itl-ms", "25", "--seed", "7")
        h.start_engine("next", CANARY_MODEL, "--ttft-ms", "900", "--itl-ms", "1", "--seed", "7")
        ups = {t: [router.Upstream(t, e.base_url, e.served_name,
                                   router.tier_key_env(t) if t == "batch" else None)] for t, e in h.engines.items()}
        spec = RouterSpec(enabled=True, proxy="haproxy", keys=[RouterKey(name="ci", vault_var="k")], num_retries=2,
                          health_check_interval_s=1, haproxy=HAProxySettings(max_body_kib=64))
        route = Route(model=MODEL, targets=[RouteTarget(tier="batch", weight=3), RouteTarget(tier="hot", weight=1)],
                      fallback=["spare"])
        hp = start_haproxy(h, spec, [route, CANARY_BASE], {"ci": None, "tight": 2}, upstreams=ups,
                           env={router.tier_key_env("batch"): TIER_KEY})
        yield h, hp
    finally:
        h.close()


def chat(h: Harness, key: str | None, model: str = MODEL, **extra: object) -> tuple[int, bytes, dict[str, str]]:
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, **extra}
    return h.request("/v1/chat/completions", body, key=key)


def served_by(headers: dict[str, str]) -> str:
    """The tier of the server that answered (X-Gridready-Server: <tier>-<replica>, fallbacks `fallback-<tier>-<i>`)."""
    value = {k.lower(): v for k, v in headers.items()}["x-gridready-server"]
    return value.removeprefix("fallback-").rsplit("-", 1)[0]


def error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


def test_keys_are_checked_and_the_models_listed(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    status, body, _ = h.request("/v1/models", key=h.keys["ci"])
    assert status == 200
    assert [m["id"] for m in json.loads(body)["data"]] == [MODEL, CANARY_MODEL]
    for key in (None, "sk-not-a-key", TIER_KEY):  # the tier's key is no client key
        status, body, _ = h.request("/v1/models", key=key)
        assert status == 401 and error_code(body) == "invalid_api_key"
    status, body, _ = h.request("/v1/chat/completions", {"model": MODEL}, key=None)
    assert status == 401


def test_no_other_path_of_an_engine_is_reachable(hap: tuple[Harness, HAProxyRouter]) -> None:
    """vLLM answers /invocations without its key: through the router it is a 404 even with a client key, and
    the body's model does not route it."""
    h, _ = hap
    for path in ("/invocations", "/vllm/invocations", "/v1/chat/completions/../../invocations", "/tokenize"):
        for key in (h.keys["ci"], None):
            status, body, _ = h.request(path, {"model": MODEL, "prompt": "hi", "max_tokens": 1}, key=key)
            assert status in (400, 404) and b"choices" not in body, (path, key, status, body)
    status, body, _ = h.request("/invocations", {"model": MODEL, "prompt": "hi", "max_tokens": 1},
                                key=h.keys["ci"])
    assert status == 404 and error_code(body) == "not_found"


def test_the_tier_gets_its_own_key_never_the_clients(hap: tuple[Harness, HAProxyRouter]) -> None:
    """`batch` refuses any key but TIER_KEY: every answer it gives through the router was sent with TIER_KEY."""
    h, _ = hap
    tiers = set()
    for _ in range(12):
        status, body, headers = chat(h, h.keys["ci"])
        assert status == 200, body
        tiers.add(served_by(headers))
    assert "batch" in tiers


def test_routing_follows_the_bodys_model(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    for _ in range(6):
        status, _, headers = chat(h, h.keys["ci"], model=CANARY_MODEL)
        assert status == 200 and served_by(headers) == "edge"
    status, body, _ = chat(h, h.keys["ci"], model="llama-unknown")
    assert status == 404 and error_code(body) == "model_not_found"
    status, body, _ = h.request("/v1/chat/completions", {"messages": []}, key=h.keys["ci"])
    assert status == 404 and error_code(body) == "model_not_found"


def test_a_body_over_the_buffer_is_refused_never_misrouted(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    big = "x" * (64 * 1024)
    status, body, _ = chat(h, h.keys["ci"], messages=[{"role": "user", "content": big}])
    assert status == 413 and error_code(body) == "request_too_large"
    status, _, _ = chat(h, h.keys["ci"], messages=[{"role": "user", "content": big[: 60 * 1024]}])
    assert status == 200  # just under the limit: read whole, routed by its model


def test_split_follows_the_weights(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    n = 120
    got: dict[str, int] = {}
    for _ in range(n):
        status, _, headers = chat(h, h.keys["ci"])
        assert status == 200
        got[served_by(headers)] = got.get(served_by(headers), 0) + 1
    assert set(got) <= {"batch", "hot"} and sum(got.values()) == n
    tolerance = 4 * math.sqrt(0.25 * 0.75 / n)  # 4 standard deviations of a binomial share at p = 0.25
    assert abs(got.get("hot", 0) / n - 0.25) <= tolerance, got


def test_streaming_is_passed_through_as_it_comes(hap: tuple[Harness, HAProxyRouter]) -> None:
    """The first event reaches the client long before the last one is made (`edge`: 40 tokens, 25 ms apart)."""
    h, hp = hap
    conn = http.client.HTTPConnection("127.0.0.1", hp.port, timeout=30)
    body = {"model": CANARY_MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40,
            "stream": True, "ignore_eos": True}
    started = time.monotonic()
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Authorization": f"Bearer {h.keys['ci']}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    first = resp.read1(65536)  # the first chunk HAProxy passed on
    first_s = time.monotonic() - started
    rest = resp.read().decode()
    total_s = time.monotonic() - started
    events = [ln for ln in (first.decode() + rest).splitlines() if ln.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) >= 10
    assert first_s < total_s / 2, (first_s, total_s)


def test_per_key_request_limit(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    answers = [chat(h, h.keys["tight"]) for _ in range(4)]
    assert [a[0] for a in answers] == [200, 200, 429, 429]
    assert error_code(answers[2][1]) == "rate_limit_exceeded"
    assert chat(h, h.keys["ci"])[0] == 200  # the limit is the key's, not the router's


def test_metrics_need_a_key(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    assert h.request("/metrics")[0] == 401
    status, body, _ = h.request("/metrics", key=h.keys["ci"])
    assert status == 200 and "haproxy_backend_http_responses_total" in body.decode()


def test_canary_by_reload_drops_no_request(hap: tuple[Harness, HAProxyRouter], tmp_path: Path) -> None:
    """`invoke serve --canary` on HAProxy: each weight change re-renders the configuration and reloads the
    master (USR2) while requests flow; none fails, and the SLO gate rolls the slow canary back."""
    h, hp = hap
    routes = list(hp.routes)
    failures: list[int] = []
    sent = [0]
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            status = chat(h, h.keys["ci"])[0]
            sent[0] += 1
            if status != 200:
                failures.append(status)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    applied: list[Route] = []

    def apply(route: Route) -> None:
        applied.append(route)
        hp.reload(router.replace_route(routes, route))

    try:
        record = canary.rollout(
            CANARY_BASE, "next", 30, Slo(ttft_ms_p99=300, tpot_ms_p99=60), router_url=hp.url,
            router_key=h.keys["ci"], canary_metrics_url=f"http://127.0.0.1:{h.engines['next'].port}/metrics",
            apply=apply, observe_s=5, requests=40, out_dir=tmp_path)
        for _ in range(3):  # more reloads under load
            hp.reload(routes)
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failures == [] and sent[0] > 50, (failures, sent[0])
    assert record.request_errors == 0
    assert 3 <= record.gate.requests <= 25  # about 30 % of 40 reached the canary after the reload
    assert record.decision == "rollback" and record.exit_code == ExitCode.STAGE_FAILED
    assert applied[0] == router.with_canary(CANARY_BASE, "next", 30) and applied[-1] == CANARY_BASE


def test_failover_to_the_other_tier_then_the_fallback(hap: tuple[Harness, HAProxyRouter]) -> None:
    h, _ = hap
    h.engines["hot"].proc.stop()
    answers = [chat(h, h.keys["ci"]) for _ in range(12)]
    assert [a[0] for a in answers] == [200] * 12
    assert {served_by(a[2]) for a in answers} == {"batch"}
    h.engines["batch"].proc.stop()
    time.sleep(2.5)  # health checks every second, down after 2 failures: the fallback takes over
    answers = [chat(h, h.keys["ci"]) for _ in range(4)]
    assert [a[0] for a in answers] == [200] * 4
    assert {served_by(a[2]) for a in answers} == {"spare"}
