"""Converging from the real starting points of a leased host (tests/roles/conftest.py: start profiles)."""

from __future__ import annotations

import json

import pytest

from gridready import inventory
from tests.roles.conftest import CONVERGED, KEYRING_DCGM3, OLD_DRIVER, UPGRADED, Provisioned

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]


def test_every_start_profile_converges_then_is_idempotent_and_check_clean(provisioned: Provisioned):
    for host in CONVERGED:
        assert provisioned.first.recap[host]["failed"] == 0, provisioned.first.stdout[-4000:]
        assert provisioned.second.recap[host]["changed"] == 0, provisioned.second.changed_tasks(host)
        assert provisioned.check.recap[host]["changed"] == 0, provisioned.check.changed_tasks(host)


def test_cuda_keyring_entry_is_reused_not_duplicated(provisioned: Provisioned):
    node = provisioned.fleet.host(KEYRING_DCGM3)
    assert node.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").exists
    assert not node.file("/etc/apt/sources.list.d/gridready-nvidia.list").exists
    assert node.run("apt-get update -q").rc == 0
    assert "entry of /etc/apt/sources.list.d/cuda-debian12-x86_64.list" in \
        provisioned.facts[KEYRING_DCGM3]["nvidia_driver"]["repository"]


def test_dcgm3_is_purged_and_dcgm4_runs(provisioned: Provisioned):
    node = provisioned.fleet.host(KEYRING_DCGM3)
    assert not node.package("datacenter-gpu-manager").is_installed
    assert not node.package("datacenter-gpu-manager-config").is_installed
    assert node.package("datacenter-gpu-manager-4-cuda13").is_installed
    assert node.package("datacenter-gpu-manager-4-proprietary-cuda13").is_installed  # installed with recommends
    assert node.service("nvidia-dcgm").is_running


def test_upgraded_driver_waits_for_the_reboot(provisioned: Provisioned):
    # the fabric manager package changed with the driver, and its restart handler held back (the forking unit fails
    # against the loaded old module): the host did not fail before its reboot
    assert provisioned.first.recap[UPGRADED]["failed"] == 0, provisioned.first.recap
    node = provisioned.fleet.host(UPGRADED)
    fm = json.loads(node.file("/etc/gridready/facts.d/fabricmanager.json").content_string)
    driver = node.package("nvidia-kernel-open-dkms").version
    # the host came with the previous release of the branch; cluster.yml pins the current one (a version pin the
    # repository, serving both, resolves), and every driver package moved to it
    pinned = inventory.load(provisioned.fleet.inventory).spec.software.driver_version
    assert driver == f"{pinned}-1" != f"{OLD_DRIVER}-1"
    assert node.package("nvidia-driver-cuda").version == driver == node.package("nvidia-persistenced").version
    assert node.package("nvidia-fabricmanager").version == driver  # pinned to the package, not to nvidia-smi
    assert f"reboot pending (loaded driver {OLD_DRIVER}" in fm["service"]
    assert not node.service("nvidia-fabricmanager").is_running  # it would refuse the loaded module
    tuning = json.loads(node.file("/etc/gridready/facts.d/host_tuning.json").content_string)
    assert tuning["persistence_mode"].startswith("unknown: nvidia-smi unreadable: Failed to initialize NVML")
