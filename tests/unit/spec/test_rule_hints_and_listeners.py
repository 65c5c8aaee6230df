"""Rule edges of the issue 48 local run of spec/rules: the hint for a key that is no option name reads the part
before its first '=' after the leading dashes only, a mirror path is refused for whole '.'/'..' components only,
a Triton tier without extra options passes every rule, and tier_ports takes any tier-like object (getattr
defaults: a tier without Triton or embedding settings, Triton settings without a frontend or a port)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier
from tests.unit.spec.test_rule_messages_tiers import triton

NAME = f"must be a vLLM engine argument name (^{rules.ENGINE_ARG.pattern}$)"
OWNED = "; as an option it is --tensor-parallel-size, which gridready owns"


@pytest.mark.parametrize(("key", "hint"), [
    ("tensor_parallel_size=2", OWNED),
    ("tensor_parallel_size=2=4", OWNED),          # the part before the first '='
    ("--tensor_parallel_size", OWNED),
    ("X-tensor_parallel_size", ""),               # only dashes are stripped before the name
    ("Xtensor_parallel_size", ""),
    ("--Seed=1", ""),
])
def test_the_hint_reads_the_name_before_the_first_equals(key, hint):
    assert list(rules.engine_args("serving.tiers[0]", {key: 1})) == [
        (f"serving.tiers[0].extra_engine_args.{key}", NAME + hint)]


@pytest.mark.parametrize(("url", "bad"), [
    ("https://mirror.example/nvidia/..X", False), ("https://mirror.example/nvidia/.X/", False),
    ("https://mirror.example/nvidia/..", True), ("https://mirror.example/nvidia/./", True),
])
def test_a_mirror_path_is_refused_for_whole_dot_components_only(url, bad):
    found = list(rules.mirror_trust(spec(software={"package_mirror": url})))
    assert found == ([("software.package_mirror", "must not contain a '.' or '..' path component")] if bad else [])


def test_a_triton_tier_without_extra_options_breaks_no_rule():
    s = spec(serving__tiers=[tier(port=8000), triton()])
    assert rules.check(s, {"gpu_nodes": 2}) == []
    assert [k for k, _ in rules.field_patterns(s)] == []


@pytest.mark.parametrize(("obj", "ports"), [
    (SimpleNamespace(engine="vllm", port=8000), [("port", 8000)]),
    (SimpleNamespace(engine="vllm", port=8000, embedding=SimpleNamespace(grpc_port=8001, metrics_port=8002)),
     [("port", 8000)]),                                       # embedding listeners only on triton-embedding
    (SimpleNamespace(engine="triton-trtllm", port=8100, triton=SimpleNamespace(http_port=8000, grpc_port=8001)),
     [("port", 8100), ("triton.http_port", 8000), ("triton.grpc_port", 8001)]),
    (SimpleNamespace(engine="triton-trtllm", port=8100,
                     triton=SimpleNamespace(frontend="trtllm-serve", http_port=8000)), [("port", 8100)]),
    (SimpleNamespace(engine="triton-embedding", port=9000), [("port", 9000)]),
])
def test_tier_ports_of_tier_like_objects(obj, ports):
    assert rules.tier_ports(obj) == ports
