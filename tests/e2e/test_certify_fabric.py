"""`invoke certify` on a provisioned 6-host sandbox names exactly the hosts given a half-rate HCA.

The hosts are provisioned for real (simulated NVIDIA packages from the sandbox repository); between scenarios
only the injected faults change, and `--force` re-probes every node.

`extended`: provisioning six fresh hosts is the longest fixture of the suite (about 10 min on CI's two cores). The
default run keeps both halves on cheaper fleets: the fabric phase naming exactly the faulted hosts
(tests/sandbox/test_fabric_isolation.py, six hosts with the simulated tools only) and `invoke certify` quarantining
a faulted host through the stage (tests/e2e/test_pipeline.py).
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_pipeline import _invoke
from tests.sandbox.fabric_simtools import set_faults

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]
HOSTS = [f"node{i}" for i in range(1, 7)]
HALF = [{"kind": "hca_half_rate", "hca": "mlx5_1"}]


@pytest.fixture(scope="module")
def six(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(6, healthy=True)
    artifacts = tmp_path_factory.mktemp("artifacts")
    first = _invoke(fleet.inventory, artifacts, "provision")
    assert first.returncode == 0, first.stderr[-4000:]
    return fleet, artifacts


@pytest.mark.parametrize("faulted", [[], ["node4"], ["node2", "node5"]], ids=["none", "one", "two"])
def test_invoke_certify_names_exactly_the_faulted_hosts(six, faulted):
    fleet, artifacts = six
    set_faults(fleet, dict.fromkeys(faulted, HALF))
    run = _invoke(fleet.inventory, artifacts, "certify", "--force", "--json")
    summary = json.loads(run.stdout)
    assert run.returncode == 0, run.stderr[-4000:]  # quarantine policy, minimum 2 certified
    assert sorted(summary["quarantined"]) == faulted
    assert sorted(summary["certified"]) == sorted(set(HOSTS) - set(faulted))
    stage = artifacts / summary["customer"] / summary["run_id"] / "certify"
    quarantine = (stage / "quarantine.yml").read_text()
    assert all(h in quarantine for h in faulted)
    for host in faulted:
        cert = json.loads((stage / "nodes" / host / "certification.json").read_text())
        assert any("mlx5_1" in line for line in cert["blocking"]), cert["blocking"]
