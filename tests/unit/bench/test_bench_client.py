"""The load client against a local server with KNOWN timing: TTFT, ITL and throughput within 5 %.

Ground truth is twofold: the profile the engine was started with (what it should do) and the engine's own
records of when it wrote each token (/gridready/requests: what it did). Timings are generous (40 ms ITL, 200 ms
TTFT) so scheduling noise on a loaded 2-core machine stays far below 5 %.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import urllib.request

import pytest

from gridready.bench import Api, Endpoint, Workload
from gridready.bench.client import run_level
from gridready.bench.http import Url
from gridready.bench.stats import percentile, summarize
from gridready.bench.workload import Level
from gridready.spec.serving import Slo
from tests.unit.bench.conftest import triton_repository

TTFT_MS, PREFILL_US, ITL_MS = 160.0, 200.0, 40.0
INPUT, OUTPUT, CONC, N = 200, 12, 4, 16
TRUTH_TTFT_MS = TTFT_MS + PREFILL_US * INPUT / 1000.0  # 200 ms
TRUTH_E2E_S = (TRUTH_TTFT_MS + (OUTPUT - 1) * ITL_MS) / 1000.0  # 0.64 s
PROFILE = ("--ttft-ms", str(TTFT_MS), "--prefill-us-per-token", str(PREFILL_US), "--itl-ms", str(ITL_MS),
           "--batch-slowdown", "0", "--jitter", "0")


def within(measured: float, truth: float, rel: float = 0.05) -> bool:
    return abs(measured - truth) <= rel * truth


def server_records(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/gridready/requests", timeout=10) as r:
        return [x for x in json.loads(r.read()) if not x["request_id"].startswith("warmup")]


@pytest.mark.parametrize("mode", ["openai", "triton"])
def test_ttft_itl_throughput_match_ground_truth(engine_factory, mode, tmp_path):
    args = (("--mode", "triton", "--model-repository", triton_repository(tmp_path, "m")) if mode == "triton"
            else ("--model", "m"))
    e = engine_factory(*args, *PROFILE)
    api = Api.TRITON_GENERATE if mode == "triton" else Api.OPENAI_CHAT
    wl = Workload(concurrency=[CONC], num_prompts=N, duration_s=30, input_len=INPUT, output_len=OUTPUT, warmup=1)
    run = asyncio.run(run_level(Url.parse(e.url), api, "m", Level(kind="concurrency", value=CONC), wl))
    s = summarize(run, Slo())
    assert s.completed == N and s.failed == 0 and s.simulated
    assert s.mean_output_tokens == OUTPUT
    if mode == "openai":
        assert s.mean_input_tokens == INPUT  # from usage

    # against the profile: a loaded machine only delays the engine (never speeds it up), so these hold one-sided;
    # the exact match is against what the server recorded doing, below
    assert s.ttft.p50 >= TRUTH_TTFT_MS * 0.95, s.ttft
    assert s.itl.mean >= ITL_MS * 0.95 and s.itl.p50 >= ITL_MS * 0.95, s.itl
    assert s.tpot.mean >= ITL_MS * 0.95, s.tpot
    assert s.e2e.p50 >= TRUTH_E2E_S * 1000 * 0.95, s.e2e
    assert s.request_throughput <= CONC / TRUTH_E2E_S * 1.05, s.request_throughput
    assert s.output_throughput <= CONC * OUTPUT / TRUTH_E2E_S * 1.05, s.output_throughput

    # against what the server recorded doing (token write times)
    rec = server_records(e.url)
    assert len(rec) == N
    srv_ttft_p50 = statistics.median(r["ttft_s"] for r in rec) * 1000
    srv_itl = sum(r["itl_mean_s"] for r in rec) / N * 1000
    span = max(r["finished"] for r in rec) - min(r["received"] for r in rec)
    assert within(s.ttft.p50, srv_ttft_p50), (s.ttft.p50, srv_ttft_p50)
    assert within(s.itl.mean, srv_itl), (s.itl.mean, srv_itl)
    assert within(s.request_throughput, N / span), (s.request_throughput, N / span)
    assert within(s.output_throughput, N * OUTPUT / span), (s.output_throughput, N * OUTPUT / span)


def test_poisson_rate_mode_and_dataset(engine_factory, tmp_path):
    e = engine_factory("--model", "m", "--ttft-ms", "5", "--itl-ms", "2", "--prefill-us-per-token", "0")
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "one two three", "output_len": 3}\n\n'
                    '{"messages": [{"role": "user", "content": "four five"}], "max_tokens": 5}\n')
    wl = Workload(request_rate=[50.0], num_prompts=20, duration_s=5, dataset=data, warmup=0, max_concurrency=8)
    run = asyncio.run(run_level(Url.parse(e.url), Api.OPENAI_COMPLETIONS, "m", wl.levels()[0], wl))
    s = summarize(run, Slo())
    assert s.completed == 20 and s.level.kind == "rate"
    assert sorted({r.output_tokens for r in run.results}) == [3, 5]
    assert sorted({r.prompt_tokens for r in run.results}) == [2, 3]
    assert s.send_lag.n == 20  # measured in rate mode
    sent = sorted(r.scheduled for r in run.results)
    assert sent == sorted(set(sent)) and sent[-1] < 5  # Poisson arrivals, within the duration


def test_errors_are_counted_not_raised(engine_factory):
    e = engine_factory("--model", "m", "--ttft-ms", "1", "--itl-ms", "1")
    wl = Workload(concurrency=[2], num_prompts=4, warmup=0, input_len=4, output_len=2)
    run = asyncio.run(run_level(Url.parse(e.url), Api.OPENAI_CHAT, "absent-model", wl.levels()[0], wl))
    s = summarize(run, Slo())
    assert s.completed == 0 and s.failed == 4 and "HTTP 404" in s.errors[0]


def test_percentile_matches_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert percentile(list(range(101)), 90) == 90


def test_endpoint_for_tier():
    from gridready.spec.serving import Tier

    t = Tier(name="trt", engine="triton-trtllm", model={"local_path": "/m"}, served_name="ensemble", port=9000)
    ep = Endpoint.for_tier(t, "10.77.0.12")  # defaults: Triton generate on 8000, metrics with the OpenAI frontend
    assert ep.api is Api.TRITON_GENERATE and ep.url == "http://10.77.0.12:8000"
    assert ep.metrics_url == "http://10.77.0.12:9000/metrics"
    plain = Tier.model_validate({**t.model_dump(), "triton": {"openai_frontend": False, "http_port": 8100}})
    ep = Endpoint.for_tier(plain, "h")
    assert ep.url == "http://h:8100" and ep.metrics_url == "http://h:8002/metrics"
    serve = Tier.model_validate({**t.model_dump(), "triton": {"frontend": "trtllm-serve"}})
    assert Endpoint.for_tier(serve, "h").api is Api.OPENAI_CHAT
    v = Tier(name="vl", engine="vllm", model={"local_path": "/m"}, served_name="m", port=8000)
    assert Endpoint.for_tier(v, "h").url == "http://h:8000"


def test_reused_connection_closed_by_the_server_is_retried_once():
    """uvicorn (vLLM) closes idle keep-alive connections after 5 s; the next request must not fail for that."""
    from gridready.bench.http import Connection, HttpError

    async def scenario() -> tuple[int, int, str]:
        async def one_shot(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            writer.close()  # keep-alive promised, then closed: a stale connection for the client

        srv = await asyncio.start_server(one_shot, "127.0.0.1", 0)
        url = Url.parse(f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}")
        conn = Connection(url)
        first = await conn.request("GET", "/a")
        await conn.read(first)
        await asyncio.sleep(0.05)
        second = await conn.request("GET", "/b")  # stale socket -> one retry on a fresh connection
        await conn.read(second)
        conn.close()
        srv.close()
        await srv.wait_closed()
        try:  # a fresh connection that fails is not retried
            await Connection(Url.parse("http://127.0.0.1:1")).request("GET", "/")
        except HttpError as err:
            return first.status, second.status, str(err)
        return first.status, second.status, ""

    a, b, err = asyncio.run(scenario())
    assert (a, b) == (200, 200) and "cannot connect" in err


def test_request_timeout_bounds_a_slow_server(engine_factory):
    e = engine_factory("--model", "m", "--ttft-ms", "5", "--itl-ms", "300")
    wl = Workload(concurrency=[2], num_prompts=2, warmup=0, input_len=4, output_len=20, request_timeout_s=0.4)
    run = asyncio.run(run_level(Url.parse(e.url), Api.OPENAI_CHAT, "m", wl.levels()[0], wl))
    s = summarize(run, Slo())
    assert s.completed == 0 and s.failed == 2 and "timed out after 0.4 s" in s.errors[0]
