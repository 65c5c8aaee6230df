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


def _recorded(tmp_path: Path, *args: str, cmdline_reboot: str = "", rebooted: bool = False, driver_owed: bool = False,
              problems: list[str] | None = None) -> bool:
    tasks = yaml.safe_load((REPO / "playbooks" / "tasks" / "provision-converge.yml").read_text())
    (record,) = [t for t in tasks if t["name"] == RECORD]
    marker = tmp_path / "recorded"
    marker.unlink(missing_ok=True)  # each call judges afresh
    reboot = {"name": "reboot stand-in", "ansible.builtin.command": "true", "changed_when": False,
              "register": "__gridready_provision_rebooted", "tags": ["always"]}
    if not rebooted:
        reboot["when"] = False
    play = [{"name": "record condition", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"gridready_host_tuning_reboot_reason": cmdline_reboot,
                      "__gridready_provision_driver_owed": driver_owed,
                      "__gridready_provision_problems": problems or []},
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
    assert not _recorded(tmp_path, cmdline_reboot="kernel command line changed")
    assert _recorded(tmp_path, cmdline_reboot="kernel command line changed", rebooted=True)
    # the driver's is read from the host (loaded module against the installed package), before and after a reboot
    assert not _recorded(tmp_path, driver_owed=True)
    assert not _recorded(tmp_path, driver_owed=True, rebooted=True)


def test_a_host_whose_state_does_not_check_out_is_not_recorded(tmp_path: Path) -> None:
    assert not _recorded(tmp_path, problems=["persistence mode is Disabled, not Enabled"])
