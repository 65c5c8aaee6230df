"""Hardware profile of one simulated sandbox host: SKU, GPU count, HCAs and injected faults.

The fleet writes one profile per host as JSON to `/etc/gridready-sim/profile.json` (PROFILE_PATH); the
simulated tools in `sandbox/sim/` read it (stdlib only: they read the JSON, not these models).
`docs/simulator.md` says what each fault changes in which output.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandbox.sim import hardware

PROFILE_PATH = "/etc/gridready-sim/profile.json"  # on each host; tools honour env GRIDREADY_SIM_PROFILE
SYSFS_ROOT = "/var/lib/gridready-sim/sysfs"  # by `gridready-sim-sysfs`; probe: GRIDREADY_SYSFS_ROOT
FABRIC_PORT = 18515  # `gridready-sim-fabric` listens on the host's own 10.77.0.x address


class FaultKind(StrEnum):
    PCIE_DOWNTRAINED = "pcie_downtrained"  # GPU (or HCA) endpoint at Gen4 x8 instead of Gen5 x16
    NVLINK_INACTIVE = "nvlink_inactive"  # `links` NVLinks of one GPU inactive (default all 18)
    XID = "xid"  # an Xid `code` (79 fell off the bus, 48 DBE, 94 contained ECC ...) in dmesg
    ECC_UNCORRECTABLE = "ecc_uncorrectable"  # `count` uncorrectable DRAM ECC errors (volatile and aggregate)
    ROW_REMAP_PENDING = "row_remap_pending"  # remapped rows pending (a reset is needed)
    HW_SLOWDOWN = "hw_slowdown"  # clocks_event_reasons.hw_slowdown Active
    POWER_BRAKE = "power_brake"  # clocks_event_reasons.hw_power_brake_slowdown Active
    THERMAL_THROTTLE = "thermal_throttle"  # hw/sw thermal slowdown Active, GPU temperature high
    HCA_DOWN = "hca_down"  # HCA port Down / Disabled
    HCA_HALF_RATE = "hca_half_rate"  # HCA port Active at half its rate (400 -> 200 Gb/s)
    LOW_NCCL_BUSBW = "low_nccl_busbw"  # NCCL busbw multiplied by `factor` (default 0.6)
    DCGM_LEVEL3_FAILURE = "dcgm_level3_failure"  # dcgmi diag -r 3/4 fails a test on one GPU, exit 226
    SDC_BITFLIP = "sdc_bitflip"  # the GPU's bf16 GEMM output differs in one bit: its SDC digest is the minority
    SDC_NONDETERMINISTIC = "sdc_nondeterministic"  # the GPU's bf16 GEMM digest changes between repeats
    # host-level faults of the evidence the gates read (issue 34): a healthy node that must still certify, and
    # broken ones whose evidence was once missed
    PCIE_LIMITED_OTHER = "pcie_limited_other"  # the BMC's VGA logs "limited by 2.5 GT/s PCIe x1": not a GPU or NIC
    NCCL_CRASH = "nccl_crash"  # all_reduce_perf prints its rows up to 1 GiB, then an NCCL failure, exit 3
    XID_MIG = "xid_mig"  # an Xid `code` (default 95) on a MIG GPU instance: `NVRM: Xid (PCI:... GPU-I:05): 95`
    KERNEL_LOG_EMPTY = "kernel_log_empty"  # dmesg prints nothing and exits 0
    KERNEL_LOG_WRAPPED = "kernel_log_wrapped"  # the ring buffer wrapped: dmesg starts after the boot lines
    PCIE_REPLAYS = "pcie_replays"  # the GPU's PCIe replay counter at `count` (since its last reset)
    ACS_REDIRECT = "acs_redirect"  # ReqRedir+ CmpltRedir+ on the switch port above the GPU (`lspci -vvv` ACSCtl)


GPU_FAULTS = {
    FaultKind.PCIE_DOWNTRAINED,
    FaultKind.NVLINK_INACTIVE,
    FaultKind.XID,
    FaultKind.ECC_UNCORRECTABLE,
    FaultKind.ROW_REMAP_PENDING,
    FaultKind.HW_SLOWDOWN,
    FaultKind.POWER_BRAKE,
    FaultKind.THERMAL_THROTTLE,
    FaultKind.DCGM_LEVEL3_FAILURE,
    FaultKind.SDC_BITFLIP,
    FaultKind.SDC_NONDETERMINISTIC,
    FaultKind.XID_MIG,
    FaultKind.PCIE_REPLAYS,
    FaultKind.ACS_REDIRECT,
}
HCA_FAULTS = {FaultKind.HCA_DOWN, FaultKind.HCA_HALF_RATE}


class Fault(BaseModel):
    """One injected fault. GPU faults name `gpu` (default 0); HCA faults name `hca` (default the first)."""

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind
    gpu: int | None = Field(None, ge=0, description="target GPU index (GPU faults)")
    hca: str | None = Field(None, description="target HCA, e.g. mlx5_1 (HCA faults, pcie_downtrained)")
    code: int | None = Field(None, ge=1, description="Xid code (xid only): 79, 48, 94, 95, 63, 64, 74 ...")
    count: int | None = Field(None, ge=1, description="errors (ecc_uncorrectable), links (nvlink_inactive) or "
                                                     "replays (pcie_replays)")
    factor: float | None = Field(None, gt=0, le=1, description="bandwidth factor (low_nccl_busbw)")
    after_load: bool = Field(False, description="show only once a load tool (nccl-tests, dcgmi diag) ran: a fault "
                                               "the certification's own stress brings out")

    @model_validator(mode="after")
    def _targets(self) -> Fault:
        if self.kind in HCA_FAULTS and self.gpu is not None:
            raise ValueError(f"{self.kind.value} targets an HCA (hca:), not a GPU")
        if self.kind == FaultKind.PCIE_DOWNTRAINED and self.gpu is not None and self.hca is not None:
            raise ValueError("pcie_downtrained targets either a GPU or an HCA, not both")
        if self.kind not in HCA_FAULTS and self.kind != FaultKind.PCIE_DOWNTRAINED and self.hca is not None:
            raise ValueError(f"{self.kind.value} targets a GPU (gpu:), not an HCA")
        if self.code is not None and self.kind not in (FaultKind.XID, FaultKind.XID_MIG):
            raise ValueError("code: only applies to kinds xid and xid_mig")
        if self.factor is not None and self.kind != FaultKind.LOW_NCCL_BUSBW:
            raise ValueError("factor: only applies to kind low_nccl_busbw")
        counted = {FaultKind.ECC_UNCORRECTABLE, FaultKind.NVLINK_INACTIVE, FaultKind.PCIE_REPLAYS}
        if self.count is not None and self.kind not in counted:
            raise ValueError("count: only applies to ecc_uncorrectable, nvlink_inactive and pcie_replays")
        return self


class Hca(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="RDMA device name, e.g. mlx5_0")
    rate_gbps: int = Field(400, gt=0, description="port rate when healthy (400 = NDR 4X)")
    link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand"
    netdev: str = Field(description="the net device, e.g. ibp24s0 (IB) or enp24s0np0 (RoCE)")


class HardwareProfile(BaseModel):
    """What one sandbox host pretends to be; `host`/`address` feed the outputs and the fabric agent."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("sim-host", description="hostname printed in outputs and in the simulation marker")
    address: str | None = Field(None, description="the host's 10.77.0.x address (fabric agent binds it)")
    sku: str = Field("H200-SXM-141GB", description="a SKU of sandbox/sim/hardware.py: name, alias or PCI device id")
    gpus: int = Field(8, ge=1, le=8)
    platform: Literal["baremetal", "passthrough"] = Field(
        "baremetal", description="bare metal or GPUs passed through to a VM: with gpus, one of the SKU's node shapes")
    hcas: list[Hca] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    loaded_driver: str | None = Field(
        None, pattern=r"^\d{3}\.\d+(\.\d+)?$",
        description="kernel module version loaded at boot when it differs from the installed driver (a driver "
        "upgraded without a reboot: NVML mismatch); None means the installed driver's",
    )
    engine_timing: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="SIMULATED engine timing per engine (e.g. {triton-trtllm: {itl_ms: 16}}): "
        "timing keys of sandbox/engine/profile.py Profile, passed by the simulated tools of the sandbox's images")
    rdma_stack: Literal["inbox", "doca"] = Field(
        "inbox", description="the host's RDMA stack: inbox (the distribution's ib_core, no peer-memory API: "
        "`modprobe nvidia-peermem` fails with EINVAL) or doca (DOCA-OFED/MLNX_OFED, nvidia-peermem loads)",
    )

    @field_validator("sku")
    @classmethod
    def _known_sku(cls, v: str) -> str:
        found = hardware.lookup(v)
        if found is None:
            raise ValueError(f"unknown SKU {v!r}; known: {', '.join(hardware.known_keys())}")
        return found[0]  # normalised to the SKU's name

    @field_validator("address")
    @classmethod
    def _sandbox_address(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("10.77.0.") or v == "127.0.0.1"):
            raise ValueError("sandbox addresses are 10.77.0.x (or 127.0.0.1 in tests) only")
        return v

    @model_validator(mode="after")
    def _fault_targets(self) -> HardwareProfile:
        if self.facts["shapes"] and hardware.shape(self.sku, self.gpus, self.platform) is None:
            raise ValueError(f"{self.gpus} x {self.sku} {self.platform} is not a node shape of the SKU "
                             f"({hardware.shape_names(self.sku)})")
        names = [h.name for h in self.hcas]
        if len(set(names)) != len(names):
            raise ValueError("HCA names must be unique")
        for i, f in enumerate(self.faults):
            if f.gpu is not None and f.gpu >= self.gpus:
                raise ValueError(f"faults[{i}]: gpu {f.gpu} out of range (host has {self.gpus} GPUs)")
            if f.hca is not None and f.hca not in names:
                raise ValueError(f"faults[{i}]: unknown HCA {f.hca!r} (host has {names})")
            if f.kind in HCA_FAULTS and not names:
                raise ValueError(f"faults[{i}]: {f.kind.value} on a host without HCAs")
        return self

    @property
    def facts(self) -> dict[str, Any]:
        """The SKU's healthy values (sandbox/sim/hardware.py)."""
        return hardware.skus()[self.sku]

    def faults_of(self, kind: FaultKind) -> list[Fault]:
        return [f for f in self.faults if f.kind == kind]

    @property
    def healthy(self) -> bool:
        return not self.faults

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, exclude_none=True) + "\n"

    def write(self, path: Path) -> Path:
        """Write atomically where the tools read it (the fleet: <root>/etc/gridready-sim/profile.json)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, path: Path) -> HardwareProfile:
        return cls.model_validate(json.loads(path.read_text()))

    @classmethod
    def sample(
        cls,
        host: str = "sim-host",
        *,
        address: str | None = None,
        sku: str = "H200-SXM-141GB",
        gpus: int = 8,
        platform: Literal["baremetal", "passthrough"] = "baremetal",
        hcas: int = 8,
        link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand",
        faults: list[Fault] | None = None,
    ) -> HardwareProfile:
        """The default HGX host: 8 GPUs, 8 x 400G ConnectX-7 HCAs (one per GPU rail), no faults."""
        return cls(
            host=host,
            address=address,
            sku=sku,
            gpus=gpus,
            platform=platform,
            hcas=[sample_hca(i, link_layer) for i in range(hcas)],
            faults=list(faults or []),
        )


# PCI bus numbers of an HGX H100/H200 baseboard (GPU i and its rail HCA i share a PCIe switch); the simulated
# tools use the same table, so keep `sim/_common.py` in step.
GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HCA_BUSES = (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)


def sample_hca(i: int, link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand") -> Hca:
    bus = HCA_BUSES[i % len(HCA_BUSES)]
    netdev = f"ibp{bus}s0" if link_layer == "InfiniBand" else f"enp{bus}s0np0"
    return Hca(name=f"mlx5_{i}", rate_gbps=400, link_layer=link_layer, netdev=netdev)
