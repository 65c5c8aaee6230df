"""gridready_fabricmanager: on an HGX 8-GPU (NVSwitch) node, the driver's exact version, service running."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox


def test_fabricmanager_matches_the_driver_version(node):
    fm = node.package("nvidia-fabricmanager")
    assert fm.is_installed
    assert fm.version == node.package("nvidia-kernel-open-dkms").version


def test_nscq_matches_the_driver_version_and_both_are_held(node):
    nscq = node.package("libnvidia-nscq")
    assert nscq.is_installed and nscq.version == node.package("nvidia-kernel-open-dkms").version
    held = node.check_output("apt-mark showhold").split()
    assert {"nvidia-fabricmanager", "libnvidia-nscq"} <= set(held)


def test_fabricmanager_service_is_enabled_and_running(node):
    svc = node.service("nvidia-fabricmanager")
    assert svc.is_enabled and svc.is_running
