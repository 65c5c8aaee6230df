"""Engines that run as their own users can write their Hugging Face remote-code modules (issue #43, finding 3).

HF_HOME (/var/lib/gridready/hf) is root's, 0755: the engines only read the pre-downloaded weights there. But
transformers writes a model's remote code under HF_MODULES_CACHE, `$HF_HOME/modules` unless set
(transformers/utils/hub.py: `os.getenv("HF_MODULES_CACHE", os.path.join(constants.HF_HOME, "modules"))`), and the
engines run as `ray` (vLLM, its Ray workers) and `sglang`. Each engine's environment now names a modules folder
the role creates for that user alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from gridready.serving import weights
from gridready.spec.serving import ModelSource

ROLES = Path(__file__).resolve().parents[3] / "roles"


def _variables(role: str, **over: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"ansible_managed": "managed", "inventory_hostname": "gpu01"}
    for part in ("defaults", "vars"):
        for key, value in (yaml.safe_load((ROLES / role / part / "main.yml").read_text()) or {}).items():
            out[key] = trust_as_template(value) if isinstance(value, str) else value
    out.update(over)
    return out


def _env(role: str, template: str, **over: Any) -> dict[str, str]:
    templar = Templar(loader=DataLoader(), variables=_variables(role, **over))
    text = templar.template(trust_as_template((ROLES / role / "templates" / template).read_text()))
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def _unit_user(role: str, template: str, **over: Any) -> str:
    """The unit's User= line, rendered on its own (the Ray units include their shared arguments' template)."""
    templar = Templar(loader=DataLoader(), variables=_variables(role, **over))
    line = next(ln for ln in (ROLES / role / "templates" / template).read_text().splitlines() if ln.startswith("User="))
    return str(templar.template(trust_as_template(line.split("=", 1)[1])))


def _folder_task(role: str, tasks: str, path: str, **over: Any) -> dict[str, Any]:
    templar = Templar(loader=DataLoader(), variables=_variables(role, **over))
    for task in yaml.safe_load((ROLES / role / "tasks" / tasks).read_text()):
        spec = task.get("ansible.builtin.file")
        if spec and templar.template(trust_as_template(spec["path"])) == path:
            return {k: templar.template(trust_as_template(v)) if isinstance(v, str) else v for k, v in spec.items()}
    raise AssertionError(f"{role}/tasks/{tasks}: no task creates {path}")


MODEL_ENV = weights.engine_env(ModelSource(hf_id="Qwen/Qwen2.5-0.5B-Instruct", revision="0" * 40))
ITEM = {"name": "t", "served_name": "m", "ray_address": "10.0.0.1:6379", "expected_gpus": 8, "expected_nodes": 1,
        "args": [], "node_rank": 0, "nnodes": 1, "env": MODEL_ENV}


@pytest.mark.parametrize(("role", "env_template", "unit_template", "tasks", "over"), [
    ("gridready_ray_node", "ray.env.j2", "ray-head.service.j2", "install.yml",
     {"gridready_ray_node_ip": "10.0.0.1", "__gridready_ray_node_ifname": "eth0",
      "gridready_ray_node_env": MODEL_ENV,
      "gridready_ray_node_role": "head"}),
    ("gridready_sglang", "sglang.env.j2", "sglang.service.j2", "main.yml",
     {"item": ITEM, "gridready_sglang_pip_spec": "s", "gridready_sglang_api_key": ""}),
])
def test_each_engine_user_writes_its_own_modules_folder(role: str, env_template: str, unit_template: str,
                                                        tasks: str, over: dict[str, Any]) -> None:
    env = _env(role, env_template, **over)
    home = env.get("HF_HOME", weights.HF_HOME)
    modules = env.get("HF_MODULES_CACHE", f"{home}/modules")
    assert not modules.startswith(home + "/"), f"{modules}: under root's HF_HOME"
    user = _unit_user(role, unit_template, **over)
    folder = _folder_task(role, tasks, modules, **over)
    assert folder["state"] == "directory" and folder["owner"] == user == folder["group"]
    assert folder["mode"] == "0700"  # no other user plants code this engine imports


def test_the_vllm_unit_reads_the_ray_environment_as_the_ray_user() -> None:
    """vLLM's driver and its Ray rank workers take HF_MODULES_CACHE from ray.env (the raylet's environment)."""
    vllm = yaml.safe_load((ROLES / "gridready_vllm" / "defaults" / "main.yml").read_text())
    ray = yaml.safe_load((ROLES / "gridready_ray_node" / "defaults" / "main.yml").read_text())
    assert vllm["gridready_vllm_user"] == ray["gridready_ray_node_user"]
    unit = (ROLES / "gridready_vllm" / "templates" / "vllm.service.j2").read_text()
    assert "EnvironmentFile=/etc/gridready/ray.env" in unit
