"""Triton Inference Server with TensorRT-LLM: the API the serve stage, the role and the stack use.

    plan = triton.plan_for(tier_plan, site_pins=...)          # or triton.make_plan(tier, settings, sku=..., ...)
    repo = triton.write_repository(plan, stage_dir / "triton" / tier.name / "repo")
    rec  = triton.ensure_engine(plan, cache_root, builder)      # engine mode, cache on this machine
    vars = triton.hosts_extravars(plan, repo, hosts=[...])      # target hosts: role gridready_triton_trtllm
    triton.summary_entry(plan, repo, records)                   # into serve/summary.json

Every config.pbtxt is built from a dict, parsed back with tritonclient's model_config_pb2 (a typo fails with
line:column), checked for unknown parameters and leftover `${...}`, and the ensemble's wiring is verified.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gridready.serving import engine_cache, weights
from gridready.serving.engine_cache import EngineRecord
from gridready.serving.triton import repo as triton_repo
from gridready.serving.triton.build import build_script, engine_key
from gridready.serving.triton.launch import (
    EXTRA_LLM_API,
    bind_address,
    entry_model,
    launch_script,
    model_dir,
    served_model,
)
from gridready.serving.triton.pbtxt import PLACEHOLDER, RepositoryError, render
from gridready.serving.triton.plan import ENGINES_DIR, TritonPlan, make_plan
from gridready.serving.triton.wiring import check_ensemble
from gridready.spec.serving import Tier
from gridready.spec.triton import SitePins, TritonSettings

__all__ = [
    "Repository", "RepositoryError", "TritonPlan", "build_script", "engine_records_from_events", "ensure_engine",
    "hosts_extravars", "launch_script", "make_plan", "plan_for", "render_repository", "settings_of",
    "summary_entry", "write_rendered", "write_repository",
]
MANIFEST = "gridready-repo.json"
HOST_ENGINE_CACHE = "/var/lib/gridready/engines"  # on each node; mounted at /engines in the image
ENGINE_LINE = re.compile(r"GRIDREADY_ENGINE (built|cached) ([0-9a-f]{64})")


def settings_of(tier: Tier) -> TritonSettings:
    """The tier's `triton:` section, or the defaults (LLM-API mode behind Triton)."""
    value = getattr(tier, "triton", None)
    return value if isinstance(value, TritonSettings) else TritonSettings.model_validate(value or {})


def plan_for(tier_plan: Any, *, site_pins: SitePins | None = None, source: str = "cluster.yml") -> TritonPlan:
    """From gridready.serving.topology.TierPlan (certified nodes, TP/PP already sized); `site_pins`: the
    inventory's pins (gridready.inventory.site_pins); `source` prefixes errors (topology.cluster_file(inv))."""
    return make_plan(
        tier_plan.tier,
        settings_of(tier_plan.tier),
        sku=tier_plan.group.catalog_sku,
        parallel=tier_plan.parallel,
        site_pins=site_pins,
        source=source,
    )


@dataclass
class Repository:
    path: Path
    files: dict[str, str]  # relative path -> text written
    configs: dict[str, Any] = field(default_factory=dict)  # model -> parsed inference.ModelConfig
    manifest: dict[str, Any] = field(default_factory=dict)


def _manifest(plan: TritonPlan, files: Iterable[str]) -> dict[str, Any]:
    r = plan.release
    key = engine_key(plan) if plan.mode == "engine" else None
    return {
        "generated_by": "gridready",
        "tier": plan.name,
        "mode": plan.mode,
        "frontend": plan.settings.frontend,
        "served_model": served_model(plan),
        "served_name": plan.tier.served_name,
        "tp": plan.tp,
        "pp": plan.pp,
        "world_size": plan.world_size,
        "nodes": plan.nodes,
        "gpu_model": plan.sku.name,
        "image": r.image_ref,
        "versions": {"triton": r.triton, "tensorrt_llm": r.tensorrt_llm, "tensorrt": r.tensorrt, "cuda": r.cuda},
        "engine_key": key.digest if key else None,
        "engine_entry": key.dirname if key else None,
        "ports": plan.ports,
        "files": sorted(files),
    }


