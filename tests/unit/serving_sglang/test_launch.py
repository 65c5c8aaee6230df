"""Rendered `python -m sglang.launch_server` arguments against SGLang's server_arguments.md (b36e8e1), the
playbook units of 1-, 2- and 4-node replicas, and the spec's refusals (engine tgi, values SGLang lacks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready.errors import InvalidInput
from gridready.serving import sglang, topology
from gridready.serving.sglang.versions import pin
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import verify as serve_verify
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier


def sglang_tier(**over):
    return vllm_tier(**{"name": "llama-sgl", "engine": "sglang", **over})


def _plan(make_inv, nodes: int, **tier):
    inv = make_inv(nodes, [sglang_tier(**{"pipeline_parallel": nodes, **tier})])  # a replica spans the nodes
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    (plan,) = topology.plan_tiers(inv, cert)
    return inv, cert, plan


def _opt(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, f"{flag} appears {args.count(flag)} times"
    return args[args.index(flag) + 1]


def test_single_node_command_uses_documented_flags(make_inv):
    _, _, plan = _plan(make_inv, 1)
    args = sglang.launch_args(plan)
    # "Model and tokenizer", "HTTP server", "API related", "Runtime options" tables
    assert _opt(args, "--model-path") == "meta-llama/Llama-3.3-70B-Instruct"
    assert _opt(args, "--revision") == "6f6073b423013f6a7d4d9f39144961bfbfbc386b"
    assert _opt(args, "--served-model-name") == "llama-3.3-70b"
    assert (_opt(args, "--host"), _opt(args, "--port")) == ("0.0.0.0", "8000")  # never SGLang's 127.0.0.1
    assert (_opt(args, "--tp-size"), _opt(args, "--pp-size")) == ("8", "1")
    assert _opt(args, "--context-length") == "8192"
    assert _opt(args, "--mem-fraction-static") == "0.9"
    assert _opt(args, "--max-running-requests") == "256"
    assert "--enable-metrics" in args  # production_metrics.md: /metrics exists only with it
    for absent in ("--nnodes", "--node-rank", "--dist-init-addr", "--disable-radix-cache", "--api-key"):
        assert absent not in args
    assert not any("key" in a.lower() for a in args)  # the API key lives in the 0600 --config file


@pytest.mark.parametrize("nodes", [2, 4])
def test_multi_node_ranks_share_one_init_address(make_inv, nodes):
    _, cert, plan = _plan(make_inv, nodes)
    units = sglang.units([plan], cert, make_inv_serving(plan))
    assert [u["host"] for u in units] == [f"gpu{i:02d}" for i in range(1, nodes + 1)]
    for rank, unit in enumerate(units):
        args = unit["args"]
        # "Multi-node distributed serving" table: --dist-init-addr host:port, --nnodes, --node-rank
        assert _opt(args, "--nnodes") == str(nodes)
        assert _opt(args, "--node-rank") == str(rank)
        assert _opt(args, "--dist-init-addr") == "10.77.0.11:50000"  # rank 0's address on every node
        assert (_opt(args, "--tp-size"), _opt(args, "--pp-size")) == ("8", str(nodes))  # TP inside a node
        assert unit["env"]["NCCL_SOCKET_IFNAME"] == "bond0" and unit["env"]["NCCL_IB_HCA"].startswith("=mlx5_0")
        assert not any(k.startswith(("VLLM_", "RAY_")) for k in unit["env"])
    assert units[0]["head_ip"] == "10.77.0.11" and {u["node_rank"] for u in units} == set(range(nodes))


def make_inv_serving(plan):
    from gridready.spec import ServingSpec

    return ServingSpec(tiers=[plan.tier])


def test_cache_and_chunking_switches(make_inv):
    _, _, plan = _plan(make_inv, 1, enable_prefix_caching=False, enable_chunked_prefill=False,
                       sglang={"schedule_policy": "lpm", "page_size": 16}, quantization="fp8",
                       kv_cache_dtype="fp8_e4m3", max_num_batched_tokens=4096)
    args = sglang.launch_args(plan)
    assert "--disable-radix-cache" in args  # "Optimization/debug options"
    assert _opt(args, "--chunked-prefill-size") == "-1"  # "Setting this to -1 means disabling chunked prefill"
    assert (_opt(args, "--schedule-policy"), _opt(args, "--page-size")) == ("lpm", "16")
    assert (_opt(args, "--quantization"), _opt(args, "--kv-cache-dtype")) == ("fp8", "fp8_e4m3")
    _, _, plan = _plan(make_inv, 1, max_num_batched_tokens=4096)
    assert _opt(sglang.launch_args(plan), "--chunked-prefill-size") == "4096"


def test_lora_adapters(make_inv):
    _, _, plan = _plan(make_inv, 1, lora_adapters=[{"name": "sql", "path": "/models/sql"}], max_loras=2)
    args = sglang.launch_args(plan)
    assert "--enable-lora" in args and _opt(args, "--max-loras-per-batch") == "2"
    assert args[args.index("--lora-paths") + 1] == "sql=/models/sql"  # <NAME>=<PATH> form


def test_the_units_carry_sglangs_own_arguments_only(make_inv):
    _, cert, plan = _plan(make_inv, 2)
    for unit in sglang.units([plan], cert, make_inv_serving(plan)):
        assert "--mode" not in unit["args"] and unit["args"][0] == "--model-path"

def test_version_pin_has_its_source():
    text = (Path(__file__).resolve().parents[3] / "gridready/data/sglang_versions.yml").read_text()
    p = pin()
    assert p.pip_spec == f"sglang=={p.version}" and f'version: "{p.version}"' in text
    assert f"SGLang {p.version}" in text and f"lmsysorg/sglang:v{p.version}-cu129" in text  # the cited facts
    assert p.image == f"lmsysorg/sglang:v{p.version}-cu129"
    assert pin("0.5.21").pip_spec == "sglang==0.5.21"


def test_hosts_extravars_carry_the_units(make_inv):
    inv, cert, plan = _plan(make_inv, 2)
    gs = serve_config.hosts_extravars(inv, cert, [plan])["gridready_serve"]
    assert [u["node_rank"] for u in gs["sglang_units"]] == [0, 1]
    assert gs["tiers"] == []  # no vLLM unit, no Ray-bound tier
    assert {h["engine"] for h in gs["hosts"].values()} == {"sglang"}
    assert serve_verify.unit_name(plan.tier) == "sglang-llama-sgl"


@pytest.mark.parametrize(("over", "line"), [
    ({"engine": "tgi"}, "serving.tiers[0].engine: Text Generation Inference is not supported: Hugging Face put it "
                        "in maintenance mode on 2025-12-11 and archived huggingface/text-generation-inference on "
                        "2026-03-21 (https://huggingface.co/docs/text-generation-inference); use sglang or vllm"),
    ({"quantization": "compressed-tensors"}, "serving.tiers[0]: quantization: 'compressed-tensors' is not an "
                                             "SGLang --quantization choice"),
    ({"kv_cache_dtype": "fp8"}, "serving.tiers[0]: kv_cache_dtype: 'fp8' is not an SGLang --kv-cache-dtype choice"),
    ({"triton": {}}, "serving.tiers[0]: `triton` settings need engine triton-trtllm"),
    ({"sglang": {"page_size": 0}}, "serving.tiers[0].sglang.page_size: Input should be greater than 0"),
])
def test_refused_values_name_file_and_key(make_inv, over, line):
    with pytest.raises(InvalidInput) as err:
        make_inv(1, [sglang_tier(**over)])
    text = str(err.value)
    assert text.startswith("inventories/acme/cluster.yml: ") and line in text
    assert len(text.splitlines()) == 1
