"""gridready_nvidia_driver: repository, pinned driver branch (open modules), persistenced, nouveau blacklisted."""

from __future__ import annotations

import pytest

from gridready import inventory

pytestmark = pytest.mark.sandbox


def test_repository_is_signed_and_configured(converged_fleet):
    node = converged_fleet.host("node1")  # a fresh host; node2 keeps cuda-keyring's entry (test_start_profiles)
    lst = node.file("/etc/apt/sources.list.d/gridready-nvidia.list")
    assert lst.exists and lst.mode == 0o644
    assert "signed-by=/usr/share/keyrings/gridready-nvidia.gpg" in lst.content_string
    assert node.file("/usr/share/keyrings/gridready-nvidia.gpg").exists


def test_the_nvidia_repository_is_preferred_over_the_archive(converged_fleet):
    """Issue 28, finding 6: as cuda-keyring's cuda-repository-pin-600, the repository labelled "NVIDIA CUDA" is
    pinned at 600, above a distribution archive's 500 that may carry the same driver names at a higher version."""
    node = converged_fleet.host("node1")
    pin = node.file("/etc/apt/preferences.d/gridready-nvidia-repository").content_string
    assert "Pin: release l=NVIDIA CUDA" in pin and "Pin-Priority: 600" in pin
    policy = node.check_output("apt-cache policy nvidia-kernel-open-dkms")
    repo_lines = [line.split() for line in policy.splitlines() if "/nvidia" in line and "http" in line]
    assert repo_lines and all(parts[0] == "600" for parts in repo_lines), policy


def test_open_driver_of_the_pinned_branch_is_installed(node):
    # the sandbox hosts are Debian 12: NVIDIA's Debian packaging, compute-only (docs/provision.md)
    pkg = node.package("nvidia-kernel-open-dkms")
    assert pkg.is_installed
    assert pkg.version.startswith("580.")
    assert node.package("nvidia-driver-cuda").version == pkg.version
    assert not node.package("nvidia-driver").is_installed  # the desktop metapackage stays off a compute node
    assert not node.package("nvidia-kernel-dkms").is_installed


def test_the_installed_driver_is_the_inventorys_release(node, converged_fleet):
    """The release in cluster.yml (software.driver_version), not what the simulator derives from the package: the
    package, dpkg's record of it and nvidia-smi all equal the inventory's pin."""
    pin = inventory.load(converged_fleet.inventory).spec.software.driver_version
    assert pin and pin.startswith("580.")
    assert node.package("nvidia-kernel-open-dkms").version.split("-")[0] == pin
    assert node.package("nvidia-driver-cuda").version.split("-")[0] == pin
    out = node.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    assert set(out.splitlines()) == {pin}


def test_persistenced_is_enabled_and_running(node):
    svc = node.service("nvidia-persistenced")
    assert svc.is_enabled and svc.is_running


def test_nouveau_is_blacklisted(node):
    f = node.file("/etc/modprobe.d/gridready-blacklist-nouveau.conf")
    assert f.contains("^blacklist nouveau$")


def test_persistenced_keeps_persistence_mode(node):
    """systemd's own reading of the unit (not the simulator's): one ExecStart, the daemon with --verbose and no
    --no-persistence-mode (the drop-in's empty ExecStart= cleared the distribution's)."""
    unit = node.check_output("systemctl show -p ExecStart --value nvidia-persistenced")
    assert unit.count("path=") == 1 and "argv[]=/usr/bin/nvidia-persistenced --verbose ;" in unit, unit
    assert "--no-persistence-mode" not in unit
    dropin = node.file("/etc/systemd/system/nvidia-persistenced.service.d/gridready-persistence-mode.conf")
    assert dropin.content_string.splitlines()[-2:] == ["ExecStart=", "ExecStart=/usr/bin/nvidia-persistenced --verbose"]
    assert set(node.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader").split()) == {
        "Enabled"}


def test_driver_is_version_locked_held_and_kept_from_unattended_upgrades(node):
    assert node.package("nvidia-driver-pinning-580").is_installed
    held = set(node.check_output("apt-mark showhold").split())
    assert {"nvidia-kernel-open-dkms", "nvidia-driver-cuda", "nvidia-persistenced"} <= held
    assert node.file("/etc/apt/apt.conf.d/51gridready-nvidia-driver").contains("Package-Blacklist")
