"""The `certification:` section of cluster.yml."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

from gridready.catalog import Collective
from gridready.spec.fabric import FabricSettings
from gridready.spec.names import IMAGE_REF

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class Profile(StrEnum):
    QUICK = "quick"  # DCGM level 1 at most, short sweeps
    STANDARD = "standard"  # DCGM level 3
    BURN_IN = "burn-in"  # DCGM level 4 and a long GEMM burn


class FailurePolicy(StrEnum):
    STOP = "stop"  # any uncertified node: exit 5
    QUARANTINE = "quarantine"  # quarantine it and go on while min_certified_nodes remain


class Floors(BaseModel):
    """Overrides of the catalog's floors for this customer (units in the names)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    bf16_gemm_tflops: NonNegativeFloat | None = None
    fp8_gemm_tflops: NonNegativeFloat | None = None
    hbm_copy_tbps: NonNegativeFloat | None = None
    h2d_gbps: NonNegativeFloat | None = None
    peer_gbps: NonNegativeFloat | None = None
    nccl_busbw_gbps: NonNegativeFloat | None = Field(None, description="single-node all-reduce busbw floor")
    nccl_collectives_gbps: dict[Collective, NonNegativeFloat] = Field(
        default_factory=dict, description="single-node busbw floor per other collective, e.g. {alltoall: 300}")
    multinode_busbw_gbps: NonNegativeFloat | None = Field(None, description="multi-node all-reduce busbw floor")
    hca_write_bw_gbits: NonNegativeFloat | None = Field(None, description="ib_write_bw per HCA, Gb/s")
    goodput_model_tflops: NonNegativeFloat | None = Field(
        None, description="training goodput probe: model TFLOP/s per GPU (catalog: goodput_floor_tflops)")


# ClusterMAX minimum versions (SemiAnalysis, https://www.clustermax.ai/minimum-versions.json, read 2026-12-01,
# ../shared/reference/next-anchors.md): one minimum per driver branch, DCGM 4.5.3. Its CUDA 13.1 is the toolkit;
# nvidia-smi prints the driver's CUDA API level (13.0 on 580.159.04), so `cuda` stays unset by default.
CLUSTERMAX_DRIVER_MINIMUMS = ["535.309.01", "570.211.01", "580.159.03", "590.48.01", "595.71.05"]
CLUSTERMAX_DCGM_MINIMUM = "4.5.3"


class MinVersions(BaseModel):
    """Minimum software versions (gate `min_versions`), with the severity a version below them gets."""

    model_config = ConfigDict(extra="forbid", strict=True)

    severity: Literal["fail", "warn", "off"] = Field(
        "warn", description="below a minimum (or a version not readable): fail blocks certification, warn reports, "
                            "off skips the gate")
    driver: list[str] = Field(
        default_factory=lambda: list(CLUSTERMAX_DRIVER_MINIMUMS),
        description="minimum per driver branch (major number); a branch not listed is below the table")
    dcgm: str | None = Field(CLUSTERMAX_DCGM_MINIMUM, description="minimum DCGM (the diag JSON's metadata.version)")
    cuda: str | None = Field(None, description="minimum CUDA version nvidia-smi prints (the driver's CUDA level)")
    nccl: str | None = Field(None, description="minimum NCCL the probe's torch reports")
    source: str = "ClusterMAX minimum versions (clustermax.ai/minimum-versions.json, read 2026-12-01)"

    @field_validator("driver")
    @classmethod
    def _one_per_branch(cls, value: list[str]) -> list[str]:
        branches = [v.split(".")[0] for v in value]
        if len(set(branches)) != len(branches):
            raise ValueError(f"one minimum per driver branch: {value}")
        return value


class NcclSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    collectives: list[Collective] = Field(
        default_factory=lambda: ["all_reduce"], min_length=1,
        description="nccl-tests collectives run and gated inside each node: all_reduce, all_gather, reduce_scatter, "
                    "alltoall, sendrecv (each with its own floor)")
    algo: Literal["ring", "nvls", "tree"] = Field("ring", description="ring sets NCCL_NVLS_ENABLE=0")
    min_bytes: PositiveInt = Field(1 << 30, description="the floor applies to the max busbw at sizes >= this")
    max_bytes: PositiveInt = Field(8 << 30, description="largest message of the sweep")
    best_of: PositiveInt = Field(2, description="best of N runs, against flaky fabrics")
    check_iters: PositiveInt = Field(
        1, le=100, description="nccl-tests `-c N`: correctness checks per size, counted in #wrong (a maintainer: at "
        "1000 nodes -c 1 often missed the faulty node, -c X isolated it: nccl-tests issue 172)")
    multinode_fraction_of_nic: float = Field(
        0.85, gt=0, le=1.2, description="multi-node floor as a share of the per-node NIC bandwidth (ring; a fraction, "
        "0.85 for 85 %): healthy runs reach 91-96% (46-48 GB/s per NDR400 NIC, nccl-tests#290); one of 8 rails lost "
        "caps a node at 84%"
    )


class HostSettings(BaseModel):
    """Host settings asserted and recorded, never changed (ANCH 3.10): the performance setting for bare metal."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    iommu: Literal["off_or_passthrough", "any"] = Field(
        "off_or_passthrough", description="IOMMU off or passthrough (iommu=pt); 'any' records it only"
    )
    acs: Literal["disabled", "any"] = Field(
        "disabled", description="ACS redirect off on bridges above GPUs/NICs (where lspci can read it)"
    )
    peermem: Literal["loaded", "any"] = Field("loaded", description="nvidia_peermem loaded (GPUDirect RDMA)")
    persistence_mode: bool = Field(True, description="persistence mode enabled on every GPU")


class Limits(BaseModel):
    """Error-counter limits (ANCH 3.4-3.8); the defaults follow the stricter anchors."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    sram_ce_aggregate: NonNegativeInt = Field(10_000, description="SRAM correctable, aggregate (AZ 10000)")
    sram_ue_aggregate: NonNegativeInt = Field(0, description="SRAM uncorrectable aggregate above this fails (AZ 0)")
    dram_ce_volatile: NonNegativeInt = Field(20_000_000, description="DRAM correctable since boot (AZ 20M)")
    remap_uncorrectable: NonNegativeInt = Field(512, description="rows remapped for UE (AZ/SI 512)")
    pcie_replays: NonNegativeInt = Field(
        80, description="PCIe replays per GPU during the certification run (the probe's counter window); DCGM's "
        "pcie plugin allows max_pcie_replays 80 while it runs. A count since reset above it only warns")
    nvlink_crc_replay: NonNegativeInt = Field(
        1000, description="NVLink CRC + replay counts during the certification run above this fail; any non-zero "
        "count (since reset) warns"
    )
    max_gpu_temp_c: float | None = Field(
        None, ge=30, le=120, description="override of the catalog's GPU temperature ceiling, degrees Celsius")


