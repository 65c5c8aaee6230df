"""Rendered vLLM arguments, `ray start` environment and the playbook's plan for 1, 2 and 4 H200 nodes."""

from __future__ import annotations

import pytest

from gridready.serving import topology, vllm
from sandbox.engine import cli as sim_cli
from sandbox.engine import entry as sim_entry
from tests.summaries import HCAS, certified_ledger
from tests.unit.serving.conftest import vllm_tier


def _plan(make_inv, nodes: int, **tier):
    inv = make_inv(nodes, [vllm_tier(**{"pipeline_parallel": nodes, **tier})])  # a replica spans the nodes
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    (plan,) = topology.plan_tiers(inv, cert)
    return inv, cert, plan


def _opt(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(("nodes", "backend"), [(1, "mp"), (2, "ray"), (4, "ray")])
def test_serve_args(make_inv, nodes, backend):
    _, _, plan = _plan(make_inv, nodes)
    args = vllm.serve_args(plan)
    assert args[:2] == ["serve", "meta-llama/Llama-3.3-70B-Instruct"]
    assert _opt(args, "--tensor-parallel-size") == "8"
    assert _opt(args, "--pipeline-parallel-size") == str(nodes)
    assert _opt(args, "--distributed-executor-backend") == backend
    assert _opt(args, "--served-model-name") == "llama-3.3-70b"
    assert _opt(args, "--revision") == "6f6073b423013f6a7d4d9f39144961bfbfbc386b"
    assert (_opt(args, "--host"), _opt(args, "--port")) == ("0.0.0.0", "8000")
    assert _opt(args, "--max-model-len") == "8192"
    assert _opt(args, "--gpu-memory-utilization") == "0.9"
    assert "--enable-prefix-caching" in args and "--enable-chunked-prefill" in args
    assert not any("api-key" in a for a in args)  # the key travels in VLLM_API_KEY, never in argv


def test_optional_engine_arguments(make_inv):
    _, _, plan = _plan(make_inv, 1, quantization="fp8", kv_cache_dtype="fp8", enable_prefix_caching=False,
                       max_num_batched_tokens=16384,
                       lora_adapters=[{"name": "sql", "path": "/models/lora/sql"}],
                       extra_engine_args={"enforce_eager": True})
    args = vllm.serve_args(plan)
    assert _opt(args, "--quantization") == "fp8" and _opt(args, "--kv-cache-dtype") == "fp8"
    assert "--no-enable-prefix-caching" in args
    assert _opt(args, "--max-num-batched-tokens") == "16384"
    assert "--enable-lora" in args and _opt(args, "--lora-modules") == "sql=/models/lora/sql"
    assert "--enforce-eager" in args


def test_ray_start_env_comes_from_certification(make_inv):
    inv, cert, plan = _plan(make_inv, 2)
    env = vllm.node_env(plan, cert.certified["gpu02"], inv.spec.serving)
    assert env == {
        "VLLM_HOST_IP": "10.77.0.12",
        "RAY_USAGE_STATS_ENABLED": "0",
        "NCCL_SOCKET_IFNAME": "bond0",
        "GLOO_SOCKET_IFNAME": "bond0",
        "TP_SOCKET_IFNAME": "bond0",
        "NCCL_IB_HCA": "=" + ",".join(HCAS),
        "HF_HOME": "/var/lib/gridready/hf",  # the node's pre-downloaded cache, read offline
        "HF_HUB_OFFLINE": "1",
    }


def test_hosts_extravars_for_a_two_node_cluster(make_inv):
    inv, cert, plan = _plan(make_inv, 2)
    serve = vllm.hosts_extravars([plan], cert, inv.spec.serving)["gridready_serve"]
    assert serve["members"] == ["10.77.0.11", "10.77.0.12"]
    head, worker = serve["hosts"]["gpu01"], serve["hosts"]["gpu02"]
    assert (head["role"], worker["role"]) == ("head", "worker")
    assert head["head_address"] == worker["head_address"] == "10.77.0.11:6379"
    assert worker["env"]["VLLM_HOST_IP"] == "10.77.0.12"
    assert head["api_ports"] == [8000] and worker["api_ports"] == []
    (tier,) = serve["tiers"]
    assert (tier["head"], tier["expected_gpus"], tier["expected_nodes"]) == ("gpu01", 16, 2)
    assert tier["args"] == vllm.serve_args(plan)


def test_the_simulated_vllm_command_takes_the_real_serve_line_and_joins_ray_as_vllm_does(make_inv):
    _, _, plan = _plan(make_inv, 2)
    args = vllm.serve_args(plan)
    argv = sim_entry.vllm_argv(args, {"RAY_ADDRESS": "10.77.0.11:6379"})
    assert argv is not None and argv[: len(args) - 1] == args[1:]
    parsed, _ignored = sim_cli.parser().parse_known_args(["--model", argv[0], *argv[1:]])
    assert parsed.ray_address == "10.77.0.11:6379" and parsed.ray_required and parsed.mode == "openai"
    auto = sim_entry.vllm_argv(args, {})
    assert auto is not None and auto[auto.index("--ray-address") + 1] == "auto"
    assert sim_entry.vllm_argv(["server", *args[1:]], {}) is None
    assert parsed.served_model_name == ["llama-3.3-70b"] and parsed.port == 8000


def test_llm_config_for_ray_serve(make_inv):
    _, _, plan = _plan(make_inv, 2, autoscaling={"min_replicas": 1, "max_replicas": 2})
    cfg = vllm.llm_config(plan)
    assert cfg["model_loading_config"] == {"model_id": "llama-3.3-70b",
                                           "model_source": "meta-llama/Llama-3.3-70B-Instruct"}
    assert cfg["accelerator_type"] == "H200"
    assert cfg["engine_kwargs"]["tensor_parallel_size"] == 8
    assert cfg["engine_kwargs"]["pipeline_parallel_size"] == 2
    assert len(cfg["placement_group_config"]["bundles"]) == 16
    assert cfg["placement_group_config"]["strategy"] == "PACK"
    assert cfg["deployment_config"]["autoscaling_config"]["max_replicas"] == 2


def test_units_give_in_flight_requests_the_tier_drain_before_sigkill(make_inv):
    from gridready.serving import sglang
    inv, cert, plan = _plan(make_inv, 2, drain_timeout_s=200)
    (tier,) = vllm.hosts_extravars([plan], cert, inv.spec.serving)["gridready_serve"]["tiers"]
    assert tier["stop_timeout_s"] == 230
    sg = _plan(make_inv, 2, engine="sglang", drain_timeout_s=200)[2]
    assert {u["stop_timeout_s"] for u in sglang.units([sg], cert, inv.spec.serving)} == {230}