def _check_text(name: str, text: str) -> None:
    for n, line in enumerate(text.splitlines(), start=1):
        if PLACEHOLDER.search(line):
            raise RepositoryError(f"{name}:{n}: unfilled template placeholder")


# Triton model names are repository directory names; the OpenAI frontend's ids are the same names.
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _check_served_name(plan: TritonPlan, models: Mapping[str, Any]) -> None:
    """served_name names the entry model's directory: a plain directory name, no other model's name."""
    name, entry = served_model(plan), entry_model(plan)
    if not MODEL_NAME.match(name):
        raise RepositoryError(f"tier {plan.name}: served_name {name!r} cannot name a Triton model directory "
                              f"(letters, digits, '.', '_', '-'; no '/')")
    if name != entry and name in models:
        raise RepositoryError(f"tier {plan.name}: served_name {name!r} is the name of another model of the "
                              f"repository ({', '.join(sorted(models))})")


def render_repository(plan: TritonPlan) -> Repository:
    """All files of the tier's repository, validated, in memory (path is unset until written)."""
    files: dict[str, str] = {}
    configs: dict[str, Any] = {}
    if plan.settings.frontend == "trtllm-serve":
        args = triton_repo.llm_args(plan)
        extra = {k: v for k, v in args.items() if k in ("kv_cache_config", "enable_chunked_prefill", "lora_config")}
        files[EXTRA_LLM_API] = yaml.safe_dump(extra, sort_keys=False)
    elif plan.mode == "engine":
        msgs = triton_repo.engine_models(plan)
        _check_served_name(plan, msgs)
        for name, msg in msgs.items():
            dirname = model_dir(plan, name)
            text, cfg = render({**msg, "name": dirname}, f"{dirname}/config.pbtxt", triton_repo.KNOWN_PARAMETERS[name])
            files[f"{dirname}/config.pbtxt"], configs[dirname] = text, cfg
        check_ensemble(configs[model_dir(plan, "ensemble")], configs)
        bls = model_dir(plan, "tensorrt_llm_bls")
        if bls in configs:
            target = configs[bls].parameters["tensorrt_llm_model_name"].string_value
            if target not in configs:
                raise RepositoryError(f"{bls}/config.pbtxt: tensorrt_llm_model_name {target!r} is no model")
    else:
        dirname = served_model(plan)
        _check_served_name(plan, {"tensorrt_llm": {}})
        known = triton_repo.LLMAPI_KNOWN_PARAMETERS["tensorrt_llm"]
        msg = {**triton_repo.llmapi_config(plan), "name": dirname}
        text, cfg = render(msg, f"{dirname}/config.pbtxt", known)
        files[f"{dirname}/config.pbtxt"], configs[dirname] = text, cfg
        files[f"{dirname}/1/model.yaml"] = triton_repo.model_yaml(plan)
    for name, text in files.items():
        _check_text(name, text)
        if name.endswith(".yaml"):
            yaml.safe_load(text)
    files[MANIFEST] = json.dumps(_manifest(plan, files), indent=2, sort_keys=True) + "\n"
    return Repository(Path(), files, configs, json.loads(files[MANIFEST]))


def write_repository(plan: TritonPlan, dest: Path) -> Repository:
    """Render, validate, then write atomically (temporary sibling, renamed over `dest`)."""
    return write_rendered(render_repository(plan), dest)


def write_rendered(repo: Repository, dest: Path) -> Repository:
    """Write a rendered repository atomically (temporary sibling, renamed over `dest`)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, text in repo.files.items():
        f = tmp / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    for model in repo.configs:  # every model needs its version directory
        (tmp / model / "1").mkdir(parents=True, exist_ok=True)
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    repo.path = dest
    return repo


def ensure_engine(
    plan: TritonPlan, cache_root: Path, build: Callable[[Path], Mapping[str, str] | None]
) -> EngineRecord | None:
    """Engine mode: reuse or build the engine in `cache_root`; `build(tmpdir)` runs the build script in the
    serving image. LLM-API mode has no engine: None."""
    if plan.mode != "engine":
        return None
    return engine_cache.ensure(Path(cache_root), engine_key(plan), build, name=plan.name)


def engine_records_from_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """`built`/`cached` per host from ansible-runner events of the role's engine task (target hosts)."""
    out = []
    for ev in events:
        data = ev.get("event_data", {})
        res = data.get("res") or {}
        m = ENGINE_LINE.search(str(res.get("stdout", ""))) if ev.get("event") == "runner_on_ok" else None
        if m:
            out.append({"host": data.get("host", ""), "status": m.group(1), "key": m.group(2)})
    return out


