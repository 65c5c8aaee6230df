"""`invoke provision --tags/--skip-tags` (issue 33, verbs): the tags are the playbook's own (one per role), and an
unknown one is a usage error naming them; Ansible alone runs nothing for it and reports success."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gridready import ansible, inventory
from gridready import commands as tasks
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.stages import plan, provision

REPO = Path(__file__).resolve().parents[2]


def test_the_tags_are_one_per_role_and_the_help_names_them() -> None:
    tags = ansible.playbook_tags("provision.yml")
    assert sorted(tags) == sorted(plan.PROVISION_ROLES)
    assert all(t in tasks.PROVISION_TAGS for t in tags)


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--tags", "ncl", "--tags: (command line): unknown tag 'ncl' (tags of provision.yml: container_engine"),
    ("--skip-tags", "dcgm,gpu_burn", "--skip-tags: (command line): unknown tag 'gpu_burn'"),
    ("--tags", " ", "unknown tag ''"),
])
def test_an_unknown_tag_is_a_usage_error(flag: str, value: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as err:
        ansible.check_tags("provision.yml", flag, value)
    assert needle in str(err.value)


def test_known_tags_pass() -> None:
    ansible.check_tags("provision.yml", "--tags", "nccl,dcgm")
    ansible.check_tags("provision.yml", "--skip-tags", None)


def test_provision_refuses_before_it_runs_anything(monkeypatch, tmp_path) -> None:
    def contact(*_a, **_k):
        raise AssertionError("the playbook ran")

    monkeypatch.setattr(ansible, "run_playbook", contact)
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    ctx = RunContext(customer=inv.customer, run_id="20261202T000000Z-tags", root=tmp_path, skip_tags="drivers")
    with pytest.raises(InvalidInput):
        provision.run(inv, ctx)


@pytest.mark.parametrize("args", [["provision", "--tags", "ncl"], ["certify", "--gates", "nosuch"],
                                  ["certify", "--gates", "dcgm", "--skip-gates", "xid"]])
def test_a_refused_flag_leaves_no_run_folder(args: list[str], tmp_path: Path) -> None:
    """The stage's own flags are judged before its run folder is claimed: exit 2, one line, nothing written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDREADY_")}
    env["GRIDREADY_ARTIFACTS"] = str(tmp_path / "artifacts")
    res = subprocess.run([str(REPO / ".venv/bin/gridready"), "-i", "acme-h200", *args], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().splitlines()[-1].startswith(f"error: {args[1]}")
    assert [p for p in (tmp_path / "artifacts").rglob("*") if p.is_dir()] == []
