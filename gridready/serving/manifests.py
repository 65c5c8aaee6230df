"""Offline validation of rendered Kubernetes manifests, stricter than an API server.

- core kinds: kubernetes-validate with its strict schemas (unknown fields are errors);
- KubeRay and LWS kinds: jsonschema against the CRDs vendored in gridready/data/crds/ (KubeRay v1.7.0, LWS
  v0.10.0), made strict: `additionalProperties: false` wherever an object lists `properties` and does not
  preserve unknown fields; `x-kubernetes-int-or-string` becomes integer-or-string; `nullable` allows null;
- what the CRDs cannot say: serveConfigV2 is parsed and checked on its own, and the operator's own rules (name
  lengths, DNS-1035 names, replica bounds, upgrade strategies, a GPU-free head, Service names vs VLLM_* env).

Every problem is one line: `<Kind>/<name>: <path>: <message>`.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

CRD_FILES = (
    "ray.io_rayservices.yaml",
    "ray.io_rayclusters.yaml",
    "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "gateway.networking.k8s.io_httproutes.yaml",
)
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = {"RayService": 47, "RayCluster": 53}  # KubeRay validation.go (names get suffixes)
UPGRADE_TYPES = {"NewCluster", "NewClusterWithIncrementalUpgrade", "None"}
GPU = "nvidia.com/gpu"
# Ray Serve LLM LoraConfig.validate_dynamic_lora_loading_path (s3/gs always; abfss/azure in newer releases)
LORA_REMOTE_SCHEMES = ("s3://", "gs://", "abfss://", "azure://")

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def strict_schema(node: Any) -> Any:
    """A copy of an OpenAPI v3 CRD schema that rejects unknown fields (see module docstring)."""
    if isinstance(node, list):
        return [strict_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_schema(v) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = out.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and not preserve and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=1)
def crd_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    """(apiVersion, kind) -> a strict validator of the whole object, for every served CRD version."""
    found: dict[tuple[str, str], jsonschema.protocols.Validator] = {}
    base = resources.files("gridready") / "data" / "crds"
    for name in CRD_FILES:
        crd = yaml.load((base / name).read_text(), Loader=_Loader)
        spec = crd["spec"]
        kind = spec["names"]["kind"]
        for version in spec["versions"]:
            schema = strict_schema(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            # metadata is the API server's: kubernetes-validate checks it for core kinds, we check names below
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            cls = jsonschema.validators.validator_for(schema)
            found[(f"{spec['group']}/{version['name']}", kind)] = cls(schema)
    return found


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind', '?')}/{meta.get('name', '?')}"


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(object)"


def _schema_errors(doc: dict[str, Any], k8s_version: str) -> list[str]:
    key = (str(doc.get("apiVersion")), str(doc.get("kind")))
    where = _where(doc)
    validator = crd_validators().get(key)
    if validator is not None:
        return [f"{where}: {_path(e.absolute_path)}: {e.message}"
                for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]
    try:
        kubernetes_validate.validate(doc, k8s_version, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [f"{where}: {_path(err.path)}: {err.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{where}: (kind): no schema for {key[0]} {key[1]} in Kubernetes {k8s_version} or the CRDs"]
    return []


def _name_errors(doc: dict[str, Any]) -> list[str]:
    kind = doc.get("kind", "")
    name = str((doc.get("metadata") or {}).get("name") or "")
    where = _where(doc)
    errors = []
    if not name:
        errors.append(f"{where}: metadata.name: required (no auto-naming in rendered manifests)")
        return errors
    if kind in MAX_NAME:
        if len(name) > MAX_NAME[kind]:
            errors.append(f"{where}: metadata.name: longer than {MAX_NAME[kind]} characters (KubeRay rule)")
        if not DNS1035.match(name):
            errors.append(f"{where}: metadata.name: not a DNS-1035 label (KubeRay rule)")
    if kind == "Service":
        env_prefix = name.upper().replace("-", "_")
        if env_prefix == "VLLM" or env_prefix.startswith("VLLM_"):
            errors.append(f"{where}: metadata.name: a Service named {name!r} injects VLLM_* env vars into "
                          f"pods (VLLM_PORT=tcp://...), which break vLLM; rename it")
    return errors


def _resources(container: dict[str, Any]) -> dict[str, Any]:
    res = container.get("resources") or {}
    return {**(res.get("requests") or {}), **(res.get("limits") or {})}


def _ray_cluster_errors(where: str, spec: dict[str, Any]) -> list[str]:
    errors = []
    head = spec.get("headGroupSpec") or {}
    params = head.get("rayStartParams") or {}
    if str(params.get("num-gpus", "0")) != "0":
        errors.append(f"{where}: headGroupSpec.rayStartParams.num-gpus: the head must not take GPUs")
    for i, c in enumerate(((head.get("template") or {}).get("spec") or {}).get("containers") or []):
        if str(_resources(c).get(GPU, "0")) != "0":
            errors.append(f"{where}: headGroupSpec.template.spec.containers[{i}]: the head must not request GPUs")
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        key = f"workerGroupSpecs[{i}]"
        lo, hi, n = group.get("minReplicas"), group.get("maxReplicas"), group.get("replicas")
        if isinstance(lo, int) and isinstance(hi, int):
            if lo > hi:
                errors.append(f"{where}: {key}: minReplicas {lo} > maxReplicas {hi}")
            if isinstance(n, int) and not lo <= n <= hi:
                errors.append(f"{where}: {key}.replicas: {n} is outside [{lo}, {hi}]")
        if group.get("resources") and group.get("rayStartParams", {}).keys() & {"num-cpus", "num-gpus", "memory"}:
            errors.append(f"{where}: {key}: set resources either in rayStartParams or in .resources, not both")
        containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
        gpus = str(_resources(containers[0]).get(GPU, "0")) if containers else "0"
        if "num-gpus" in (group.get("rayStartParams") or {}) and group["rayStartParams"]["num-gpus"] != gpus:
            errors.append(f"{where}: {key}.rayStartParams.num-gpus: must equal the container's {GPU} ({gpus})")
    return errors


def serve_config_errors(where: str, text: Any, spec: dict[str, Any]) -> list[str]:
    """serveConfigV2 is a YAML string the CRD does not look into: parse it and check the LLM apps."""
    key = "spec.serveConfigV2"
    if not isinstance(text, str):
        return [f"{where}: {key}: must be a YAML string"]
    try:
        conf = yaml.safe_load(text)
    except yaml.YAMLError as err:
        return [f"{where}: {key}: not YAML ({str(err).splitlines()[0]})"]
    apps = conf.get("applications") if isinstance(conf, dict) else None
    if not isinstance(apps, list) or not apps:
        return [f"{where}: {key}.applications: a non-empty list is required"]
    errors: list[str] = []
    workers = (spec.get("rayClusterConfig") or {}).get("workerGroupSpecs") or []
    gpu_capacity = 0
    for group in workers:
        containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
        gpu_capacity += int(str(_resources(containers[0]).get(GPU, 0))) * int(group.get("maxReplicas") or 0)
    names: set[str] = set()
    prefixes: set[str] = set()
    for i, app in enumerate(apps):
        at = f"{key}.applications[{i}]"
        if not isinstance(app, dict):
            errors.append(f"{where}: {at}: must be a mapping")
            continue
        unknown = set(app) - {"name", "import_path", "route_prefix", "args", "runtime_env", "deployments",
                              "external_scaler_enabled"}
        if unknown:
            errors.append(f"{where}: {at}: unknown keys {sorted(unknown)}")
        for dupe_set, field in ((names, "name"), (prefixes, "route_prefix")):
            value = str(app.get(field) or "")
            if not value:
                errors.append(f"{where}: {at}.{field}: required")
            elif value in dupe_set:
                errors.append(f"{where}: {at}.{field}: {value!r} used twice")
            dupe_set.add(value)
        if not re.fullmatch(r"[\w.]+:[\w.]+", str(app.get("import_path", "")), re.ASCII):
            errors.append(f"{where}: {at}.import_path: must be module:attribute")
        if str(app.get("import_path", "")).startswith("ray.serve.llm:"):
            errors += _llm_configs_errors(where, at, app.get("args") or {}, gpu_capacity)
    return errors


def _llm_configs_errors(where: str, at: str, args: dict[str, Any], gpu_capacity: int) -> list[str]:
    configs = args.get("llm_configs")
    if not isinstance(configs, list) or not configs:
        return [f"{where}: {at}.args.llm_configs: a non-empty list is required"]
    errors: list[str] = []
    for j, cfg in enumerate(configs):
        c = f"{at}.args.llm_configs[{j}]"
        if not isinstance(cfg, dict):
            errors.append(f"{where}: {c}: must be a mapping")
            continue
        unknown = set(cfg) - {"model_loading_config", "accelerator_type", "engine_kwargs", "placement_group_config",
                              "deployment_config", "runtime_env", "lora_config", "experimental_configs",
                              "log_engine_metrics"}
        if unknown:
            errors.append(f"{where}: {c}: unknown keys {sorted(unknown)}")
        lora_path = (cfg.get("lora_config") or {}).get("dynamic_lora_loading_path")
        if lora_path is not None and not str(lora_path).startswith(LORA_REMOTE_SCHEMES):
            errors.append(f"{where}: {c}.lora_config.dynamic_lora_loading_path: {lora_path!r} is not a remote URI "
                          f"({', '.join(LORA_REMOTE_SCHEMES)}): Ray Serve LLM's LoraConfig rejects it")
        if not (cfg.get("model_loading_config") or {}).get("model_id"):
            errors.append(f"{where}: {c}.model_loading_config.model_id: required")
        kw = cfg.get("engine_kwargs") or {}
        tp, pp = kw.get("tensor_parallel_size", 1), kw.get("pipeline_parallel_size", 1)
        if not (isinstance(tp, int) and isinstance(pp, int) and tp > 0 and pp > 0):
            errors.append(f"{where}: {c}.engine_kwargs: tensor/pipeline_parallel_size must be positive integers")
            continue
        bundles = (cfg.get("placement_group_config") or {}).get("bundles")
        if bundles is not None:
            gpus = sum(int(b.get("GPU", 0)) for b in bundles)
            if gpus != tp * pp:
                errors.append(f"{where}: {c}.placement_group_config.bundles: {gpus} GPUs for TP x PP = {tp * pp}")
        auto = (cfg.get("deployment_config") or {}).get("autoscaling_config") or {}
        lo, hi = auto.get("min_replicas", 1), auto.get("max_replicas", 1)
        if lo > hi:
            errors.append(f"{where}: {c}.deployment_config.autoscaling_config: min_replicas > max_replicas")
        if tp * pp * hi > gpu_capacity:
            errors.append(f"{where}: {c}: max_replicas x TP x PP = {tp * pp * hi} GPUs, the worker groups "
                          f"have {gpu_capacity}")
    return errors


def _rayservice_errors(doc: dict[str, Any]) -> list[str]:
    where = _where(doc)
    spec = doc.get("spec") or {}
    errors = _ray_cluster_errors(where, spec.get("rayClusterConfig") or {})
    upgrade = (spec.get("upgradeStrategy") or {}).get("type")
    if upgrade is not None and upgrade not in UPGRADE_TYPES:
        errors.append(f"{where}: spec.upgradeStrategy.type: one of {sorted(UPGRADE_TYPES)}")
    if upgrade == "NewClusterWithIncrementalUpgrade":
        if not (spec.get("rayClusterConfig") or {}).get("enableInTreeAutoscaling"):
            errors.append(f"{where}: spec.upgradeStrategy: incremental upgrades need enableInTreeAutoscaling")
        if not ((spec.get("upgradeStrategy") or {}).get("clusterUpgradeOptions") or {}).get("gatewayClassName"):
            errors.append(f"{where}: spec.upgradeStrategy.clusterUpgradeOptions.gatewayClassName: required")
    errors += serve_config_errors(where, spec.get("serveConfigV2"), spec)
    return errors


def _pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec") or {}
    cluster = spec.get("rayClusterConfig") or spec
    out = [((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}]
    out += [((g.get("template") or {}).get("spec") or {}) for g in cluster.get("workerGroupSpecs") or []]
    return [p for p in out if p]


def operator_errors(doc: dict[str, Any]) -> list[str]:
    """Rules enforced by operators or learned from incidents, not by any schema."""
    errors = _name_errors(doc)
    kind = doc.get("kind")
    if kind == "RayService":
        errors += _rayservice_errors(doc)
    elif kind == "RayCluster":
        errors += _ray_cluster_errors(_where(doc), doc.get("spec") or {})
    if kind in ("RayService", "RayCluster"):
        for pod in _pod_specs(doc):
            if pod.get("enableServiceLinks", True):
                errors.append(f"{_where(doc)}: template.spec.enableServiceLinks: set false (Service env vars "
                              f"such as VLLM_PORT break vLLM)")
                break
    return errors


def validate(docs: list[dict[str, Any]], k8s_version: str = "1.32") -> list[str]:
    """Every problem of every document, one line each; an empty list means all valid."""
    errors: list[str] = []
    for doc in docs:
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            errors.append("?/?: (document): not a Kubernetes object (apiVersion and kind required)")
            continue
        errors += _schema_errors(doc, k8s_version)
        errors += operator_errors(doc)
    return errors
