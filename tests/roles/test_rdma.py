"""gridready_rdma: the distribution stack, nvidia-peermem configured, HCAs recorded."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("name", ["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"])
def test_distro_rdma_packages_are_installed(node, name):
    assert node.package(name).is_installed


def test_peermem_loads_at_boot(node):
    assert node.file("/etc/modules-load.d/gridready-nvidia-peermem.conf").contains("^nvidia-peermem$")


def test_hca_firmware_and_links_are_recorded(node):
    facts = json.loads(node.file("/etc/gridready/facts.d/rdma.json").content_string)
    assert facts["stack"] == "distro"
    names = {h["name"] for h in facts["hcas"]}
    assert names == {f"mlx5_{i}" for i in range(8)}
    assert all(h["fw_ver"] and h["link_layer"] == "InfiniBand" for h in facts["hcas"])
    assert "container" in facts["peermem"]  # the sandbox hosts are containers: the module is left to the host
