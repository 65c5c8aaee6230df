"""Every command line gridready renders is one the pinned engines' own parsers accept (issue #29, witnesses).

gridready/data/engine_cli/<engine>-<version>.json holds the released parsers, dumped by tools/engine_cli_flags.py
--env from the pinned release installed in a throwaway environment (regenerate it there when a pin moves): every
option string, whether a value follows, its type and choices, and the values vLLM's config model refuses at start.
Each command line of `vllm serve` (hosts), of Ray Serve LLM's engine_kwargs (Kubernetes: the same EngineArgs) and
of `sglang.launch_server` (hosts and pods) is parsed by argparse with those options, values included; every value
the spec allows for dtype, quantization and kv_cache_dtype is one the pinned engine takes.
"""

from __future__ import annotations

import functools
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from gridready.serving import sglang, topology, vllm
from gridready.serving.sglang.versions import pin
from gridready.spec import sglang as sglang_spec
from gridready.spec.serving import VLLM_VERSION, Tier
from sandbox.engine.entry import option_parser
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


def _data(engine: str, version: str) -> dict[str, Any]:
    return json.loads((DATA / f"{engine}-{version}.json").read_text())


def _parses(engine: str, version: str, argv: list[str], positionals: tuple[str, ...] = ()) -> str:
    """'' where the pinned parser (and vLLM's config checks) take argv, else argparse's or the config's message."""
    data = _data(engine, version)
    parser = option_parser(engine, data["options"], positionals)
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # raise instead of exit
    try:
        ns = parser.parse_args(argv)
    except ValueError as e:
        return str(e)
    for flag, check in (data.get("config_checks") or {}).items():
        value = getattr(ns, flag.lstrip("-").replace("-", "_"), None)
        if value is not None and value not in check["values"]:
            return check["message"].format(value=value, values=check["values"])
    return ""


def _as_argv(kwargs: dict[str, Any]) -> list[str]:
    """engine_kwargs as EngineArgs would take them from a command line (bools as their flag or its negation)."""
    out: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        out += ([flag] if value else ["--no-" + flag[2:]]) if isinstance(value, bool) else [
            flag, json.dumps(value) if isinstance(value, dict | list) else str(value)]
    return out


@pytest.mark.parametrize("over", VLLM_TIERS)
def test_every_vllm_command_line_parses_values_included(make_inv, over: dict[str, Any]) -> None:
    (plan,) = _plans(make_inv, vllm_tier(**over))
    args = vllm.serve_args(plan)
    assert args[0] == "serve"
    assert _parses("vllm", VLLM_VERSION, args[1:], ("model_tag",)) == ""
    assert _parses("vllm", VLLM_VERSION, _as_argv(vllm.engine_kwargs(plan))) == ""


@pytest.mark.parametrize("over", [
    {},
    {"tensor_parallel": 8, "pipeline_parallel": 2, "enable_prefix_caching": False, "quantization": "fp8",
     "kv_cache_dtype": "fp8_e5m2"},
    {"lora_adapters": [{"name": "sql", "path": "/adapters/sql"}], "enable_chunked_prefill": False},
])
def test_every_sglang_command_line_parses_values_included(make_inv, over: dict[str, Any]) -> None:
    (plan,) = _plans(make_inv, vllm_tier(**{"name": "sgl", "engine": "sglang", **over}))
    init = "10.0.0.1:5757" if plan.nodes_per_replica > 1 else None
    # the kubelet expands $(VAR) in container args from the pod's environment (LWS sets these two)
    lws = {sglang.LWS_LEADER: "sgl-0.sgl.default", sglang.LWS_INDEX: "1"}
    for args in (sglang.launch_args(plan, 0, init), sglang.pod_args(plan)):
        expanded = [functools.reduce(lambda a, kv: a.replace(*kv), lws.items(), arg) for arg in args]
        assert not [a for a in expanded if "$(" in a]
        assert _parses("sglang", pin().version, expanded) == ""


@pytest.mark.parametrize("field", ["dtype", "quantization", "kv_cache_dtype"])
def test_every_value_the_spec_allows_is_one_vllm_takes(field: str) -> None:
    values = [v for v in typing.get_args(typing.get_args(Tier.model_fields[field].annotation)[0]
                                         if field == "quantization" else Tier.model_fields[field].annotation)]
    assert values
    for value in values:
        assert _parses("vllm", VLLM_VERSION, ["m", "--" + field.replace("_", "-"), value], ("model_tag",)) == ""


def test_every_value_the_spec_lets_through_for_sglang_is_one_sglang_takes() -> None:
    for value in sglang_spec.QUANTIZATION:
        assert _parses("sglang", pin().version, ["--model-path", "m", "--quantization", value]) == ""
    for value in sglang_spec.KV_CACHE_DTYPES:
        assert _parses("sglang", pin().version, ["--model-path", "m", "--kv-cache-dtype", value]) == ""


def test_wrong_values_are_caught() -> None:
    assert "invalid int value" in _parses("vllm", VLLM_VERSION, ["m", "--tensor-parallel-size", "two"], ("m",))
    assert "Invalid kv_cache_dtype" in _parses("vllm", VLLM_VERSION, ["m", "--kv-cache-dtype", "fp9"], ("m",))
    assert "invalid choice" in _parses("sglang", pin().version, ["--kv-cache-dtype", "fp8"])
