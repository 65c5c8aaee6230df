"""`invoke plan` on a fresh, never provisioned sandbox fleet: Ansible check mode lists the pending changes of every
host without failing on what only exists after a real run (repositories, source directories).

It runs on the session's default fleet (`fleet`), which no test provisions: the plan changes nothing, and the last
assertion proves it for the tests that use the fleet after it."""

from __future__ import annotations

import json

import pytest

from gridready.serving import topology
from tests.e2e.test_pipeline import _invoke

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def test_plan_on_a_fresh_fleet_lists_changes_and_changes_nothing(fleet, tmp_path):
    artifacts = tmp_path / "artifacts"
    run = _invoke(fleet.inventory, artifacts, "plan", "--json")
    assert run.returncode == 0, run.stderr[-4000:]
    plan = json.loads(run.stdout)
    assert plan["provision"]["status"] == "changes-pending"
    assert all(plan["provision"]["changes"][h] for h in ("node1", "node2", "node3"))
    assert plan["certify"]["dcgm_level"] == 1  # the sandbox inventory's quick profile
    # no certification yet: the render sizes as if every GPU node were certified, and says so
    rendered = plan["serve"]["rendered"]
    assert rendered["certification"] == topology.HYPOTHETICAL and rendered["tiers"], rendered
    assert fleet.ssh("node1", "test -e /opt/nccl-tests", check=False).returncode != 0  # nothing was made
