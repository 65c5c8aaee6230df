"""vLLM's API key end to end: the simulated engine answers 401 where vLLM does; readiness, smoke and the
benchmark send the key."""

from __future__ import annotations

import os

from gridready.bench import Endpoint, Workload, verify_tier
from gridready.bench.http import Url
from gridready.spec import Slo, Tier
from tests.unit.bench.test_bench_engine import FAST, call

KEY = "k" * 43
WL = Workload(concurrency=[2], num_prompts=4, duration_s=5, input_len=8, output_len=4, warmup=0)
TIER = Tier(name="auth", engine="vllm", model={"local_path": "/m"}, served_name="m",
            slo=Slo(ttft_ms_p99=2000, tpot_ms_p99=500), tensor_parallel=1)


def _with_auth(url: str, path: str, token: str, body: dict | None = None) -> int:
    import json
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json",
                                                                 "Authorization": token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code


def test_engine_guards_v1_and_leaves_health_and_metrics_public(engine_factory):
    e = engine_factory("--model", "m", *FAST, env={**os.environ, "VLLM_API_KEY": KEY})
    status, _, body = call(e.url, "/v1/models")
    assert (status, body) == (401, b'{"error": "Unauthorized"}')
    assert call(e.url, "/v1/chat/completions", {"model": "m", "messages": []})[0] == 401
    assert call(e.url, "/health")[0] == 200
    assert call(e.url, "/metrics")[0] == 200
    assert _with_auth(e.url, "/v1/models", f"Bearer {KEY}x") == 401
    assert _with_auth(e.url, "/v1/models", f"Basic {KEY}") == 401
    assert _with_auth(e.url, "/v1/models", f"bearer {KEY}") == 200  # the scheme is case-insensitive in vLLM


def test_command_line_keys_take_precedence_over_the_environment(engine_factory):
    e = engine_factory("--model", "m", "--api-key", "cli-key", *FAST, env={**os.environ, "VLLM_API_KEY": KEY})
    assert _with_auth(e.url, "/v1/models", f"Bearer {KEY}") == 401
    assert _with_auth(e.url, "/v1/models", "Bearer cli-key") == 200


def test_readiness_smoke_and_benchmark_send_the_key(engine_factory):
    e = engine_factory("--model", "m", *FAST, env={**os.environ, "VLLM_API_KEY": KEY})
    report = verify_tier(Endpoint.for_tier(TIER, "127.0.0.1", api_key=KEY).model_copy(update={"url": e.url}),
                         TIER, WL, gpus=1, ready_timeout_s=10)
    assert report.ok, report.gate.message
    refused = verify_tier(Endpoint(url=e.url, model="m"), TIER, WL, gpus=1, ready_timeout_s=3)
    assert not refused.ok


def test_the_key_never_shows_in_a_dump_or_a_url():
    ep = Endpoint.for_tier(TIER, "10.0.0.1", api_key=KEY)
    assert KEY not in ep.model_dump_json() and KEY not in repr(ep) and KEY not in str(ep.base)
    assert KEY not in repr(ep.base)
    assert ep.base.token == KEY and Url.parse("http://h:1") == Url.parse("http://h:1", KEY)
