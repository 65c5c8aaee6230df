"""Fixed-cost tiers (engine triton-embedding): config.pbtxt through tritonclient's model_config_pb2, Triton's
load rules, the launch command against tritonserver's own option table, and the role variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from gridready.serving.triton import embedding as te
from gridready.serving.triton.launch import server_command as trtllm_command
from gridready.serving.triton.pbtxt import RepositoryError
from gridready.serving.triton.versions import fixed_cost_pin
from gridready.spec.serving import Tier
from tests.unit.serving_triton.conftest import plan as trtllm_plan

REPO = Path(__file__).resolve().parents[3]
OPTIONS = {line for line in (REPO / "tests/fixtures/public/tritonserver/options.txt").read_text().splitlines()
           if line and not line.startswith("#")}
ROLE_DEFAULTS = yaml.safe_load((REPO / "roles/gridready_triton_trtllm/defaults/main.yml").read_text())
BGE = {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"}
INPUTS = [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]},
          {"name": "attention_mask", "data_type": "TYPE_INT64", "dims": [-1], "fill": "ones"}]
OUTPUTS = [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 384]}]


def tier(**embedding: Any) -> Tier:
    settings = {"model_file": "onnx/model.onnx", "inputs": INPUTS, "outputs": OUTPUTS, **embedding}
    return Tier.model_validate({"name": "embed", "engine": "triton-embedding", "served_name": "bge-small",
                                "port": 8100, "model": BGE, "tensor_parallel": 2, "embedding": settings})


def plan(t: Tier | None = None, gpus: int = 2, gpus_per_node: int = 8) -> te.EmbeddingPlan:
    t = t or tier()
    assert t.embedding is not None
    return te.EmbeddingPlan(t, t.embedding, gpus, gpus_per_node, fixed_cost_pin())


def parsed(repo: Any) -> model_config_pb2.ModelConfig:
    cfg = model_config_pb2.ModelConfig()
    text_format.Parse(repo.files["bge-small/config.pbtxt"], cfg)
    return cfg


def test_config_pbtxt_parses_with_the_protos_and_carries_the_spec() -> None:
    t = tier(max_batch_size=32, dynamic_batching={"max_queue_delay_microseconds": 500, "preferred_batch_size": [16, 8],
                                                  "max_queue_size": 256},
             instance_groups=[{"count": 2}, {"count": 1, "kind": "KIND_CPU"}])
    cfg = parsed(te.render_repository(plan(t)))
    assert (cfg.name, cfg.platform, cfg.max_batch_size) == ("bge-small", "onnxruntime_onnx", 32)
    assert cfg.default_model_filename == "model.onnx"
    assert list(cfg.dynamic_batching.preferred_batch_size) == [8, 16]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 500
    assert cfg.dynamic_batching.default_queue_policy.max_queue_size == 256
    gpu, cpu = cfg.instance_group
    assert (gpu.count, gpu.kind, list(gpu.gpus)) == (2, model_config_pb2.ModelInstanceGroup.KIND_GPU, [0, 1])
    assert (cpu.count, cpu.kind, list(cpu.gpus)) == (1, model_config_pb2.ModelInstanceGroup.KIND_CPU, [])
    assert [(i.name, i.data_type, list(i.dims)) for i in cfg.input] == [
        ("input_ids", model_config_pb2.TYPE_INT64, [-1]), ("attention_mask", model_config_pb2.TYPE_INT64, [-1])]
    assert [(o.name, list(o.dims)) for o in cfg.output] == [("last_hidden_state", [-1, 384])]


def test_the_sweep_overrides_only_the_queue_delay() -> None:
    p = plan(tier(dynamic_batching={"max_queue_delay_microseconds": 100, "preferred_batch_size": [8]}))
    base, swept = parsed(te.render_repository(p)), parsed(te.render_repository(p, delay_us=4000))
    assert swept.dynamic_batching.max_queue_delay_microseconds == 4000
    swept.dynamic_batching.max_queue_delay_microseconds = 100
    assert swept == base


def test_tensorrt_plans_take_the_tensorrt_platform_and_file() -> None:
    p = plan(tier(backend="tensorrt", model_file="plan/model.plan"))
    cfg = parsed(te.render_repository(p))
    assert (cfg.platform, cfg.default_model_filename) == ("tensorrt_plan", "model.plan")
    assert p.model_file == "bge-small/1/model.plan"


def test_an_instance_group_on_a_gpu_the_node_lacks_is_refused() -> None:
    with pytest.raises(RepositoryError, match=r"names GPU 8; the node has 8 \(0\.\.7\)"):
        te.render_repository(plan(tier(instance_groups=[{"count": 1, "gpus": [8]}])))


def test_the_launch_command_uses_only_options_tritonserver_has() -> None:
    cmd = te.server_command(plan(), "10.77.0.11")
    assert cmd[0] == "tritonserver"
    flags = {a[2:].split("=", 1)[0] for a in cmd[1:]}
    assert flags <= OPTIONS, flags - OPTIONS
    assert {"--http-address=10.77.0.11", "--grpc-address=10.77.0.11", "--metrics-address=10.77.0.11",
            "--http-port=8100", "--disable-auto-complete-config", "--model-control-mode=none"} <= set(cmd)
    # the TensorRT-LLM tiers' tritonserver ranks (under mpirun) are held to the same table
    argv = trtllm_command(trtllm_plan(tp=2, mode="engine", openai_frontend=False),
                          ["10.77.0.11"])
    ranks, current = [], None
    for arg in argv:
        if arg == "tritonserver":
            current = []
            ranks.append(current)
        elif arg == ":":
            current = None
        elif current is not None:
            current.append(arg[2:].split("=", 1)[0])
    assert len(ranks) == 2
    assert all(set(flags) <= OPTIONS for flags in ranks), [set(f) - OPTIONS for f in ranks]


def test_role_variables_are_the_roles_own_and_locate_the_model_file() -> None:
    p = plan()
    repo = te.render_repository(p)
    out = te.hosts_extravars(p, repo, ["10.77.0.11"])
    assert set(out) <= set(ROLE_DEFAULTS), set(out) - set(ROLE_DEFAULTS)
    assert out["gridready_triton_trtllm_mode"] == "embedding"
    assert out["gridready_triton_trtllm_model_file"] == "bge-small/1/model.onnx"
    assert out["gridready_triton_trtllm_model_source"] == {
        "hub_repo_dir": "/var/lib/gridready/hf/hub/models--BAAI--bge-small-en-v1.5",
        "revision": BGE["revision"], "commit": BGE["revision"], "file": "onnx/model.onnx"}
    branch = Tier.model_validate({**tier().model_dump(), "model": {**BGE, "revision": "main"}})
    assert te.model_source(branch)["commit"] == ""  # the role reads refs/main on the node
    local = Tier.model_validate({**tier().model_dump(), "model": {"local_path": "/srv/models/bge.onnx"},
                                 "embedding": {**tier().model_dump()["embedding"], "model_file": None}})
    assert te.model_source(local) == {"path": "/srv/models/bge.onnx"}
    assert "--http-address=10.77.0.11" in out["gridready_triton_trtllm_launch_script"]


def test_a_fixed_cost_tier_is_one_node_per_replica_and_not_routed() -> None:
    from gridready.monitoring.prometheus import triton_metrics_port
    from gridready.serving.router_hosts import openai_compatible

    t = tier(metrics_port=9102)
    assert t.pipeline_parallel == 1
    assert not openai_compatible(t)
    assert triton_metrics_port(t) == 9102


def test_the_documented_tier_validates_and_renders() -> None:
    text = (REPO / "docs/serving-embedding.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (doc,) = yaml.safe_load(block)["serving"]["tiers"]
    t = Tier.model_validate(doc)
    cfg = parsed(te.render_repository(plan(t, gpus=1)))
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 500 and t.embedding is not None
    assert t.embedding.delays() == [0, 100, 500, 2000]
