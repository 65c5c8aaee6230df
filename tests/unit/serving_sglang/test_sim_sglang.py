"""The simulated SGLang: its routes and metric names, /metrics only with --enable-metrics, the multi-node start
(rank 0 waits for the other ranks at --dist-init-addr), and the prefix cache's per-engine granularity."""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from sandbox.engine import hub
from sandbox.engine.prefix_cache import PrefixCache
from tests.unit.bench.test_bench_engine import call

FAST = ("--ttft-ms", "5", "--itl-ms", "2", "--prefill-us-per-token", "0")
SYSTEM = " ".join(f"rule{i}" for i in range(40))  # a 40-token shared system prompt


def metrics(url: str) -> dict[str, float]:
    out = {}
    for line in call(url, "/metrics")[2].decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def ask(url: str, model: str, user: str) -> None:
    body = {"model": model, "max_tokens": 2,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]}
    status, _, raw = call(url, "/v1/chat/completions", body)
    assert status == 200, raw


def test_sglang_routes_and_metric_names(engine_factory, tmp_path):
    # a Hub model loads from the node's cache only: download it there first, as the serve playbook does
    hub.download("meta-llama/Llama-3.1-8B-Instruct", "main", tmp_path / "hf" / "hub", token="hf_test")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    e = engine_factory("--mode", "sglang", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
                       "--served-model-name", "llama", "--enable-metrics", "--tp-size", "8", *FAST, env=env)
    for path in ("/health", "/health_generate"):
        status, headers, _ = call(e.url, path)
        assert status == 200 and headers["x-gridready-simulated"] == "1"
    info = json.loads(call(e.url, "/get_model_info")[2])
    assert info["model_path"] == "meta-llama/Llama-3.1-8B-Instruct" and info["is_generation"] is True
    assert [m["id"] for m in json.loads(call(e.url, "/v1/models")[2])["data"]] == ["llama"]
    for i in range(3):
        ask(e.url, "llama", f"question number {i}")
    m = metrics(e.url)
    lb = '{model_name="llama"}'
    assert m[f"sglang:num_requests_total{lb}"] == 3
    assert m[f"sglang:prompt_tokens_total{lb}"] == 3 * 43
    # the 2nd and 3rd requests find the 40 system tokens plus "question number" in the radix cache
    assert m[f"sglang:cached_tokens_total{lb}"] == 2 * 42
    assert m[f"sglang:cache_hit_rate{lb}"] == pytest.approx(84 / 129)
    assert not any(k.startswith("vllm:") for k in m)
    assert call(e.url, "/v2/health/ready")[0] == 404  # not Triton's API


def test_metrics_route_exists_only_with_enable_metrics(engine_factory):
    e = engine_factory("--mode", "sglang", "--model-path", "m", *FAST)
    assert call(e.url, "/health")[0] == 200
    assert call(e.url, "/metrics")[0] == 404


def test_vllm_counts_prefix_hits_in_full_blocks(engine_factory):
    e = engine_factory("--model", "llama", *FAST)
    for i in range(3):
        ask(e.url, "llama", f"question number {i}")
    m = metrics(e.url)
    lb = '{engine="0",model_name="llama"}'
    assert m[f"vllm:prefix_cache_queries_total{lb}"] == 3 * 43
    assert m[f"vllm:prefix_cache_hits_total{lb}"] == 2 * 32  # 42 shared tokens = 2 full 16-token blocks
    off = engine_factory("--model", "llama", "--no-enable-prefix-caching", *FAST)
    for i in range(2):
        ask(off.url, "llama", f"question number {i}")
    assert metrics(off.url)[f"vllm:prefix_cache_hits_total{lb}"] == 0


def test_prefix_cache_granularity_and_last_token():
    tokens = [f"t{i}" for i in range(40)]
    radix, blocks = PrefixCache(1), PrefixCache(16)
    for cache in (radix, blocks):
        assert cache.lookup_and_insert(tokens) == 0
    assert radix.lookup_and_insert(tokens) == 39  # the last token is always recomputed
    assert blocks.lookup_and_insert(tokens) == 32
    assert radix.lookup_and_insert([*tokens[:20], "other"]) == 20
    assert blocks.lookup_and_insert([*tokens[:20], "other"]) == 16
    small = PrefixCache(1, capacity_tokens=50)
    small.lookup_and_insert(tokens)
    small.lookup_and_insert([f"u{i}" for i in range(40)])  # evicts the oldest entries
    assert small.lookup_and_insert(tokens) < 39


