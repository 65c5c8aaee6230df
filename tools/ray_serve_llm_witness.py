#!/usr/bin/env python3
"""Witness of Ray Serve LLM's own config models: validate the llm_configs gridready renders with the pinned Ray.

    python tools/ray_serve_llm_witness.py --env /tmp/ray-env/bin/python

`--env` is the interpreter of a throwaway environment with the pinned Ray installed (`pip install
"ray[serve]==<serving.ray_version>" pyarrow`; Ray Serve LLM's models import on a CPU machine). The script reads every
`llm_configs[]` entry of the committed Kubernetes render (docs/examples/k8s-render, a test keeps it equal to what the
code renders), has `ray.serve.llm.LLMConfig` validate each there, and also variants that gridready refuses itself
(a node-local LoRA path) and mistakes a hand edit could make to record Ray's own verdict on them. The result, with each
config's sha256, goes to gridready/data/engine_cli/ray-serve-llm-<version>.json;
tests/unit/serving/test_ray_serve_llm_witness.py fails when the rendered configs no longer match what Ray validated.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RENDER = REPO / "docs" / "examples" / "k8s-render" / "serving" / "manifests.yaml"
OUT = REPO / "gridready" / "data" / "engine_cli"

# Runs in the Ray environment: validate each config, print one verdict per line.
CHECK = r"""
import json, sys
from ray.serve.llm import LLMConfig
import ray
from ray.serve._private.config import DeploymentConfig
fields = getattr(DeploymentConfig, "model_fields", None) or DeploymentConfig.__fields__
out = {"ray": ray.__version__, "verdicts": [], "deployment_config_fields": sorted(fields)}
for cfg in json.load(sys.stdin):
    try:
        LLMConfig.model_validate(cfg)
        out["verdicts"].append({"valid": True, "error": None})
    except Exception as e:  # pydantic's ValidationError, or a validator's ValueError
        out["verdicts"].append({"valid": False, "error": str(e).splitlines()[0:3]})
print(json.dumps(out))
"""


def digest(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def rendered_configs(path: Path = RENDER) -> list[dict[str, Any]]:
    """Every llm_configs[] entry of the RayServices in a rendered manifests file."""
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "RayService":
            for app in yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]:
                out += app.get("args", {}).get("llm_configs", [])
    return out


def variants(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What gridready refuses before Ray sees it, for Ray's own verdict."""
    local = copy.deepcopy(cfg)
    local["lora_config"] = {"dynamic_lora_loading_path": "/adapters", "max_num_adapters_per_replica": 2}
    typo = copy.deepcopy(cfg)
    typo["deployment_config"]["health_check_period"] = 10  # health_check_period_s without its unit
    accelerator = copy.deepcopy(cfg)
    accelerator["accelerator_type"] = "H300"
    top = copy.deepcopy(cfg)
    top["engine_args"] = {}  # engine_kwargs misnamed
    return {"local lora path": local, "misspelt deployment option": typo, "unknown accelerator type": accelerator,
            "unknown top-level key": top}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True, help="python of the environment with the pinned Ray")
    args = ap.parse_args()
    configs = rendered_configs()
    if not configs:
        raise SystemExit(f"{RENDER}: no llm_configs")
    extra = variants(configs[0])
    batch = [*configs, *extra.values()]
    run = subprocess.run([args.env, "-c", CHECK], input=json.dumps(batch), capture_output=True, text=True,
                         check=False)
    if run.returncode != 0:
        raise SystemExit(f"{args.env}: {run.stderr[-2000:]}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    verdicts = result["verdicts"]
    data = {
        "ray": result["ray"],
        "model": "ray.serve.llm.LLMConfig",
        "source": str(RENDER.relative_to(REPO)),
        "rendered": [{"model_id": c["model_loading_config"]["model_id"], "sha256": digest(c), **v}
                     for c, v in zip(configs, verdicts, strict=False)],
        "variants": {name: v for name, v in zip(extra, verdicts[len(configs):], strict=True)},
        # Ray takes an unknown deployment option silently (the misspelt variant validates): the rendered keys are
        # checked against DeploymentConfig's fields instead
        "deployment_config_fields": result["deployment_config_fields"],
    }
    path = OUT / f"ray-serve-llm-{result['ray']}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    bad = [r for r in data["rendered"] if not r["valid"]]
    print(f"{path.relative_to(REPO)}: {len(configs)} rendered configs, {len(bad)} refused by Ray {result['ray']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