def hosts_extravars(
    plan: TritonPlan, repo: Repository, hosts: Sequence[str] = (), *, engine_cache_dir: str = HOST_ENGINE_CACHE
) -> dict[str, Any]:
    """Variables of role gridready_triton_trtllm for this tier (see roles/.../meta/argument_specs.yml).

    `hosts`: node addresses of the tier, leader first. The engine build script runs in the serving image with
    the host cache (`engine_cache_dir`) mounted at /engines.
    """
    s = plan.settings
    return {
        "gridready_triton_trtllm_tier": plan.name,
        "gridready_triton_trtllm_mode": plan.mode,
        "gridready_triton_trtllm_image": plan.release.image_ref,
        "gridready_triton_trtllm_repo_src": str(repo.path) + "/",
        "gridready_triton_trtllm_launch_script": launch_script(plan, hosts),
        "gridready_triton_trtllm_bind_address": bind_address(hosts),
        "gridready_triton_trtllm_build_script": (
            build_script(plan, cache_dir=ENGINES_DIR).text if plan.mode == "engine" else ""
        ),
        "gridready_triton_trtllm_engine_cache_dir": engine_cache_dir,
        "gridready_triton_trtllm_nodes": plan.nodes,
        "gridready_triton_trtllm_served_model": served_model(plan),
        "gridready_triton_trtllm_served_name": plan.tier.served_name,
        "gridready_triton_trtllm_http_port": s.http_port,
        "gridready_triton_trtllm_grpc_port": s.grpc_port,
        "gridready_triton_trtllm_metrics_port": s.metrics_port,
        "gridready_triton_trtllm_openai_port": plan.ports.get("openai", 0),
        "gridready_triton_trtllm_frontend": s.frontend,
        "gridready_triton_trtllm_startup_timeout_s": s.startup_timeout_s,
        "gridready_triton_trtllm_weights": host_weights(plan),
    }


def host_weights(plan: TritonPlan) -> dict[str, str]:
    """Where the image reads a Hub model (<weights_dir>/<hf_id>/<revision>, mounted at WEIGHTS_DIR) and the node's
    Hugging Face cache snapshot the model-weights role downloaded it into; {} for a local path. The role links the
    snapshot's files there (hard links: no second copy), since the cache's own symlinks point into blobs/."""
    model = plan.tier.model
    if not model.hf_id or not model.revision:
        return {}
    return {"snapshot": f"{weights.hub_cache()}/{weights.repo_folder(model.hf_id)}/snapshots/{model.revision}",
            "folder": f"{model.hf_id}/{model.revision}"}


def summary_entry(
    plan: TritonPlan, repo: Repository, records: Iterable[EngineRecord | Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The tier's entry for serve/summary.json: what was generated and, per engine, "built" or "cached"."""
    engines = [r.as_dict() if isinstance(r, EngineRecord) else dict(r) for r in records]
    return {
        "tier": plan.name,
        "engine": "triton-trtllm",
        "mode": plan.mode,
        "frontend": plan.settings.frontend,
        "repository": str(repo.path),
        "served_model": served_model(plan),
        "tp": plan.tp,
        "pp": plan.pp,
        "world_size": plan.world_size,
        "image": plan.release.image_ref,
        "versions": repo.manifest.get("versions", {}),
        "engines": engines,
    }


# The face of every engine package (docs/architecture.md, "Serving engines as packages"): the tiers' `engine:` values
# it serves, the sections of a tier it reads besides the keys every tier has, and its renderer per target (the
# model repository and role variables on hosts; the plan the stack's component deploys on Kubernetes). The fixed-cost
# tier (triton-embedding, hosts only) renders through gridready.serving.triton.embedding.
ENGINES = ("triton-trtllm", "triton-embedding")
TIER_SECTIONS = ("triton", "embedding")
RENDERS = {"hosts": hosts_extravars, "kubernetes": plan_for}
