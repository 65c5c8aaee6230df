"""When playbooks/tasks/provision-converge.yml records the converged state, evaluated by Ansible itself.

ansible-core 2.19 gives `ansible_run_tags` as a tuple, and a tuple never equals the list ['all']: the record was
skipped on every run, so the fast path never found a converged host and every no-op provision ran every role.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
RECORD = "Record the converged state (only after a full, untagged run that ran roles here)"


def _recorded(tmp_path: Path, *args: str, reasons: list[str] | None = None, rebooted: bool = False) -> bool:
    tasks = yaml.safe_load((REPO / "playbooks" / "tasks" / "provision-converge.yml").read_text())
    (record,) = [t for t in tasks if t["name"] == RECORD]
    marker = tmp_path / "recorded"
    reboot = {"name": "reboot stand-in", "ansible.builtin.command": "true", "changed_when": False,
              "register": "__gridready_provision_rebooted", "tags": ["always"]}
    if not rebooted:
        reboot["when"] = False
    play = [{"name": "record condition", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"gridready_reboot_reasons": reasons or []},
             "tasks": [reboot,
                       {"name": "record stand-in", "ansible.builtin.copy": {"content": "x", "dest": str(marker),
                                                                              "mode": "0600"},
                        "when": record["when"], "tags": record["tags"]},
                       {"name": "a tagged task", "ansible.builtin.debug": {"msg": "x"}, "tags": ["nccl"]}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(path), *args],
                         capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                              "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    assert run.returncode == 0, run.stdout[-3000:]
    return marker.exists()


def test_an_untagged_run_without_a_pending_reboot_records(tmp_path: Path) -> None:
    assert _recorded(tmp_path)


@pytest.mark.parametrize("args", [("--tags", "nccl"), ("--skip-tags", "nccl")])
def test_a_tagged_or_skipping_run_does_not_record(tmp_path: Path, args: tuple[str, str]) -> None:
    assert not _recorded(tmp_path, *args)


def test_a_reboot_still_owed_is_not_converged(tmp_path: Path) -> None:
    assert not _recorded(tmp_path, reasons=["NVIDIA kernel module package changed"])
    assert _recorded(tmp_path, reasons=["NVIDIA kernel module package changed"], rebooted=True)
