"""The IOMMU rule, in one place for provision (the kernel argument it adds) and certification (the iommu gate).

Translating DMA through the IOMMU slows GPU peer-to-peer and GPUDirect RDMA traffic; passthrough (iommu=pt) keeps
the IOMMU for isolation without translating the devices' DMA, and intel_iommu=on is never added, as VT-d translation
makes the kernel enable ACS redirection on PCIe switch ports (NCCL troubleshooting guide, "PCI Access Control
Services (ACS)", https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html; kernel parameters
iommu=pt, iommu.passthrough, https://docs.kernel.org/admin-guide/kernel-parameters.html). The gate fails a node
whose IOMMU translates where the spec wants off or passthrough (certification.host.iommu, the default); provision
adds iommu=pt wherever the gate would demand it, and wherever GPUDirect RDMA runs, so no node group provisions clean
and is then quarantined by the gate. The node probe classifies the mode it finds (gridready.probe.sysfs.iommu_mode,
shipped to the node on its own); the rule over that mode lives here.
"""

from __future__ import annotations

from typing import Literal

Want = Literal["off_or_passthrough", "any"]

PASSTHROUGH_ARGS = ("iommu=pt",)  # the kernel arguments provision adds (GRUB drop-in of the host_tuning role)


def accepted(found: str, want: Want) -> bool:
    """The iommu gate's verdict on the mode a node runs in (off, passthrough or translated)."""
    return want == "any" or found != "translated"


def passthrough_wanted(want: Want, gpudirect_rdma: bool) -> bool:
    """Whether provision adds PASSTHROUGH_ARGS: wherever the gate fails a translating IOMMU, and wherever
    GPUDirect RDMA runs (its peer traffic should not be translated even where the gate only records)."""
    return want == "off_or_passthrough" or gpudirect_rdma