def test_prefix_cache_evicts_the_tail_of_a_prefix_before_its_head():
    """vLLM frees a request's blocks tail first: under pressure a shared head block outlives the blocks after it,
    so a later prompt with the same head still hits (evicting the head first leaves unreachable blocks)."""
    cache = PrefixCache(2, capacity_tokens=4)
    cache.lookup_and_insert(["sys", "prompt", "turn", "one"])  # blocks [sys prompt] and [sys prompt turn one]
    cache.lookup_and_insert(["other", "user"])  # one block over capacity: one block is evicted
    assert cache.lookup_and_insert(["sys", "prompt", "turn", "two"]) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank0_is_ready_only_when_every_rank_joined(engine_factory):
    init = f"127.0.0.1:{_free_port()}"
    multi = ("--mode", "sglang", "--model-path", "m", "--nnodes", "2", "--dist-init-addr", init, *FAST)
    rank0 = engine_factory(*multi, "--node-rank", "0")
    assert call(rank0.url, "/health")[0] == 503
    rank1 = engine_factory(*multi, "--node-rank", "1", wait=False)
    deadline = time.monotonic() + 15
    while call(rank0.url, "/health")[0] != 200:
        assert time.monotonic() < deadline, rank0.log()
        time.sleep(0.1)
    assert rank1.proc.poll() is None and "no HTTP server" in rank1.log()
    rank1.proc.terminate()
    rank1.proc.wait(10)
    deadline = time.monotonic() + 15
    while call(rank0.url, "/health")[0] != 503:  # a lost rank makes rank 0 unhealthy
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.mark.parametrize(("args", "msg"), [
    (("--nnodes", "2"), "--nnodes > 1 needs --dist-init-addr"),
    (("--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:1"), "--node-rank 2 must be in 0..1"),
])
def test_refuses_inconsistent_multi_node_flags(engine_factory, args, msg):
    e = engine_factory("--mode", "sglang", "--model-path", "m", *args, wait=False)
    assert e.proc.wait(20) == 2
    assert msg in e.log()


def _status(url: str, path: str, auth: str | None = None, method: str = "GET") -> int:
    headers = {"Authorization": auth} if auth else {}
    req = urllib.request.Request(url + path, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.parametrize("how", ["config", "flag"])
def test_the_api_key_guards_every_route_but_health_and_metrics(engine_factory, tmp_path, how):
    """SGLang's add_api_key_middleware (python/sglang/srt/utils.py): OPTIONS, /health* and /metrics* pass; every
    other request needs exactly `Bearer <key>`, else 401 {"error": "Unauthorized"}. The key comes from the
    `api-key` of the --config file, as gridready writes it, or from --api-key."""
    key = "k" * 40
    config = tmp_path / "sglang.yaml"
    config.write_text(f"# written by the role\napi-key: {json.dumps(key)}\n")
    source = ("--config", str(config)) if how == "config" else ("--api-key", key)
    e = engine_factory("--mode", "sglang", "--model-path", "m", "--served-model-name", "llama", "--enable-metrics",
                       *source, *FAST)
    for path in ("/health", "/health_generate", "/metrics"):
        assert _status(e.url, path) == 200, path
    for path in ("/v1/models", "/get_model_info"):
        assert _status(e.url, path) == 401, path
        assert _status(e.url, path, f"Bearer {key}x") == 401, path
        assert _status(e.url, path, f"bearer {key}") == 401, path  # an exact match, scheme included
        assert _status(e.url, path, f"Bearer {key}") == 200, path
    _, _, raw = call(e.url, "/v1/models")
    assert json.loads(raw) == {"error": "Unauthorized"}


def test_without_a_key_sglang_serves_anyone(engine_factory):
    e = engine_factory("--mode", "sglang", "--model-path", "m", "--served-model-name", "llama", *FAST)
    assert _status(e.url, "/v1/models") == 200


def test_a_config_file_that_is_not_flat_yaml_is_refused(tmp_path):
    from sandbox.engine.auth import sglang_config_key

    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list item\n")
    with pytest.raises(SystemExit, match=r"bad\.yaml:1"):
        sglang_config_key(str(bad))


def test_num_gpu_blocks_override_sizes_the_kv_pool_the_prefix_cache_evicts_from():
    """vLLM's --num-gpu-blocks-override (engine args) fixes the KV pool: blocks x block size tokens."""
    from sandbox.engine.cli import parser, prefix_cache

    cache = prefix_cache(parser().parse_known_args(["--num-gpu-blocks-override", "64", "--block-size", "16"])[0])
    assert (cache.capacity, cache.granularity) == (64 * 16, 16)
    assert prefix_cache(parser().parse_known_args([])[0]).capacity == PrefixCache(16).capacity
