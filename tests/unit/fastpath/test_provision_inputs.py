"""The per-role input digests of playbooks/provision.yml, rendered by Ansible itself on localhost.

An inventory variable that references a role default (the sandbox's `gridready_nccl_tests_url` names
`gridready_nccl_tests_version`) cannot be resolved before the role runs. Ansible 2.19 then skips the call that would
have recorded the role's digest, so the role went missing from the fast path's inputs and never ran on a fresh host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = ["preflight", "nvidia_driver", "fabricmanager", "nccl", "dcgm", "rdma", "container_engine", "container_toolkit",
         "probe_runtime", "host_tuning"]


def _rendered_inputs(tmp_path: Path, host_vars: dict[str, object]) -> dict[str, str]:
    plays = yaml.safe_load((REPO / "playbooks" / "provision.yml").read_text())
    nodes = next(p for p in plays if p.get("name") == "Provision the GPU nodes")
    keep = ("__gridready_provision_roles", "__gridready_provision_group", "__gridready_provision_code",
            "__gridready_provision_inputs_now")
    out = tmp_path / "inputs.json"
    play = [{"name": "inputs", "hosts": "all", "gather_facts": False,
             "vars": {k: nodes["vars"][k] for k in keep},
             "tasks": [{"ansible.builtin.copy": {"content": "{{ __gridready_provision_inputs_now | to_json }}",
                                                 "dest": str(out), "mode": "0600"}}]}]
    (REPO / "playbooks" / f".test-inputs-{os.getpid()}.yml").write_text(yaml.safe_dump(play))
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                                   "ansible_python_interpreter": sys.executable,
                                                                   **host_vars}}}}))
    try:
        run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                              str(REPO / "playbooks" / f".test-inputs-{os.getpid()}.yml")],
                             capture_output=True, text=True, timeout=300, cwd=REPO,
                             env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})
    finally:
        (REPO / "playbooks" / f".test-inputs-{os.getpid()}.yml").unlink()
    assert run.returncode == 0, run.stdout[-3000:]
    return json.loads(out.read_text())


def test_a_variable_naming_a_role_default_keeps_its_role_in_the_digests(tmp_path: Path) -> None:
    url = "http://10.77.0.1:8088/nvidia/nccl-tests-{{ gridready_nccl_tests_version }}.tar.gz"
    inputs = _rendered_inputs(tmp_path, {"gridready_nccl_tests_url": url})
    assert sorted(inputs) == sorted(ROLES)


def test_a_changed_variable_changes_only_its_roles_digest(tmp_path: Path) -> None:
    a = _rendered_inputs(tmp_path, {"gridready_dcgm_version": "4.2.3"})
    b = _rendered_inputs(tmp_path, {"gridready_dcgm_version": "4.2.4"})
    assert [r for r in ROLES if a[r] != b[r]] == ["dcgm"]
