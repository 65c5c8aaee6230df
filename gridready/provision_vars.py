"""Spec -> role variables: what the provision roles learn from cluster.yml for one node group.

`gridready.stages.provision` passes `{group name: role_vars(spec, group)}` as the extra var `gridready_group_vars`;
playbooks/provision.yml applies a host's entry (set_fact) before the roles run, so these values win over the
inventory's group_vars for the keys listed here. Everything else (repository URLs, reboot policy, sysfs
roots) stays inventory configuration. docs/provision.md lists every role variable.
"""

from __future__ import annotations

from typing import Any

from gridready import matrix
from gridready.spec import ClusterSpec, NodeGroup
from gridready.spec import iommu as iommu_rule

HGX_GPUS = 8  # NVSwitch baseboards (HGX 8-GPU) need fabric manager; 4-GPU HGX boards have no NVSwitch


def role_vars(spec: ClusterSpec, node_group: NodeGroup) -> dict[str, Any]:
    """The gridready_<role>_* variables the spec decides for `node_group` (JSON-serialisable)."""
    pins = spec.software
    sku = node_group.catalog_sku
    shape = sku.shape(node_group.gpus_per_node, node_group.platform) if sku.shapes else None
    rdma_nics = [n for n in node_group.nics if n.kind in ("infiniband", "roce")]
    versions = matrix.load()
    branch = versions.driver_branches.get(pins.driver_branch)
    out: dict[str, Any] = {
        "gridready_preflight_supported_os": [matrix.OS_KEYS[node_group.os]],
        # enforced from the version matrix: os.<os>.min_kernel, the branch's open_kernel_modules, min_driver,
        # rdma.distro.rdma_core (each row carries its source in gridready/data/version_matrix.yml)
        "gridready_preflight_min_kernel": versions.min_kernel(node_group.os),
        "gridready_preflight_gpu_device_id": sku.device_id,
        "gridready_preflight_gpu_count": node_group.gpus_per_node,
        "gridready_nvidia_driver_branch": pins.driver_branch,
        "gridready_nvidia_driver_version": pins.driver_version or "",
        "gridready_fabricmanager_nvswitch": sku.nvswitch and node_group.gpus_per_node == HGX_GPUS,
        # a passthrough guest's fabric manager runs in the host or service VM (the catalog's node shape)
        "gridready_fabricmanager_on_node": shape.fabric_manager_on_node if shape is not None else True,
        "gridready_fabricmanager_branch": pins.driver_branch,
        "gridready_dcgm_major": pins.dcgm_major,
        "gridready_dcgm_cuda_major": pins.cuda.split(".")[0],
        # pinned and held like the driver, so a node provisioned later gets the release the others run
        "gridready_dcgm_version": pins.dcgm_version or "",
        "gridready_container_toolkit_version": pins.container_toolkit or "",
        "gridready_nccl_version": pins.nccl,
        "gridready_nccl_cuda": pins.cuda,
        "gridready_nccl_tests_version": pins.nccl_tests,
        "gridready_rdma_enabled": bool(rdma_nics),
        "gridready_rdma_stack": pins.rdma_stack,
        # nvidia-peermem only where DMA-BUF cannot carry GPUDirect RDMA (matrix.gpudirect_path)
        "gridready_rdma_peermem": bool(rdma_nics) and node_group.gpudirect_rdma
        and versions.gpudirect_path(pins.driver_branch, pins.rdma_stack) == "peermem",
        # one rule with certification's iommu gate (gridready.spec.iommu): iommu=pt wherever the gate would fail
        # a translating IOMMU, and wherever GPUDirect RDMA runs
        "gridready_host_tuning_iommu_passthrough": iommu_rule.passthrough_wanted(
            spec.certification.host.iommu, bool(rdma_nics) and node_group.gpudirect_rdma),
        # bare-metal HGX: ACS redirection above the GPUs/NICs stops provision, as certification's acs gate would
        # quarantine the node (a virtual machine or container records only: the role decides at run time)
        "gridready_host_tuning_acs": "expect_disabled"
        if spec.certification.host.acs == "disabled" and sku.nvswitch and node_group.gpus_per_node == HGX_GPUS
        else "record",
        "gridready_probe_runtime_enabled": pins.probe_torch is not None,
        "gridready_probe_runtime_torch_version": pins.probe_torch or "",
        "gridready_probe_runtime_pip_args": pins.pip_index_args(),
        "gridready_rdma_roce_nics": [{"netdev": n.netdev, "mtu": n.mtu or 0} for n in node_group.nics
                                     if n.kind == "roce" and n.netdev],
    }
    if branch is not None and pins.cuda in versions.cuda:  # an unsupported pin never gets here (invoke validate)
        out["gridready_nvidia_driver_open_kernel_modules"] = branch.open_kernel_modules
        out["gridready_nvidia_driver_min_version"] = versions.min_driver(pins.driver_branch, pins.cuda)
    if pins.rdma_stack == "distro" and rdma_nics:
        out["gridready_rdma_min_rdma_core"] = versions.min_rdma_core(node_group.os)
    checksum = matrix.load().nccl_tests_checksum(pins.nccl_tests)
    if checksum:
        out["gridready_nccl_tests_checksum"] = checksum
    bundled = matrix.load().nccl_tests_bundled(pins.nccl_tests)
    if bundled is not None:  # the role takes it unless the inventory names a tarball or a checksummed URL
        out["gridready_nccl_tests_bundled_tarball"] = str(bundled[0])
        out["gridready_nccl_tests_bundled_checksum"] = bundled[1]
    if pins.rdma_stack == "doca" and pins.doca_ofed:
        out["gridready_rdma_doca_version"] = pins.doca_ofed
    if pins.package_mirror:
        out["gridready_nvidia_driver_repo_url"] = pins.package_mirror
    if pins.package_mirror_key_fingerprint:
        pin = pins.package_mirror_key_fingerprint
        out["gridready_nvidia_driver_repo_key_fingerprint"] = pin.replace(" ", "").upper()
    return out
