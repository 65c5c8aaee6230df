"""The converged fast path still catches drift (playbooks/provision.yml + library/gridready_fingerprint.py).

On a converged fleet, one host (node1) drifts in every kind of managed thing at once: a managed file's content, a
package removed behind apt's back (its version gone), a held driver package released, a service stopped, a service
disabled, the sysctl drop-in edited, a modules-load drop-in that loads nvidia-peermem added (the inbox RDMA stack
keeps it absent), the RDMA naming udev rule edited. `--check` then reports pending changes on node1 and none on
node2; the real run names each difference, repairs every one of them on node1 (changed > 0) and leaves node2 alone
(changed = 0); the run after it is a no-op again on both.
The sandbox's hosts are containers: the host kernel owns live sysctls and module loading, so there the roles manage
the drop-ins (docs/provision.md) and the drift is made in them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gridready import inventory
from gridready.provision_vars import role_vars
from tests.roles.conftest import GOOD, PLAYBOOK, Run, sandbox_vars

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]

DRIFTED, STEADY = GOOD
FILE = "/etc/modprobe.d/gridready-blacklist-nouveau.conf"
SYSCTL = "/etc/sysctl.d/90-gridready.conf"
MODULES = "/etc/modules-load.d/gridready-nvidia-peermem.conf"  # absent with the inbox RDMA stack (gridready_rdma)
UDEV = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"  # gridready_rdma's naming policy
REMOVED = "nvidia-container-toolkit"  # reinstalled by gridready_container_toolkit
STOPPED = "nvidia-dcgm"
DISABLED = "nvidia-persistenced"


def _held(fleet: Any, host: str) -> set[str]:
    return set(fleet.ssh(host, "apt-mark showhold").stdout.split())


def _enabled_units(fleet: Any, host: str) -> set[str]:
    out = fleet.ssh(host, "systemctl list-unit-files --no-legend --state=enabled 'nvidia*'", check=False).stdout
    return {ln.split()[0] for ln in out.splitlines() if ln.strip()}


@pytest.fixture(scope="module")
def drift(converged_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet = converged_fleet
    inv = inventory.load(fleet.inventory)
    ev = tmp_path_factory.mktemp("drift") / "extravars.json"
    ev.write_text(json.dumps({"gridready_group_vars": {g.name: role_vars(inv.spec, g) for g in inv.spec.node_groups},
                              **sandbox_vars()}))
    limit = ",".join(GOOD)

    def run(*args: str) -> Run:
        return Run.of(fleet.ansible_playbook(PLAYBOOK, "-e", f"@{ev}", "--limit", limit, *args, check=False))

    baseline = run()  # records the converged state where a run before this one did not
    enabled = _enabled_units(fleet, DRIFTED)
    disable = DISABLED if f"{DISABLED}.service" in enabled else sorted(enabled)[0].removesuffix(".service")
    held = sorted(p for p in _held(fleet, DRIFTED) if p.startswith("nvidia-"))
    assert held, "the driver role holds its packages"
    fleet.ssh(DRIFTED, " && ".join([
        f"test -f {SYSCTL} && test -f {UDEV} && test ! -e {MODULES}",
        f"echo '# drift' >> {FILE}",
        f"echo 'vm.swappiness = 61' >> {SYSCTL}",
        f"echo 'nvidia-peermem' > {MODULES}",
        f"echo '# drift' >> {UDEV}",
        f"dpkg --remove --force-depends {REMOVED} >/dev/null",
        f"apt-mark unhold {held[0]} >/dev/null",
        f"systemctl stop {STOPPED}",
        f"systemctl disable {disable} 2>/dev/null",
    ]))
    check = run("--check", "--diff")
    repair = run()
    again = run()
    return {"fleet": fleet, "baseline": baseline, "check": check, "repair": repair, "again": again,
            "disabled": disable, "unheld": held[0]}


def test_check_mode_reports_pending_changes_on_the_drifted_host_only(drift: dict[str, Any]) -> None:
    check = drift["check"]
    assert check.rc == 0, check.stdout[-3000:]
    assert check.recap[DRIFTED]["changed"] > 0, check.stdout[-3000:]
    assert check.recap[STEADY]["changed"] == 0, check.changed_tasks(STEADY)


def test_each_kind_of_drift_is_named(drift: dict[str, Any]) -> None:
    out = drift["repair"].stdout
    shown = out[out.index("TASK [Show what differs from the last converged run]"):]
    shown = shown[:shown.index("TASK [", 10)]
    assert f"ok: [{STEADY}]" not in shown  # nothing differs there: the task is skipped
    unheld = drift["unheld"]
    for what in (f"file {FILE}:", f"package {REMOVED}:", f"package {unheld}: ", f"unit {STOPPED}.service:",
                 f"unit {drift['disabled']}.service: enabled", f"file {SYSCTL}:", f"file {MODULES}: absent ->",
                 "module nvidia-peermem: absent -> not loaded", f"file {UDEV}:"):
        assert what in shown, (what, shown[:3000])
    # dpkg's selection letter: h (hold) before, i (install) after the release
    assert " hi -> " in shown.split(f"package {unheld}: ")[1].splitlines()[0]


def test_the_next_run_repairs_the_drifted_host_and_leaves_the_other_alone(drift: dict[str, Any]) -> None:
    repair, fleet = drift["repair"], drift["fleet"]
    assert repair.rc == 0, repair.stdout[-3000:]
    assert repair.recap[DRIFTED]["changed"] > 0
    assert repair.recap[STEADY]["changed"] == 0, repair.changed_tasks(STEADY)
    assert fleet.ssh(DRIFTED, f"! grep -q drift {FILE}", check=False).returncode == 0
    assert fleet.ssh(DRIFTED, f"dpkg-query -W -f '${{Status}}' {REMOVED}").stdout.endswith("installed")
    assert fleet.ssh(DRIFTED, f"systemctl is-active {STOPPED}", check=False).stdout.strip() == "active"
    assert f"{drift['disabled']}.service" in _enabled_units(fleet, DRIFTED)
    assert fleet.ssh(DRIFTED, f"! grep -qs swappiness {SYSCTL}", check=False).returncode == 0
    assert fleet.ssh(DRIFTED, f"test ! -e {MODULES}", check=False).returncode == 0
    assert fleet.ssh(DRIFTED, f"! grep -q drift {UDEV}", check=False).returncode == 0
    assert drift["unheld"] in _held(fleet, DRIFTED)


def test_after_the_repair_both_hosts_are_converged_again(drift: dict[str, Any]) -> None:
    again = drift["again"]
    assert again.rc == 0, again.stdout[-3000:]
    for host in GOOD:
        assert again.recap[host]["changed"] == 0, again.changed_tasks(host)
    assert "TASK [gridready_" not in again.stdout  # no role's task ran anywhere: the fast path
