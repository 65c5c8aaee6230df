"""Triton for a fixed-cost model (engine triton-embedding): plan, model repository, launch, role variables.

    plan = triton_embedding.plan_for(tier_plan, site_pins=...)
    repo = triton_embedding.write_repository(plan, stage_dir / "triton" / tier.name / "repo", delay_us=None)
    vars = triton_embedding.hosts_extravars(plan, repo, hosts=[...])   # role gridready_triton_trtllm, mode embedding

config.pbtxt is built from the tier's `embedding:` settings and parsed back by tritonclient's model_config_pb2
(gridready/serving/triton/pbtxt.py), then checked against the one load rule of Triton the spec cannot check
alone (triton-inference-server/core src/model_config_utils.cc ValidateInstanceGroup): KIND_GPU instances only on
GPUs the node has. Preferred sizes above max_batch_size are refused with the spec (gridready/spec/embedding.py).
The model file itself (ONNX or TensorRT plan) is placed into <model>/1/ on each node by the role, from the node's
Hugging Face cache or local path.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridready.errors import InvalidInput
from gridready.serving import weights
from gridready.serving.triton import MANIFEST, MODEL_NAME, Repository, write_rendered
from gridready.serving.triton.launch import REPO_DIR, REPO_IN, bind_address
from gridready.serving.triton.pbtxt import Enum, RepositoryError, render
from gridready.serving.triton.versions import FixedCostPin, fixed_cost_pin
from gridready.spec.embedding import EmbeddingSettings, Tensor
from gridready.spec.serving import Tier
from gridready.spec.triton import SitePins

COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class EmbeddingPlan:
    tier: Tier
    settings: EmbeddingSettings
    gpus: int  # GPUs of the node the tier uses (its tensor_parallel)
    gpus_per_node: int
    pin: FixedCostPin

    @property
    def name(self) -> str:
        return self.tier.name

    @property
    def model(self) -> str:
        """The Triton model name: the repository directory, which clients address (/v2/models/<name>)."""
        return self.tier.served_name

    @property
    def ports(self) -> dict[str, int]:
        return {"http": self.tier.port, "grpc": self.settings.grpc_port, "metrics": self.settings.metrics_port}

    @property
    def model_file(self) -> str:
        """Where the model file goes inside the repository."""
        return f"{self.model}/1/{self.settings.default_file}"


def settings_of(tier: Tier) -> EmbeddingSettings:
    if tier.embedding is None:
        raise ValueError(f"tier {tier.name}: engine triton-embedding without `embedding` settings")
    return tier.embedding


def plan_for(tier_plan: Any, *, site_pins: SitePins | None = None, source: str = "cluster.yml") -> EmbeddingPlan:
    """From gridready.serving.topology.TierPlan: the tier's GPUs are its tensor_parallel on one node. The image is
    the fixed-cost pin, with the inventory's `site_pins` over it; one without a digest is refused."""
    tier = tier_plan.tier
    pin = fixed_cost_pin(site_pins)
    if not pin.image_digest:
        raise InvalidInput(f"{source}: serving.tiers[{tier.name}]: {pin.image} is not pinned by digest "
                           "(fixed_cost.image_digest in the inventory's triton_versions.yml); refusing to deploy it")
    return EmbeddingPlan(tier, settings_of(tier), gpus=tier_plan.tensor_parallel,
                         gpus_per_node=tier_plan.gpus_per_node, pin=pin)


def _tensors(tensors: Sequence[Tensor]) -> list[dict[str, Any]]:
    return [{"name": t.name, "data_type": Enum(t.data_type), "dims": list(t.dims)} for t in tensors]


def _instance_groups(plan: EmbeddingPlan) -> list[dict[str, Any]]:
    out = []
    for group in plan.settings.instance_groups:
        entry: dict[str, Any] = {"count": group.count, "kind": Enum(group.kind)}
        if group.kind == "KIND_GPU":
            entry["gpus"] = list(group.gpus) if group.gpus is not None else list(range(plan.gpus))
        out.append(entry)
    return out


def model_config(plan: EmbeddingPlan, delay_us: int | None = None) -> dict[str, Any]:
    """config.pbtxt as a dict; `delay_us` replaces max_queue_delay_microseconds (the sweep's settings)."""
    s = plan.settings
    batching = s.dynamic_batching
    dynamic: dict[str, Any] = {
        "max_queue_delay_microseconds": batching.max_queue_delay_microseconds if delay_us is None else delay_us,
        "default_queue_policy": {"max_queue_size": batching.max_queue_size},
    }
    if batching.preferred_batch_size:
        dynamic["preferred_batch_size"] = list(batching.preferred_batch_size)
    return {
        "name": plan.model,
        "platform": s.platform,
        "max_batch_size": s.max_batch_size,
        "default_model_filename": s.default_file,
        "input": _tensors(s.inputs),
        "output": _tensors(s.outputs),
        "instance_group": _instance_groups(plan),
        "dynamic_batching": dynamic,
    }


def _check_loadable(plan: EmbeddingPlan, cfg: Any, source: str) -> None:
    """What Triton refuses at load and only the plan knows (model_config_utils.cc ValidateInstanceGroup)."""
    problems = []
    if not MODEL_NAME.match(plan.model):
        problems.append(f"{source}: served_name {plan.model!r} cannot name a Triton model directory "
                        "(letters, digits, '.', '_', '-')")
    for group in cfg.instance_group:
        bad = [g for g in group.gpus if g >= plan.gpus_per_node]
        if bad:
            problems.append(f"{source}: instance group of {cfg.name} names GPU {bad[0]}; the node has "
                            f"{plan.gpus_per_node} (0..{plan.gpus_per_node - 1})")
    if problems:
        raise RepositoryError(problems)


