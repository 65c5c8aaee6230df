"""Rule edges of the issue 48 local run of spec/rules: an option gridready owns is named as owned before its value
is judged (a value starting with '-' on an owned key reads as owned, for each engine at its pinned release), the
engine's own word for a key of an engine without a vLLM label, and the SGLang pods' cache prefix compared on
whole path components whatever letter ends the adapter's or the cache's name."""

from __future__ import annotations

import pytest

from gridready.spec import engine_options
from gridready.spec.rules import ENGINE_ARG, VLLM_VERSION, _sglang_k8s_adapter, engine_args

SGLANG = engine_options.sglang_pin()


@pytest.mark.parametrize(("engine", "version", "key", "want"), [
    ("vllm", VLLM_VERSION, "tensor_parallel_size", "gridready sets this argument itself; use the tier's "
                                                   "tensor_parallel"),
    ("vllm", VLLM_VERSION, "tensor_parallel", "resolves to --tensor-parallel-size, which gridready owns (set the "
                                              "tier's tensor_parallel)"),
    ("sglang", SGLANG, "tp_size", "gridready sets this argument itself; use the tier's tensor_parallel"),
])
def test_an_owned_key_is_named_owned_before_its_value(engine, version, key, want):
    assert list(engine_args("serving.tiers[0]", {key: "-1"}, engine, version)) == [
        (f"serving.tiers[0].extra_engine_args.{key}", want)]


def test_a_value_starting_with_a_dash_on_an_operators_key():
    assert list(engine_args("serving.tiers[0]", {"seed": "-1"}, "vllm", VLLM_VERSION)) == [
        ("serving.tiers[0].extra_engine_args.seed", "value must not start with '-' (it would read as a flag)")]


def test_an_engine_without_a_label_is_named_by_its_own_name():
    assert list(engine_args("serving.tiers[0]", {"Bad Name": 1}, "triton-trtllm", "1.0")) == [
        ("serving.tiers[0].extra_engine_args.Bad Name",
         f"must be an triton-trtllm server argument name (^{ENGINE_ARG.pattern}$)")]


OUTSIDE = ("the SGLang pods mount only the node's Hugging Face cache ({cache}, serving.kubernetes.model_cache_path): a "
           "node-local adapter must lie beneath it")


@pytest.mark.parametrize(("path", "cache", "outside"), [
    ("/var/lib/hfX", "/var/lib/hf", True),           # a sibling whose name is the cache's and one more letter
    ("/var/lib/hf/X", "/var/lib/hf", False),
    ("/var/lib/hf/a", "/var/lib/hfX", True),         # the cache's last letter is part of its name
    ("/var/lib/hfX/a", "/var/lib/hfX/", False),
    ("/var/lib/hf/a/", "/var/lib/hf", False),
])
def test_the_cache_prefix_is_whole_components(path, cache, outside):
    found = [m for _, m in _sglang_k8s_adapter(path, "k", cache)]
    assert found == ([OUTSIDE.format(cache=cache)] if outside else [])