class ProbeJobs(BaseModel):
    """certification.runner kubernetes-job: the probe as a Kubernetes Job per node (docs/certification.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    image: str | None = Field(
        None, pattern=IMAGE_REF,
        description="the probe container's image: python3 and the node's NVIDIA tools (nvidia-smi through the "
                    "NVIDIA container toolkit, dcgmi, nccl-tests, torch); pin a digest in production")
    namespace: str = Field("gridready-certify", pattern=DNS_LABEL,
                           description="an existing namespace that admits privileged pods (Pod Security: privileged)")
    start_timeout_s: PositiveInt = Field(
        900, le=86400, description="how long a Job may wait for its pod to start (scheduling, image pull) on top of "
                                   "probe_timeout_s; a Job past both fails with DeadlineExceeded")
    poll_s: PositiveInt = Field(15, le=600, description="seconds between two reads of the Jobs' status")


class CertificationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    profile: Profile = Field(Profile.STANDARD, strict=False, description="quick | standard | burn-in")
    dcgm_level: int | None = Field(None, ge=1, le=4, description="default from the profile: 1, 3, 4")
    dcgm_precision: str = Field(
        "h", pattern=r"^[hsd]{1,3}$",
        description="DCGM diagnostic plugin GEMM precisions (level 3+): h = FP16 on the tensor cores, s = FP32, "
                    "d = FP64; DCGM offers no BF16/FP8 (the probe's gemm gates load those)")
    dcgm_outlier_tolerance_pcnt: float | None = Field(
        None, gt=0, le=100,
        description="level 3+ on DCGM 4.5+: the diagnostic plugin flags a GPU whose clocks or power differ from the "
                    "other GPUs' by more than this percentage (diagnostic.clocks_tolerance_pcnt and "
                    "power_tolerance_pcnt); unset: not passed, DCGM's default")
    waive: list[str] = Field(default_factory=list, description="gate names that do not block certification")
    not_applicable: list[str] = Field(
        default_factory=list, description="gates that cannot apply on these nodes (reported, not passed)"
    )
    floors: Floors = Field(default_factory=Floors)
    nccl: NcclSettings = Field(default_factory=NcclSettings)
    validity_hours: PositiveInt = Field(24, description="a passing certification stays valid this long")
    failure_policy: FailurePolicy = Field(FailurePolicy.QUARANTINE, strict=False)
    min_certified_nodes: PositiveInt = Field(1, description="with quarantine: fewer certified nodes is exit 5")
    outlier_mad_threshold: float = Field(
        4.0, gt=0, le=100, description="flag a node this many spreads below the median of the other nodes of its "
        "SKU group (spread: 1.4826 x their MAD, at least 3% of their median; certify/outliers.py)"
    )
    outlier_action: Literal["warn", "fail"] = "warn"
    gate_timeout_s: PositiveInt = Field(900, description="timeout for each probe step on the node")
    xid_allow: list[NonNegativeInt] = Field(
        default_factory=lambda: [13, 31, 43, 45], description="application Xids that do not fail the node"
    )
    sxid_allow: list[NonNegativeInt] = Field(
        default_factory=list, description="NVSwitch SXids that do not fail the node")
    host: HostSettings = Field(default_factory=HostSettings)
    limits: Limits = Field(default_factory=Limits)
    min_versions: MinVersions = Field(default_factory=MinVersions, description="minimum software versions")
    fabric: FabricSettings = Field(default_factory=FabricSettings, description="the multi-node fabric phase")
    probe_timeout_s: PositiveInt = Field(
        1800, description="wall-clock limit for the whole probe on one node (the role kills it after this)"
    )
    parallel: PositiveInt = Field(
        25, le=5000,
        description="nodes probed at once from the controller (Ansible forks for the certify playbook); each costs "
                    "the controller a worker process, its SSH connection and open files (docs/benchmarks.md, "
                    "'Fan-out'); certify checks the controller's limits before it starts")
    runner: Literal["ansible", "kubernetes-job"] = Field(
        "ansible", description="how the probe reaches the nodes: ansible (the certify playbook over SSH, "
                               "`parallel` at once) or kubernetes-job (a Job per node on the cluster of "
                               "serving.kubeconfig, every node at once; `jobs`)")
    jobs: ProbeJobs = Field(default_factory=ProbeJobs, description="the Job per node (runner kubernetes-job)")

    @field_validator("dcgm_precision")
    @classmethod
    def _each_precision_once(cls, value: str) -> str:
        if len(set(value)) != len(value):
            raise ValueError(f"each of h, s, d at most once: {value!r}")
        return value

    @model_validator(mode="after")
    def _quick_is_quick(self) -> CertificationSpec:
        if self.profile is Profile.QUICK and (self.dcgm_level or 1) > 1:
            raise ValueError("profile quick runs DCGM level 1 at most; use profile standard for level 2-3")
        return self

    def effective_dcgm_level(self) -> int:
        if self.dcgm_level is not None:
            return self.dcgm_level
        return {Profile.QUICK: 1, Profile.STANDARD: 3, Profile.BURN_IN: 4}[self.profile]
