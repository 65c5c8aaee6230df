"""What an SGLang pod on Kubernetes can load as a LoRA adapter: a Hugging Face repo id, or a directory beneath the
node's Hugging Face cache (the only folder its pods mount); never object storage (SGLang 0.5.19 has no loader). And
the engine's own word for an extra_engine_args key that is no option name."""

from __future__ import annotations

import pytest

from gridready.spec import rules
from gridready.spec.rules import VLLM_VERSION, _sglang_k8s_adapter, engine_args
from tests.unit.spec.test_rule_messages import spec, tier

CACHE = "/var/lib/hf"
WHERE = "serving.tiers[0].lora_adapters[0].path"
OBJECT = ("SGLang loads no adapter from object storage (a path that is no local directory is taken for a Hugging Face "
          "repo id): use a Hugging Face repo id, or sync the adapter into serving.kubernetes.model_cache_path "
          "(/var/lib/hf) on every node and name that directory")
OUTSIDE = ("the SGLang pods mount only the node's Hugging Face cache (/var/lib/hf, "
           "serving.kubernetes.model_cache_path): a node-local adapter must lie beneath it")
NEITHER = "must be a Hugging Face repo id or an absolute path beneath serving.kubernetes.model_cache_path"


@pytest.mark.parametrize(("path", "cache", "found"), [
    ("acme/sql-lora", CACHE, []),
    ("/var/lib/hf/adapters/sql", CACHE, []),
    ("/var/lib/hf/adapters/sql", CACHE + "/", []),        # the cache's trailing slash is no part of its name
    ("/var/lib/hf", CACHE, []),                           # the cache itself
    ("/var/lib/hf2/sql", CACHE, [OUTSIDE]),               # a sibling whose name starts like the cache
    ("/opt/adapters/sql", CACHE, [OUTSIDE]),
    ("s3://bucket/adapters/sql", CACHE, [OBJECT]),
    ("gs://bucket/sql/", CACHE, [OBJECT]),
    ("sql-lora", CACHE, [NEITHER]),
    ("/var/lib/hf/../etc", CACHE, ["must not contain a '.' or '..' path component"]),
])
def test_sglang_k8s_adapter(path, cache, found):
    assert [m for _, m in _sglang_k8s_adapter(path, WHERE, cache)] == found
    assert all(k == WHERE for k, _ in _sglang_k8s_adapter(path, WHERE, cache))


@pytest.mark.parametrize(("engine", "label"), [("sglang", "an SGLang server argument name"),
                                               ("vllm", "a vLLM engine argument name")])
def test_an_option_name_that_is_none_names_the_engines_own_word(engine, label):
    version = "0.5.19" if engine == "sglang" else VLLM_VERSION
    assert list(engine_args("serving.tiers[0]", {"Bad Name": 1}, engine, version)) == [
        ("serving.tiers[0].extra_engine_args.Bad Name", f"must be {label} (^[a-z][a-z0-9_-]{{0,63}}$)")]


def test_field_patterns_check_an_sglang_tiers_adapters_on_kubernetes_only():
    """Through the spec: on Kubernetes an SGLang tier's adapters go through the SGLang rule (every adapter, the
    node's cache as the spec sets it); on hosts, and for vLLM on Kubernetes, an s3:// adapter is judged as before."""
    def paths(target: str, engine: str) -> list[tuple[str, str]]:
        t = tier(engine=engine, lora_adapters=[{"name": "aa", "path": "s3://b/a"}, {"name": "bb", "path": "/opt/b"}])
        extra = {"serving__kubeconfig": "k.yml", "serving__kubernetes": {"model_cache_path": CACHE}} \
            if target == "kubernetes" else {}
        s = spec(serving__target=target, serving__tiers=[t], **extra)
        return [(k, m) for k, m in rules.field_patterns(s) if ".lora_adapters[" in k]

    assert paths("kubernetes", "sglang") == [("serving.tiers[0].lora_adapters[0].path", OBJECT),
                                             ("serving.tiers[0].lora_adapters[1].path", OUTSIDE)]
    assert paths("kubernetes", "vllm") == []
    assert paths("hosts", "sglang") == [("serving.tiers[0].lora_adapters[0].path",
                                         "must be an absolute path or a Hugging Face repo id")]