def render_repository(plan: EmbeddingPlan, delay_us: int | None = None) -> Repository:
    """The repository's files (config.pbtxt and gridready's manifest), validated, in memory."""
    source = f"{plan.model}/config.pbtxt"
    text, cfg = render(model_config(plan, delay_us), source, frozenset())
    _check_loadable(plan, cfg, source)
    files = {source: text}
    manifest = {
        "generated_by": "gridready", "tier": plan.name, "mode": "embedding", "served_model": plan.model,
        "platform": plan.settings.platform, "model_file": plan.model_file, "gpus": plan.gpus,
        "max_queue_delay_microseconds": cfg.dynamic_batching.max_queue_delay_microseconds,
        "image": plan.pin.image_ref, "versions": {"triton": plan.pin.triton, "tensorrt": plan.pin.tensorrt},
        "ports": plan.ports, "files": sorted(files),
    }
    files[MANIFEST] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return Repository(Path(), files, {plan.model: cfg}, manifest)


def write_repository(plan: EmbeddingPlan, dest: Path, delay_us: int | None = None) -> Repository:
    return write_rendered(render_repository(plan, delay_us), dest)


def server_command(plan: EmbeddingPlan, bind: str) -> list[str]:
    """tritonserver's argv: the repository's models only (model control none), every listener on `bind`
    (--http-address and the others: server src/command_line_parser.cc), auto-complete off so the validated
    config is the one served."""
    p = plan.ports
    return [
        "tritonserver", f"--model-repository={REPO_DIR}", "--disable-auto-complete-config",
        "--model-control-mode=none", "--exit-on-error=true", "--strict-readiness=true",
        f"--http-port={p['http']}", f"--grpc-port={p['grpc']}", f"--metrics-port={p['metrics']}",
        f"--http-address={bind}", f"--grpc-address={bind}", f"--metrics-address={bind}",
        "--allow-metrics=true", "--allow-gpu-metrics=true",
    ]


def launch_script(plan: EmbeddingPlan, hosts: Sequence[str]) -> str:
    lines = [
        "#!/bin/bash",
        f"# gridready: Triton tier {plan.name} ({plan.settings.backend}, fixed-cost model {plan.model})",
        "set -euo pipefail",
        f"rm -rf {REPO_DIR} && cp -rL {REPO_IN} {REPO_DIR}",
        "exec " + shlex.join(server_command(plan, bind_address(hosts))),
    ]
    return "\n".join(lines) + "\n"


def model_source(tier: Tier) -> dict[str, str]:
    """Where the role finds the model file on a node: a local path, or the Hugging Face cache's snapshot
    (`snapshots/<commit>/<file>`; a branch or tag revision is read from `refs/<revision>` there, huggingface_hub
    "Understand caching")."""
    model, s = tier.model, settings_of(tier)
    if model.local_path:
        return {"path": model.local_path}
    assert model.hf_id and model.revision and s.model_file
    return {"hub_repo_dir": f"{weights.hub_cache()}/{weights.repo_folder(model.hf_id)}",
            "revision": model.revision, "commit": model.revision if COMMIT.match(model.revision) else "",
            "file": s.model_file}


def hosts_extravars(plan: EmbeddingPlan, repo: Repository, hosts: Sequence[str] = ()) -> dict[str, Any]:
    """Variables of role gridready_triton_trtllm (mode embedding) for this tier; `hosts`: the replica's node."""
    return {
        "gridready_triton_trtllm_tier": plan.name,
        "gridready_triton_trtllm_mode": "embedding",
        "gridready_triton_trtllm_image": plan.pin.image_ref,
        "gridready_triton_trtllm_repo_src": str(repo.path) + "/",
        "gridready_triton_trtllm_launch_script": launch_script(plan, hosts),
        "gridready_triton_trtllm_bind_address": bind_address(hosts),
        "gridready_triton_trtllm_build_script": "",
        "gridready_triton_trtllm_nodes": 1,
        "gridready_triton_trtllm_served_model": plan.model,
        "gridready_triton_trtllm_served_name": plan.tier.served_name,
        "gridready_triton_trtllm_http_port": plan.ports["http"],
        "gridready_triton_trtllm_grpc_port": plan.ports["grpc"],
        "gridready_triton_trtllm_metrics_port": plan.ports["metrics"],
        "gridready_triton_trtllm_openai_port": 0,
        "gridready_triton_trtllm_frontend": "triton",
        "gridready_triton_trtllm_startup_timeout_s": plan.settings.startup_timeout_s,
        "gridready_triton_trtllm_model_source": model_source(plan.tier),
        "gridready_triton_trtllm_model_file": plan.model_file,
    }


def summary_entry(plan: EmbeddingPlan, repo: Repository) -> dict[str, Any]:
    return {
        "tier": plan.name, "engine": "triton-embedding", "mode": "embedding", "repository": str(repo.path),
        "served_model": plan.model, "platform": plan.settings.platform, "gpus": plan.gpus,
        "max_queue_delay_microseconds": repo.manifest["max_queue_delay_microseconds"],
        "image": plan.pin.image_ref, "versions": repo.manifest["versions"],
    }
