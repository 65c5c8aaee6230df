"""A fixed-cost tier (gridready/serving/triton/embedding.py) by exact value: the config dict, instance groups'
GPUs (given, or every GPU the tier uses), the GPU-index edge of Triton's load rule, the served name's rule, the
manifest, tritonserver's argv and script, where the role finds the model file, the role variables and the
summary; the refusals with their exact lines."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gridready.errors import InvalidInput
from gridready.serving import weights
from gridready.serving.triton import embedding as te
from gridready.serving.triton.pbtxt import Enum, RepositoryError
from gridready.spec.triton import FixedCostOverride, SitePins

from .test_embedding import BGE, plan, tier

DIGEST = "sha256:" + "3c" * 32
SITE = SitePins(fixed_cost=FixedCostOverride(image_digest=DIGEST))
IMAGE = f"nvcr.io/nvidia/tritonserver@{DIGEST}"


def tier_plan(t: Any, tp: int = 2, gpn: int = 8) -> SimpleNamespace:
    return SimpleNamespace(tier=t, tensor_parallel=tp, gpus_per_node=gpn)


def test_plan_for_takes_the_tiers_gpus_and_refuses_an_unpinned_image() -> None:
    p = te.plan_for(tier_plan(tier(), 4, 8), site_pins=SITE)
    assert (p.gpus, p.gpus_per_node, p.pin.image_ref, p.name, p.model) == (4, 8, IMAGE, "embed", "bge-small")
    with pytest.raises(InvalidInput) as err:
        te.plan_for(tier_plan(tier()), source="inv/cluster.yml")
    assert err.value.lines == [
        "inv/cluster.yml: serving.tiers[embed]: nvcr.io/nvidia/tritonserver:25.12-py3 is not pinned by digest "
        "(fixed_cost.image_digest in the inventory's triton_versions.yml); refusing to deploy it"]


def test_settings_of_a_tier_without_embedding_settings() -> None:
    t = tier().model_copy(update={"embedding": None})
    with pytest.raises(ValueError, match=r"^tier embed: engine triton-embedding without `embedding` settings$"):
        te.settings_of(t)


def test_model_config_dict_and_instance_groups() -> None:
    t = tier(max_batch_size=16, dynamic_batching={"max_queue_delay_microseconds": 250, "max_queue_size": 9},
             instance_groups=[{"count": 2}, {"count": 1, "gpus": [5, 7]}, {"count": 3, "kind": "KIND_CPU"}])
    p = plan(t, gpus=3)
    assert te.model_config(p) == {
        "name": "bge-small", "platform": "onnxruntime_onnx", "max_batch_size": 16,
        "default_model_filename": "model.onnx",
        "input": [{"name": "input_ids", "data_type": Enum("TYPE_INT64"), "dims": [-1]},
                  {"name": "attention_mask", "data_type": Enum("TYPE_INT64"), "dims": [-1]}],
        "output": [{"name": "last_hidden_state", "data_type": Enum("TYPE_FP32"), "dims": [-1, 384]}],
        "instance_group": [{"count": 2, "kind": Enum("KIND_GPU"), "gpus": [0, 1, 2]},
                           {"count": 1, "kind": Enum("KIND_GPU"), "gpus": [5, 7]},
                           {"count": 3, "kind": Enum("KIND_CPU")}],
        "dynamic_batching": {"max_queue_delay_microseconds": 250, "default_queue_policy": {"max_queue_size": 9}}}
    assert te.model_config(p, delay_us=0)["dynamic_batching"]["max_queue_delay_microseconds"] == 0
    with_sizes = plan(tier(dynamic_batching={"preferred_batch_size": [4, 2]}))
    assert te.model_config(with_sizes)["dynamic_batching"]["preferred_batch_size"] == [2, 4]


def test_gpu_indices_at_the_nodes_edge() -> None:
    te.render_repository(plan(tier(instance_groups=[{"gpus": [7]}]), gpus_per_node=8))
    with pytest.raises(RepositoryError) as err:
        te.render_repository(plan(tier(instance_groups=[{"gpus": [3, 8, 9]}]), gpus_per_node=8))
    assert err.value.lines == [
        "bge-small/config.pbtxt: instance group of bge-small names GPU 8; the node has 8 (0..7)"]
    with pytest.raises(RepositoryError) as err:
        te.render_repository(plan(tier(instance_groups=[{"gpus": [4]}]), gpus_per_node=4))
    assert err.value.lines == ["bge-small/config.pbtxt: instance group of bge-small names GPU 4; the node has 4 (0..3)"]


def test_a_served_name_triton_cannot_use_is_refused_with_the_gpu_problem() -> None:
    t = tier(instance_groups=[{"gpus": [9]}]).model_copy(update={"served_name": "-bge"})
    with pytest.raises(RepositoryError) as err:
        te.render_repository(plan(t, gpus_per_node=8))
    assert err.value.lines == [
        "-bge/config.pbtxt: served_name '-bge' cannot name a Triton model directory (letters, digits, '.', '_', '-')",
        "-bge/config.pbtxt: instance group of -bge names GPU 9; the node has 8 (0..7)"]


def test_manifest_and_files() -> None:
    p = te.plan_for(tier_plan(tier(dynamic_batching={"max_queue_delay_microseconds": 100})), site_pins=SITE)
    repo = te.render_repository(p, delay_us=40)
    assert sorted(repo.files) == ["bge-small/config.pbtxt", "gridready-repo.json"]
    assert repo.manifest == {
        "generated_by": "gridready", "tier": "embed", "mode": "embedding", "served_model": "bge-small",
        "platform": "onnxruntime_onnx", "model_file": "bge-small/1/model.onnx", "gpus": 2,
        "max_queue_delay_microseconds": 40, "image": IMAGE, "versions": {"triton": "25.12", "tensorrt": "10.14.1.48"},
        "ports": {"http": 8100, "grpc": 8001, "metrics": 8002}, "files": ["bge-small/config.pbtxt"]}
    assert json.loads(repo.files["gridready-repo.json"]) == repo.manifest
    assert repo.files["gridready-repo.json"].endswith("}\n")
    assert te.summary_entry(p, repo) == {
        "tier": "embed", "engine": "triton-embedding", "mode": "embedding", "repository": ".",
        "served_model": "bge-small", "platform": "onnxruntime_onnx", "gpus": 2, "max_queue_delay_microseconds": 40,
        "image": IMAGE, "versions": {"triton": "25.12", "tensorrt": "10.14.1.48"}}


def argv(bind: str, http: int = 8100, grpc: int = 8001, metrics: int = 8002) -> list[str]:
    return ["tritonserver", "--model-repository=/models/repo", "--disable-auto-complete-config",
            "--model-control-mode=none", "--exit-on-error=true", "--strict-readiness=true",
            f"--http-port={http}", f"--grpc-port={grpc}", f"--metrics-port={metrics}",
            f"--http-address={bind}", f"--grpc-address={bind}", f"--metrics-address={bind}",
            "--allow-metrics=true", "--allow-gpu-metrics=true"]


def test_server_command_and_launch_script() -> None:
    p = plan(tier(grpc_port=9001, metrics_port=9002))
    assert te.server_command(p, "10.0.0.7") == argv("10.0.0.7", 8100, 9001, 9002)
    assert te.launch_script(p, ["10.0.0.7"]) == (
        "#!/bin/bash\n"
        "# gridready: Triton tier embed (onnxruntime, fixed-cost model bge-small)\n"
        "set -euo pipefail\n"
        "rm -rf /models/repo && cp -rL /models/repo.in /models/repo\n"
        "exec " + " ".join(argv("10.0.0.7", 8100, 9001, 9002)) + "\n")
    assert te.launch_script(p, []).splitlines()[-1] == "exec " + " ".join(argv("0.0.0.0", 8100, 9001, 9002))


def test_model_source_local_hub_commit_and_branch() -> None:
    hub = f"{weights.hub_cache()}/models--BAAI--bge-small-en-v1.5"
    assert te.model_source(tier()) == {"hub_repo_dir": hub, "revision": BGE["revision"], "commit": BGE["revision"],
                                       "file": "onnx/model.onnx"}
    branch = tier().model_copy(update={"model": tier().model.model_copy(update={"revision": "main"})})
    assert te.model_source(branch) == {"hub_repo_dir": hub, "revision": "main", "commit": "",
                                       "file": "onnx/model.onnx"}
    short = tier().model_copy(update={"model": tier().model.model_copy(update={"revision": BGE["revision"][:39]})})
    assert te.model_source(short)["commit"] == ""
    local = tier().model_copy(update={"model": tier().model.model_copy(update={"hf_id": None,
                                                                                 "local_path": "/m/x.onnx"})})
    assert te.model_source(local) == {"path": "/m/x.onnx"}


def test_role_variables() -> None:
    p = te.plan_for(tier_plan(tier(startup_timeout_s=120)), site_pins=SITE)
    repo = te.render_repository(p)
    v = te.hosts_extravars(p, repo, ["10.0.0.7"])
    assert {k: v[k] for k in v if k not in ("gridready_triton_trtllm_launch_script",
                                            "gridready_triton_trtllm_model_source")} == {
        "gridready_triton_trtllm_tier": "embed", "gridready_triton_trtllm_mode": "embedding",
        "gridready_triton_trtllm_image": IMAGE, "gridready_triton_trtllm_repo_src": "./",
        "gridready_triton_trtllm_bind_address": "10.0.0.7", "gridready_triton_trtllm_build_script": "",
        "gridready_triton_trtllm_nodes": 1, "gridready_triton_trtllm_served_model": "bge-small",
        "gridready_triton_trtllm_served_name": "bge-small", "gridready_triton_trtllm_http_port": 8100,
        "gridready_triton_trtllm_grpc_port": 8001, "gridready_triton_trtllm_metrics_port": 8002,
        "gridready_triton_trtllm_openai_port": 0, "gridready_triton_trtllm_frontend": "triton",
        "gridready_triton_trtllm_startup_timeout_s": 120,
        "gridready_triton_trtllm_model_file": "bge-small/1/model.onnx"}
    assert v["gridready_triton_trtllm_launch_script"] == te.launch_script(p, ["10.0.0.7"])
    assert v["gridready_triton_trtllm_model_source"] == te.model_source(p.tier)


def test_default_source_and_a_placeholder_named_by_the_models_file() -> None:
    with pytest.raises(InvalidInput) as err:
        te.plan_for(tier_plan(tier()))
    assert err.value.lines[0].startswith("cluster.yml: serving.tiers[embed]: nvcr.io/nvidia/tritonserver:25.12-py3 ")
    t = tier().model_copy(update={"served_name": "a${x}"})
    with pytest.raises(RepositoryError) as err:
        te.render_repository(plan(t))
    assert err.value.lines == ["a${x}/config.pbtxt:1:9: unfilled template placeholder ${x}"]


def test_repository_configs_manifest_text_and_written_files(tmp_path: Path) -> None:
    p = te.plan_for(tier_plan(tier()), site_pins=SITE)
    repo = te.render_repository(p)
    assert list(repo.configs) == ["bge-small"] and repo.configs["bge-small"].max_batch_size == 64
    assert repo.files["gridready-repo.json"].startswith('{\n  "files": [\n    "bge-small/config.pbtxt"\n  ],\n')
    written = te.write_repository(p, tmp_path / "repo", delay_us=70)
    assert written.path == tmp_path / "repo"
    assert json.loads((tmp_path / "repo" / "gridready-repo.json").read_text())["max_queue_delay_microseconds"] == 70
    assert (tmp_path / "repo" / "bge-small" / "1").is_dir()
    assert "max_queue_delay_microseconds: 70" in (tmp_path / "repo" / "bge-small" / "config.pbtxt").read_text()
