"""gridready_rdma: the distribution stack, GPUDirect RDMA through DMA-BUF (no nvidia-peermem), HCAs recorded."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("name", ["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"])
def test_distro_rdma_packages_are_installed(node, name):
    assert node.package(name).is_installed


def test_inbox_stack_uses_dma_buf_not_peermem(node):
    # nvidia-peermem cannot load without MLNX_OFED/DOCA peer memory: nothing asks for it at boot
    assert not node.file("/etc/modules-load.d/gridready-nvidia-peermem.conf").exists


def test_hca_firmware_and_links_are_recorded(node):
    facts = json.loads(node.file("/etc/gridready/facts.d/rdma.json").content_string)
    assert facts["stack"] == "distro"
    names = {h["name"] for h in facts["hcas"]}
    assert names == {f"mlx5_{i}" for i in range(8)}
    assert all(h["fw_ver"] and h["link_layer"] == "InfiniBand" for h in facts["hcas"])
    assert "DMA-BUF" in facts["peermem"]  # distro stack: GPUDirect RDMA through DMA-BUF


def test_rdma_devices_are_named_by_one_policy(node):
    # rdma-core's own rule (NAME_FALLBACK) would rename mlx5_N to ibp*/rocep*; the rule in /etc replaces it
    rule = node.file("/etc/udev/rules.d/60-rdma-persistent-naming.rules")
    assert rule.mode == 0o644
    lines = [ln for ln in rule.content_string.splitlines() if ln and not ln.startswith("#")]
    assert lines == ['ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"']
