"""Every command line gridready renders is one the pinned engines' own parsers accept (issue #29, witnesses).

gridready/data/engine_cli/<engine>-<version>.json holds the option strings of the released parsers, read from the
pinned wheels' source with ast by tools/engine_cli_flags.py (regenerate it there when a pin moves). Each `--flag`
of `vllm serve` (hosts), of Ray Serve LLM's engine_kwargs (Kubernetes: the same EngineArgs names) and of
`sglang.launch_server` (hosts and pods) must be in the table of its pin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gridready.serving import sglang, topology, vllm
from gridready.serving.sglang_versions import pin
from gridready.spec.serving import VLLM_VERSION
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

DATA = Path(__file__).resolve().parents[3] / "gridready" / "data" / "engine_cli"

VLLM_TIERS = [
    {},
    {"enable_prefix_caching": False, "enable_chunked_prefill": False, "quantization": "fp8",
     "max_num_batched_tokens": 8192},
    {"lora_adapters": [{"name": "sql", "path": "/adapters/sql"}], "max_loras": 2},
    {"kv_cache_dtype": "fp8", "extra_engine_args": {"enforce_eager": True, "seed": 7}},
]


def _table(engine: str, version: str) -> set[str]:
    data = json.loads((DATA / f"{engine}-{version}.json").read_text())
    assert data["engine"] == engine and data["version"] == version
    return set(data["flags"])


def _flags(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def _plans(make_inv: Any, tier: dict[str, Any], target: str = "hosts") -> list[Any]:
    inv = make_inv(4, [tier], target=target)
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    return topology.plan_tiers(inv, cert)


def test_the_tables_are_of_the_pins() -> None:
    assert "--tensor-parallel-size" in _table("vllm", VLLM_VERSION)
    assert "--tp-size" in _table("sglang", pin().version)


@pytest.mark.parametrize("over", VLLM_TIERS)
def test_every_vllm_flag_is_one_the_pinned_parser_accepts(make_inv, over: dict[str, Any]) -> None:
    table = _table("vllm", VLLM_VERSION)
    (plan,) = _plans(make_inv, vllm_tier(**over))
    unknown = [f for f in _flags(vllm.serve_args(plan)) if f not in table]
    assert unknown == [], f"vLLM {VLLM_VERSION} has no {unknown}"
    # Ray Serve LLM hands engine_kwargs to the same EngineArgs: every key must be one of its options
    unknown = [k for k in vllm.engine_kwargs(plan) if "--" + k.replace("_", "-") not in table]
    assert unknown == [], f"vLLM {VLLM_VERSION} EngineArgs has no {unknown}"


@pytest.mark.parametrize("over", [
    {},
    {"tensor_parallel": 8, "pipeline_parallel": 2, "enable_prefix_caching": False, "quantization": "fp8"},
    {"lora_adapters": [{"name": "sql", "path": "/adapters/sql"}], "enable_chunked_prefill": False},
])
def test_every_sglang_flag_is_one_the_pinned_parser_accepts(make_inv, over: dict[str, Any]) -> None:
    table = _table("sglang", pin().version)
    (plan,) = _plans(make_inv, vllm_tier(**{"name": "sgl", "engine": "sglang", **over}))
    init = "10.0.0.1:5757" if plan.nodes_per_replica > 1 else None
    for args in (sglang.launch_args(plan, 0, init), sglang.pod_args(plan)):
        unknown = [f for f in _flags(args) if f not in table]
        assert unknown == [], f"SGLang {pin().version} has no {unknown}"


def test_a_flag_the_parser_lacks_is_caught() -> None:
    assert "--no-such-flag" not in _table("vllm", VLLM_VERSION)
    assert "--lora-modules" in _table("vllm", VLLM_VERSION)  # a frontend dataclass field
    assert "--no-enable-prefix-caching" in _table("vllm", VLLM_VERSION)  # a BooleanOptionalAction negation
