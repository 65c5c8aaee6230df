"""`serve` on a sandbox fleet with the tiers a test writes into its cluster.yml, on a certification the test
writes through the certify stage's writer: what the serve acceptance tests share."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import inventory
from gridready.artifacts import RunContext
from gridready.stages import serve
from tests.summaries import certification

# What provision installs for the Triton tiers: the NVIDIA repository (the toolkit's source), Docker Engine, then the
# container toolkit, which configures Docker's nvidia runtime (the sandbox serves each under its real name, SIMULATED).
DOCKER_PLAY = """\
- name: Docker with the NVIDIA runtime, as provision installs it
  hosts: all
  gather_facts: true
  tasks:
    - name: The NVIDIA repository
      ansible.builtin.include_role:
        name: gridready_nvidia_driver
        tasks_from: repository.yml
    - name: Docker Engine
      ansible.builtin.include_role:
        name: gridready_container_engine
    - name: The NVIDIA Container Toolkit
      ansible.builtin.include_role:
        name: gridready_container_toolkit
"""


def provision_docker(fleet: Any, tmp: Path) -> None:
    """Docker Engine with the nvidia runtime on every host of the fleet, through the provision roles."""
    (tmp / "docker.yml").write_text(DOCKER_PLAY)
    run = fleet.ansible_playbook(tmp / "docker.yml", check=False)
    assert run.returncode == 0, run.stdout[-4000:]


@contextmanager
def fleet_env(fleet: Any) -> Iterator[None]:
    """The fleet's Ansible fact cache for the stages run inside (the tests' own serve and role runs too)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANSIBLE_CACHE_PLUGIN_CONNECTION", fleet.ansible_env()["ANSIBLE_CACHE_PLUGIN_CONNECTION"])
        yield


def serve_fleet(fleet: Any, root: Path, run_id: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply `edit` to the fleet's cluster.yml, certify every host, run serve once (inside fleet_env); what the
    tests read back."""
    cluster = yaml.safe_load((fleet.inventory / "cluster.yml").read_text())
    edit(cluster)
    (fleet.inventory / "cluster.yml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    inv = inventory.load(fleet.inventory)
    certification(inv, fleet.names, root=root, run_id="20261201T000000Z-test")
    t0 = time.monotonic()
    result = serve.run(inv, RunContext(customer=inv.customer, run_id=run_id, root=root))
    return {"fleet": fleet, "root": root, "result": result, "seconds": time.monotonic() - t0, "inv": inv}
