"""roles/gridready_triton_trtllm/tasks/model_file.yml, run by Ansible on this machine: the model file of a
fixed-cost tier comes from the node's Hugging Face cache (a branch revision read from refs/) or a local path, into
<repo>/<model>/1/; a missing file fails the host with its path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from sandbox.engine import hub

REPO = Path(__file__).resolve().parents[3]
TASKS = REPO / "roles" / "gridready_triton_trtllm" / "tasks" / "model_file.yml"
BGE = "BAAI/bge-small-en-v1.5"


def _run(tmp_path: Path, source: dict[str, str]) -> subprocess.CompletedProcess[str]:
    play = [{"name": "model file", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"__gridready_triton_trtllm_dir": str(tmp_path / "tier"), "gridready_triton_trtllm_tier": "embed",
                      "gridready_triton_trtllm_model_source": source,
                      "gridready_triton_trtllm_model_file": "bge-small/1/model.onnx"},
             "tasks": [{"name": "the role's tasks", "ansible.builtin.include_tasks": str(TASKS)}],
             "handlers": [{"name": "Restart gridready-triton", "ansible.builtin.debug": {"msg": "restart"}}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(path)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                               "ANSIBLE_PYTHON_INTERPRETER": sys.executable})


def _hub(tmp_path: Path) -> dict[str, Any]:
    snapshot = hub.download(BGE, "main", tmp_path / "hub", token="")
    return {"hub_repo_dir": str(tmp_path / "hub" / hub.repo_folder(BGE)), "revision": "main", "commit": "",
            "file": "onnx/model.onnx", "snapshot": snapshot}


def test_a_branch_revision_is_resolved_through_refs(tmp_path: Path) -> None:
    src = _hub(tmp_path)
    run = _run(tmp_path, {k: str(v) for k, v in src.items() if k != "snapshot"})
    assert run.returncode == 0, run.stdout[-3000:]
    copied = tmp_path / "tier" / "repo" / "bge-small" / "1" / "model.onnx"
    assert copied.read_text() == (src["snapshot"] / "onnx" / "model.onnx").read_text()
    assert not copied.is_symlink()  # a copy: the container sees it without the cache mounted at the same path


def test_a_local_path_is_copied(tmp_path: Path) -> None:
    model = tmp_path / "bge.onnx"
    model.write_text("onnx bytes")
    run = _run(tmp_path, {"path": str(model)})
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "tier" / "repo" / "bge-small" / "1" / "model.onnx").read_text() == "onnx bytes"


def test_a_missing_file_fails_with_its_path(tmp_path: Path) -> None:
    src = _hub(tmp_path)
    run = _run(tmp_path, {**{k: str(v) for k, v in src.items() if k != "snapshot"}, "file": "onnx/model_fp16.onnx"})
    assert run.returncode != 0
    commit = hub.REPOS[BGE]["commits"][0]  # type: ignore[index]
    assert f"snapshots/{commit}/onnx/model_fp16.onnx is not on" in run.stdout, run.stdout[-3000:]
