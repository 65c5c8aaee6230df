"""Ray Serve LLM's own config model judged the llm_configs gridready renders (issue 29, witnesses).

tools/ray_serve_llm_witness.py ran `ray.serve.llm.LLMConfig` of the pinned Ray over every llm_configs[] entry of
docs/examples/k8s-render (which tests/unit/serving/test_k8s_render_example.py keeps equal to what the code renders)
and recorded each config's sha256 with Ray's verdict in gridready/data/engine_cli/ray-serve-llm-<version>.json.
These tests fail when the rendered configs change without Ray having seen them (rerun the tool), when Ray refused
one, or when gridready's own refusals stop matching Ray's verdicts.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from gridready.spec.serving import RAY_VERSION

REPO = Path(__file__).resolve().parents[3]
WITNESS = REPO / "gridready" / "data" / "engine_cli" / f"ray-serve-llm-{RAY_VERSION}.json"


def _tool():
    spec = importlib.util.spec_from_file_location("ray_serve_llm_witness", REPO / "tools/ray_serve_llm_witness.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ray_validated_every_config_the_render_holds():
    tool, data = _tool(), json.loads(WITNESS.read_text())
    assert data["ray"] == RAY_VERSION
    configs = tool.rendered_configs()
    assert configs and any("lora_config" in c for c in configs)  # the example carries a LoRA tier
    assert [tool.digest(c) for c in configs] == [r["sha256"] for r in data["rendered"]], (
        "the rendered llm_configs changed since Ray validated them: rerun tools/ray_serve_llm_witness.py --env ...")
    assert all(r["valid"] for r in data["rendered"]), data["rendered"]


def test_every_rendered_deployment_option_is_one_ray_knows():
    """Ray takes an unknown deployment option silently (the recorded misspelt variant validated), so the keys are
    checked against DeploymentConfig's own fields."""
    data = json.loads(WITNESS.read_text())
    assert data["variants"]["misspelt deployment option"]["valid"] is True
    known = set(data["deployment_config_fields"])
    for cfg in _tool().rendered_configs():
        assert set(cfg["deployment_config"]) <= known, set(cfg["deployment_config"]) - known


def test_gridreadys_refusals_are_rays():
    """What gridready refuses before rendering (gridready/serving/vllm/__init__.py lora_config: a node-local adapter
    folder), Ray's LLMConfig refuses too; and Ray refuses the mistakes a hand edit could make."""
    variants = json.loads(WITNESS.read_text())["variants"]
    assert variants["local lora path"]["valid"] is False
    assert "Invalid lora_config" in " ".join(variants["local lora path"]["error"])
    assert variants["unknown accelerator type"]["valid"] is False
    assert variants["unknown top-level key"]["valid"] is False
