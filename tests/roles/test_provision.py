"""playbooks/provision.yml on the sandbox fleet: converges, is idempotent, is check-mode clean, and a host that fails
preflight stops alone with a clear message."""

from __future__ import annotations

import pytest

from tests.roles.conftest import BAD, GOOD, PLAYBOOK, Provisioned, Run

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def test_first_run_converges_the_good_hosts(provisioned: Provisioned):
    for host in GOOD:
        stats = provisioned.first.recap[host]
        assert stats["failed"] == 0 and stats["unreachable"] == 0, provisioned.first.stdout[-4000:]
        assert stats["changed"] > 0


def test_the_first_converge_is_recorded(provisioned: Provisioned):
    """Issue 28, finding 7: the record is taken where the host's state checks out (module loaded = installed
    driver, persistence on, fabric manager active with fabric Completed), so the second run takes the fast path;
    it was written only by the second run. The upgraded host runs its old module: it owes a reboot, no record."""
    assert provisioned.recorded_by_first == GOOD


def test_preflight_stops_only_the_host_with_the_wrong_gpu_count(provisioned: Provisioned):
    assert provisioned.first.recap[BAD]["failed"] == 1
    assert f"fatal: [{BAD}]" in provisioned.first.stdout
    assert "preflight: expected 8 x 0x10de:0x2335 on PCI under /var/lib/gridready-sim/sysfs, found 4" in \
        provisioned.first.stdout
    assert provisioned.first.rc == 2  # ansible-playbook: some hosts failed


def test_second_run_changes_nothing(provisioned: Provisioned):
    assert provisioned.second.rc == 0, provisioned.second.stdout[-4000:]
    for host in GOOD:
        assert provisioned.second.recap[host]["changed"] == 0, provisioned.second.changed_tasks(host)


def test_check_mode_after_converge_reports_no_changes(provisioned: Provisioned):
    assert provisioned.check.rc == 0, provisioned.check.stdout[-4000:]
    for host in GOOD:
        assert provisioned.check.recap[host]["changed"] == 0, provisioned.check.changed_tasks(host)


def test_a_converged_host_takes_the_fast_path(provisioned: Provisioned):
    """After a run that ran every role and changed nothing, the next no-op run runs three tasks per host (the
    fingerprint check, the skipped include, the versions) and no role task (docs/provision.md, "Re-runs")."""
    fast = provisioned.fast
    assert fast is not None and fast.rc == 0, fast.stdout[-4000:] if fast else ""
    for host in GOOD:
        stats = fast.recap[host]
        assert (stats["changed"], stats["ok"], stats["skipped"]) == (0, 2, 1), (host, stats)
    assert "TASK [gridready_" not in fast.stdout and "Show what differs" not in fast.stdout


def test_force_runs_every_role_on_a_converged_host(provisioned: Provisioned):
    """`invoke provision --force` (gridready_provision_force): the recorded fast path is skipped and every role runs
    (here in check mode, so nothing changes), where deleting the record on the host by hand was the only way."""
    run = Run.of(provisioned.fleet.ansible_playbook(PLAYBOOK, "-e", f"@{provisioned.extravars}", "--limit", "node1",
                                                    "--check", "-e", "gridready_provision_force=true", check=False))
    assert run.rc == 0, run.stdout[-3000:]
    assert run.recap["node1"]["changed"] == 0, run.changed_tasks("node1")
    for role in ("gridready_nvidia_driver", "gridready_probe_runtime", "gridready_host_tuning"):
        assert f"TASK [{role} : " in run.stdout, role


def test_every_role_recorded_its_facts(provisioned: Provisioned):
    for host in GOOD:
        facts = provisioned.facts[host]
        assert all(facts.values()), {k for k, v in facts.items() if not v}
        assert facts["nvidia_driver"]["version"].startswith("580.")
        assert facts["nvidia_driver"]["source"] == "package"
        assert facts["nccl"]["version"] == "2.28.9"
        assert facts["fabricmanager"]["status"] == "installed"
        assert facts["rdma"]["hcas"], "no HCA recorded"


def test_the_run_reports_installed_versions(provisioned: Provisioned):
    assert '"gridready_versions": {' in provisioned.second.stdout
    assert '"driver": "580.159.04"' in provisioned.second.stdout
