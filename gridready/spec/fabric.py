"""FabricSettings (`certification.fabric` in cluster.yml): what the multi-node fabric phase checks and how.

The single-node `CertificationSpec` keeps the shared floors (`floors.multinode_busbw_gbps`,
`floors.hca_write_bw_gbits`) and `nccl.multinode_fraction_of_nic`; everything fabric-only lives here so that
`CertificationSpec` can hold it as `fabric: FabricSettings` (default: the defaults below).
Numbers and their sources: ../shared/reference/certify-anchors.md sections 3.2 and 3.3 (cited as ANCH).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

Algo = Literal["ring", "tree", "nvls", "collnet", "default"]
Collective = Literal["all_reduce", "all_gather", "reduce_scatter"]
# a share of the NIC bandwidth, not a percent (0.92, not 92); above 1 only where NVLS/tree beat the ring bound
Fraction = Annotated[float, Field(gt=0, le=1.2)]


def _all_reduce_only() -> list[Collective]:
    return ["all_reduce"]

# Error counters of /sys/class/infiniband/<hca>/ports/<p>/counters whose growth during the run fails the port.
# link_downed must not move at all (ANCH 3.3: "link_downed stays unchanged during the run").
DEFAULT_COUNTER_LIMITS: dict[str, int] = {
    "link_downed": 0,
    "link_error_recovery": 0,
    "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 0,
    "symbol_error": 10,
    "port_rcv_errors": 10,
    "port_rcv_remote_physical_errors": 10,
    "port_xmit_discards": 100,
}


class RoceSettings(BaseModel):
    """RoCE-only checks; a field left unset is not checked."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    gid_type: str | None = Field("RoCE v2", description="type of the GID at the NIC's gid_index")
    pfc_priorities: list[int] | None = Field(None, description="priorities with PFC enabled (mlnx_qos)")
    ecn_priorities: list[int] | None = Field(
        None, description="priorities with ECN enabled at both ends of DCQCN (roce_np and roce_rp)"
    )
    trust: Literal["dscp", "pcp"] | None = Field(
        None, description="QoS trust state of the RoCE NICs (mlnx_qos): dscp for routed RoCEv2 fabrics"
    )


class FabricSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool = Field(True, description="run the multi-node phase when at least 2 nodes are certified")
    collectives: list[Collective] = Field(
        default_factory=_all_reduce_only, description="collectives run over the whole certified set"
    )
    algo: Algo = Field("ring", description="NCCL_ALGO for the runs; ring is what the 92% floor is defined for")
    floor_fraction: dict[Algo, Fraction] = Field(
        # ring: healthy runs reach 91-96% of the NIC aggregate (NCCL maintainers: 46-48 GB/s per NDR400 NIC,
        # nccl-tests#290; DeepOps 2x DGX A100 94.27%, ANCH 3.2), so 92% sat inside the healthy range and failed
        # good runs; a node with one of 8 rails gone reaches at most 7 x 48 = 336 GB/s = 84% of 400: 85% keeps
        # that out and every healthy run in. Tree/NVLS/CollNet at two nodes go over 100% (p5 487 GB/s on 400).
        default_factory=lambda: {"ring": 0.85, "tree": 0.85, "nvls": 0.85, "collnet": 0.85, "default": 0.85},
        description="floor = fraction x per-node NIC bandwidth, per algorithm (a fraction, 0.85 for 85 %)",
    )
    floor_gbps: dict[Algo, NonNegativeFloat] = Field(
        default_factory=dict, description="absolute busbw floors per algorithm (override the fraction)"
    )
    min_bytes: PositiveInt = Field(1 << 30, description="the floor applies to the max busbw at sizes >= this")
    max_bytes: PositiveInt = Field(8 << 30)
    pair_min_bytes: PositiveInt = Field(2 << 30, description="pairwise runs sweep pair_min..max_bytes")
    pair_floor_fraction: float = Field(
        # pairs only find a broken node (half rate, socket fallback, a dead rail); the set run certifies the
        # bandwidth. GCP's cluster-health-scanner passes an 8 x 400G pair at 250 GB/s (a3-ultra/a4 nccl_healthcheck)
        0.625, gt=0, le=1.2, description="pairwise floor = min(the set floor, this x per-node NIC bandwidth)",
    )
    iters: PositiveInt = 20
    check_iters: PositiveInt = Field(1, le=100, description="nccl-tests -c N: correctness checks per size, in #wrong "
                                     "(-c 1 can miss a faulty node at scale: nccl-tests issue 172)")
    timeout_s: PositiveInt = Field(600, description="nccl-tests -T and the launcher's wall limit per run")
    require_gdr: bool = Field(True, description="NET/IB without GDRDMA warns when the group expects GDR")
    hca_bw_fraction: float = Field(
        0.9, gt=0, le=1, description="ib_write_bw floor = fraction x port rate (sichek 360 of 400, ANCH 3.3)"
    )
    hca_bw_bytes: PositiveInt = Field(1 << 23, description="ib_write_bw message size (8 MiB)")
    firmware: dict[str, str] = Field(
        default_factory=dict, description="minimum firmware per CA type, e.g. {MT4129: 28.39.1002}"
    )
    hca_pcie_gen: PositiveInt = Field(5, description="expected HCA endpoint link: Gen5 (32 GT/s)")
    hca_pcie_width: PositiveInt = 16
    counter_limits: dict[str, NonNegativeInt] = Field(default_factory=lambda: dict(DEFAULT_COUNTER_LIMITS))
    rail_alignment: bool = Field(True, description="GPU i must be nearest (PIX/PXB) to the rail-i NIC")
    roce: RoceSettings = Field(default_factory=RoceSettings)
    isolation: bool = Field(True, description="pairwise runs to name the bad node before the full-set run")
    exclude_hca_failures: bool = Field(
        True, description="a node failing an HCA gate is named from its port and skips the pairwise runs"
    )
    gdr_bw: bool = Field(True, description="run ib_write_bw --use_cuda per HCA where perftest is installed")
    parallel_pairs: bool = Field(True, description="run disjoint pairs of one round at the same time")
    socket_ifname: str | None = Field(None, description="NCCL_SOCKET_IFNAME; default the group's mgmt_interface")
    extra_env: dict[str, str] = Field(default_factory=dict, description="more -x VAR=value for mpirun")
    mpirun: str = "mpirun"
    all_reduce_perf: str = Field(
        "/opt/nccl-tests/current/bin/all_reduce_perf",
        description="nccl-tests binary on the nodes (where the gridready_nccl role installs the pinned build)",
    )
    launcher: Literal["mpirun", "torchrun"] = Field("mpirun", description="torchrun uses the probe's sweep")

    def floor_for(self, algo: str, nic_gbytes: float) -> tuple[float, str]:
        """(floor GB/s, where it came from) for one algorithm on nodes with `nic_gbytes` of NICs."""
        if algo in self.floor_gbps:
            return self.floor_gbps[algo], f"spec fabric.floor_gbps.{algo}"
        frac = self.floor_fraction.get(algo, self.floor_fraction.get("ring", 0.85))
        return round(frac * nic_gbytes, 2), f"{frac:.0%} of {nic_gbytes:g} GB/s per-node NIC bandwidth"
