"""The prefix-reuse shootout on live simulated engines: the same shared-system-prompt workload on a vLLM tier and
an SGLang tier; each hit rate is read from the engine's own metrics; the record states the prefix-reuse winner."""

from __future__ import annotations

import json

import pytest

from gridready.bench import DecisionSpec, Endpoint, Workload, decide, verify_tier, write_decision
from gridready.bench.prefix_reading import parse, reading
from gridready.spec import Slo, Tier
from tests.unit.bench.conftest import start_engine

# 100-token shared system prompt on 80 % of requests: a multiple of neither 16 nor the request part, so block
# granularity (vLLM, 16 tokens) loses the tail that SGLang's token-granular radix tree keeps.
WL = Workload(concurrency=[1, 4], num_prompts=12, duration_s=5, input_len=16, output_len=4, warmup=0,
              shared_prefix_len=100, shared_prefix_share=0.8)
SLO = Slo(ttft_ms_p99=2000, tpot_ms_p99=200)
TIMING = ("--ttft-ms", "10", "--itl-ms", "4", "--prefill-us-per-token", "200")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shootout")
    vllm = start_engine(tmp, "--model", "m", *TIMING)
    sgl = start_engine(tmp, "--mode", "sglang", "--model-path", "/m", "--served-model-name", "m",
                       "--enable-metrics", *TIMING)
    try:
        a = verify_tier(Endpoint(url=vllm.url, model="m", metrics_url=f"{vllm.url}/metrics"),
                        Tier(name="llama-vllm", engine="vllm", model={"local_path": "/m"}, served_name="m",
                             slo=SLO, tensor_parallel=1), WL, gpus=1)
        b = verify_tier(Endpoint(url=sgl.url, model="m", metrics_url=f"{sgl.url}/metrics"),
                        Tier(name="llama-sgl", engine="sglang", model={"local_path": "/m"}, served_name="m",
                             slo=SLO, tensor_parallel=1), WL, gpus=1)
    finally:
        for e in (vllm, sgl):
            e.stop()
    assert a.ok and b.ok, (a.gate.message, b.gate.message)
    return [a, b]


def test_workload_shares_one_system_prompt():
    prompts = WL.prompts()
    shared = " ".join(WL.shared_prefix())
    carriers = [p for p in prompts if p.text.startswith(shared)]
    assert 0 < len(carriers) < len(prompts)  # share 0.8 of 12, deterministic by seed
    assert all(p.input_tokens == 116 for p in carriers)
    assert Workload(input_len=16).prompts(3)[0].text.startswith("request 0:")  # default: no shared prompt


def test_each_engine_is_read_from_its_own_series(reports):
    vllm, sgl = (r.prefix_cache for r in reports)
    assert (vllm.hit_series, vllm.query_series) == ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
    assert (sgl.hit_series, sgl.query_series) == ("sglang:cached_tokens_total", "sglang:prompt_tokens_total")
    assert sgl.engine_series == "sglang:cache_hit_rate" and 0 < sgl.engine_reported < 1
    assert 0 < vllm.hit_rate < sgl.hit_rate < 1
    # the run's queried tokens are exactly the benchmark's prompts plus the smoke requests' (counted before)
    assert vllm.queried_tokens == sgl.queried_tokens


def test_record_compares_hit_rates_and_names_the_winner(reports, tmp_path):
    d = decide(reports, DecisionSpec())
    assert d.prefix_reuse is not None and d.prefix_reuse.winner == "llama-sgl"
    assert set(d.prefix_reuse.hit_rates) == {"llama-vllm", "llama-sgl"}
    paths = write_decision(tmp_path, d, reports)
    md = paths["md"].read_text()
    assert "## Prefix-reuse shootout" in md and "**Prefix-reuse winner: llama-sgl**" in md
    assert "prefix-cache hit rate (run)" in md and "SIMULATED" in md
    assert "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total" in md
    assert json.loads(paths["json"].read_text())["prefix_reuse"]["winner"] == "llama-sgl"


def test_reading_needs_both_scrapes_and_known_series():
    after = parse('vllm:prefix_cache_hits_total{engine="0",model_name="m"} 30\n'
                  'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 120\n# HELP x\n')
    before = parse('vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10\n'
                   'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 20\n')
    r = reading("vllm", before, after)
    assert (r.hit_tokens, r.queried_tokens, r.hit_rate) == (20, 100, 0.2)
    assert reading("triton-trtllm", before, after) is None
    assert reading("vllm", None, after) is None
    assert reading("sglang", before, after) is None  # no sglang: series in a vLLM scrape
