"""The options gridready owns on an engine's command line are those its renderers write (issue 41, class 3):
spec.engine_options.RENDERED is held here to exactly the flags serving/vllm.py and serving/sglang.py render across
every branch, so a flag added to a renderer is owned (and refused in extra_engine_args) from the same commit."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.serving import sglang, topology, vllm
from gridready.spec import engine_options
from gridready.spec.serving import VLLM_VERSION
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

LORA = [{"name": "sql", "path": "/adapters/sql"}]
EVERY_BRANCH = {"lora_adapters": LORA, "quantization": "fp8", "max_num_batched_tokens": 8192,
                "trust_remote_code": True, "enable_prefix_caching": False, "enable_chunked_prefill": False}


def _plans(make_inv: Any, nodes: int, tier: dict[str, Any]) -> list[Any]:
    inv = make_inv(nodes, [tier])
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    return topology.plan_tiers(inv, cert)


def _flags(args: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def _vllm_flags(make_inv: Any) -> set[str]:
    out: set[str] = set()
    for nodes, over in ((1, {}), (2, {"pipeline_parallel": 2, **EVERY_BRANCH}), (1, {"enable_chunked_prefill": True})):
        (plan,) = _plans(make_inv, nodes, vllm_tier(**over))
        out |= _flags(vllm.serve_args(plan))
        out |= {engine_options.flag_of(k) for k in vllm.engine_kwargs(plan)}
    return out


def _sglang_flags(make_inv: Any) -> set[str]:
    out: set[str] = set()
    for nodes, over in ((1, {}), (2, {"pipeline_parallel": 2, **EVERY_BRANCH})):
        (plan,) = _plans(make_inv, nodes, vllm_tier(name="sgl", engine="sglang", **over))
        init = "10.0.0.1:5757" if plan.nodes_per_replica > 1 else None
        out |= _flags(sglang.launch_args(plan, 0, init)) | _flags(sglang.pod_args(plan))
    return out


def test_the_owned_vllm_flags_are_those_gridready_renders(make_inv):
    assert _vllm_flags(make_inv) == set(engine_options.RENDERED["vllm"])


def test_the_owned_sglang_flags_are_those_gridready_renders(make_inv):
    assert _sglang_flags(make_inv) == set(engine_options.RENDERED["sglang"])


@pytest.mark.parametrize(("engine", "version"), [("vllm", VLLM_VERSION), ("sglang", engine_options.sglang_pin())])
def test_every_owned_flag_is_an_option_of_the_pinned_release(engine, version):
    tbl = engine_options.table(engine, version)
    assert tbl is not None
    for flag in [*engine_options.RENDERED[engine], *engine_options.CHANNELS[engine]]:
        assert flag in tbl.by_flag, f"{engine} {version} has no {flag}"
    assert len(engine_options.owned(tbl)) == len({tbl.by_flag[f] for f in [*engine_options.RENDERED[engine],
                                                                            *engine_options.CHANNELS[engine]]})


def test_an_abbreviation_reaches_ray_serve_llm_in_full(make_inv):
    """EngineArgs takes keyword arguments by their full names: the parser's reading of a prefix is written out."""
    (plan,) = _plans(make_inv, 1, vllm_tier(extra_engine_args={"enforce_eag": True, "seed": 7}))
    kwargs = vllm.engine_kwargs(plan)
    assert kwargs["enforce_eager"] is True and kwargs["seed"] == 7 and "enforce_eag" not in kwargs
    assert "--enforce-eager" in vllm.serve_args(plan)


def test_an_abbreviation_reaches_sglang_in_full(make_inv):
    (plan,) = _plans(make_inv, 1, vllm_tier(name="sgl", engine="sglang", extra_engine_args={"stream_inter": 4}))
    args = sglang.launch_args(plan)
    assert args[-2:] == ["--stream-interval", "4"]
