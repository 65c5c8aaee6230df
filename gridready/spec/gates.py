"""Names of every certification gate, for the spec's `certification.waive` and `certification.not_applicable`.

gridready.certify implements the gates; tests/unit/test_layers.py keeps its gate tables and these names in step.
"""

from __future__ import annotations

# Single-node gates, in the order gridready.certify.judge runs them after `probe` (DESIGN.md section 4).
NODE_GATE_NAMES = (
    "probe", "software_versions", "min_versions", "services", "persistence_mode", "gpu_inventory", "pcie_link",
    "nvlink", "ecc", "row_remap", "xid", "clocks", "throttle", "power", "temperature", "iommu", "acs", "peermem",
    "dcgm", "gemm_bf16", "gemm_fp8", "hbm_bandwidth", "gpu_burn", "h2d_bandwidth", "peer_bandwidth",
    "nccl_allreduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall", "nccl_sendrecv",  # where chosen
    "sdc", "training_goodput",
)
# Gates judged over the whole fleet after the node gates (gridready.certify.judge.judge_fleet).
FLEET_GATE_NAMES = ("sdc_consensus",)
# Gates of the multi-node fabric phase.
FABRIC_GATE_NAMES = (
    "hca_present", "hca", "hca_port_state", "hca_phys_state", "hca_rate", "hca_link_layer", "hca_counters",
    "hca_firmware", "hca_pcie_link", "hca_gdr_bw", "gpu_nic_rail", "ibstat",
    "roce_gid", "roce_mtu", "roce_pfc", "roce_ecn", "roce_trust", "nccl_multinode_all_reduce", "fabric_isolation",
)

# Fleet outlier gates are named `outlier_<figure>` (gridready.certify.outliers).
OUTLIER_PREFIX = "outlier_"


def is_known_gate(name: str) -> bool:
    return (name in NODE_GATE_NAMES or name in FABRIC_GATE_NAMES or name in FLEET_GATE_NAMES
            or name.startswith(OUTLIER_PREFIX))
