"""Per-SKU facts keyed by PCI device id: peaks from datasheets, floors from published measurements.

Every figure carries its source in a comment. Abbreviations:
  DS-H100  NVIDIA H100 Tensor Core GPU datasheet (SXM5/PCIe/NVL columns, dense figures = half the sparse ones)
  DS-H200  NVIDIA H200 Tensor Core GPU datasheet (SXM column)
  FIX-H200 ../shared/fixtures/h200x2/README.md, measured on 2x H200 SXM on 2026-11-30 (copied to tests/fixtures)
  ANCH     ../shared/reference/certify-anchors.md (section given), which cites the upstream projects
  FIX-H200x1 ../shared/fixtures/h200x1/README.md: one H200 passed through to a VM, fabric state N/A, no NVLinks exposed
  FM       NVIDIA Fabric Manager User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide
           (fabric manager exists for NVSwitch-based HGX/DGX; virtualization models: full passthrough, shared NVSwitch
           with 1/2/4/8-GPU partitions whose fabric manager runs in a service VM)
  GP-H200  docs/examples/h200x1/issue30: the goodput probe on one H200, 544.4 model TFLOP/s (55% MFU); an
           independent nn.TransformerEncoderLayer model 513.2 in the same run; issue 30's reference 514 (eager, 0.94B)
  AIE-NVS  NVIDIA AI Enterprise, "NVIDIA NVSwitch", https://docs.nvidia.com/ai-enterprise/release-8/8.0/infra-software/
           vgpu/features/nvswitch.html: NVSwitch on the HGX H100 and HGX H200 8-GPU baseboards
Floors are what a healthy part must reach under gridready's own probes; the spec may override any of them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
P2P_COLLECTIVES: tuple[str, ...] = ("alltoall", "sendrecv")  # point-to-point: NCCL's algorithm choice does not apply


class NcclFloor(BaseModel):
    """busbw floor of one nccl-tests collective inside one node for a GPU count and algorithm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int
    algo: str  # "ring" (NCCL_NVLS_ENABLE=0) or "nvls"
    floor_gbps: float
    reference_gbps: float  # the published or measured figure the floor was derived from
    collective: Collective = "all_reduce"
    source: str = ""
    exact: bool = False  # holds for exactly `gpus` GPUs, never for more (bridged pairs: more GPUs ring over PCIe)


# baremetal: the whole board in this OS; passthrough: GPUs passed through to a VM; slice: 2 or 4 GPUs of an 8-GPU
# NVSwitch board given to this OS on bare metal (a Slurm allocation, a container with some of the board's GPUs).
Platform = Literal["baremetal", "passthrough", "slice"]


class NodeShape(BaseModel):
    """One way a SKU is sold as a node: GPU count and platform, and what that shape makes checkable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int
    platform: Platform
    nvswitch: bool  # NVSwitches reachable: fabric state must read Completed/Success
    fabric_manager_on_node: bool  # the nvidia-fabricmanager unit runs in this OS (in VMs: in the host or service VM)
    nvlink_links: int  # active NVLinks per GPU this shape exposes (0: a slice without NVLink)
    source: str
    peer_links: int | None = None  # NVLinks joining one GPU pair where fewer than all (direct-connect boards)

    @property
    def label(self) -> str:
        return f"{self.gpus} GPU{'s' if self.gpus > 1 else ''} {self.platform}"


class Sku(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    device_id: str = Field(pattern=r"^0x[0-9a-f]{4}$")
    aliases: tuple[str, ...] = ()
    memory_gib: float
    nvlink_links: int  # links that are active on a healthy part (0: no NVLink)
    nvlink_link_gbps: float  # GB/s per link, one direction
    nvswitch: bool  # HGX baseboard with NVSwitch (fabric manager required)
    pcie_gen: int
    pcie_width: int
    pcie_peak_gbps: float  # GB/s one direction, raw link rate
    hbm_peak_tbps: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float
    power_limit_w: float
    max_sm_clock_mhz: int
    max_mem_clock_mhz: int
    # floors for gridready's probes
    bf16_gemm_floor_tflops: float
    fp8_gemm_floor_tflops: float
    hbm_copy_floor_tbps: float  # device-to-device copy, bytes read + written
    h2d_floor_gbps: float  # pinned host<->device, each direction
    peer_floor_gbps: float  # GPU->GPU copy over NVLink (0 where no NVLink)
    nccl_floors: tuple[NcclFloor, ...] = ()
    shapes: tuple[NodeShape, ...] = ()
    # training goodput probe (probe/goodput.py: 0.97B decoder, 16,384 tokens per step): model TFLOP/s per GPU
    goodput_floor_tflops: float | None = None
    goodput_source: str = ""
    max_gpu_temp_c: float = 85.0  # ANCH 3.8: SI 75 C at idle, ME example 84 under load
    max_mem_temp_c: float = 95.0  # ANCH 3.8: SI memory 95 C

    @property
    def nvlink_peak_gbps(self) -> float:
        return self.nvlink_links * self.nvlink_link_gbps

    def shape(self, gpus: int, platform: str = "baremetal") -> NodeShape | None:
        return next((s for s in self.shapes if s.gpus == gpus and s.platform == platform), None)

    def shape_names(self) -> str:
        return ", ".join(s.label for s in self.shapes)

    def nccl_floor(self, gpus: int, algo: str, collective: str = "all_reduce",
                   nvswitch: bool = False) -> NcclFloor | None:
        """The floor for exactly this collective, GPU count and algorithm, else the nearest smaller count; the
        point-to-point collectives (alltoall, sendrecv) take their floor whatever the algorithm.

        `nvswitch`: the GPUs hang on a non-blocking NVSwitch board (the full board or a 2/4-GPU slice of it). There
        every GPU keeps its full NVLink bandwidth whatever the GPU count, and nccl-tests' busbw factors ((n-1)/n,
        2(n-1)/n, 1: doc/PERFORMANCE.md) normalise the count away, so without a figure for exactly this count the
        floor is the LOWEST published floor of the board for that collective at any count (a slice of 4 takes
        the 8-GPU alltoall floor; never the figures of the 4-GPU boards without NVSwitch). Ring and point-to-point
        only: NVLS reduces in the switch, its algbw is the link rate and its busbw grows with 2(n-1)/n, so an
        8-GPU NVLS figure does not hold for fewer GPUs."""
        p2p = collective in P2P_COLLECTIVES
        same = [f for f in self.nccl_floors if (p2p or f.algo == algo) and f.collective == collective]
        if nvswitch and self.nvswitch and (p2p or algo == "ring"):
            exact = [f for f in same if f.gpus == gpus]
            if exact:
                return exact[0]
            if not same:
                return None
            low = min(same, key=lambda f: f.floor_gbps)
            return low.model_copy(update={
                "gpus": gpus, "source": f"NVSwitch board, {gpus} of its GPUs keep the per-GPU NVLink bandwidth: the "
                f"board's lowest {collective} floor ({low.gpus} GPUs"
                + (f", {low.source}" if low.source else "") + ")"})
        matches = [f for f in same if f.gpus <= gpus and (f.gpus == gpus or not f.exact)]
        return max(matches, key=lambda f: f.gpus) if matches else None


    def derived_nccl_floor(self, gpus: int, collective: str, shape: NodeShape | None) -> NcclFloor | None:
        """A point-to-point (alltoall, sendrecv) floor from the board's own figures, for a shape no published figure
        fits: the board's lowest published floor of that collective, measured with every NVLink of a GPU carrying
        the traffic, scaled by the links this shape gives it. alltoall sends to every peer at once: (n-1) x the links
        joining a pair (all links on an NVSwitch board); sendrecv sends to one peer: the links joining a pair. A
        4-GPU HGX board (6 links per pair) keeps 18 of 18 for alltoall (the 8-GPU floor), 6 of 18 for sendrecv.
        None where the SKU has no NVLink or no published figure of the collective."""
        if collective not in P2P_COLLECTIVES or gpus < 2 or not self.nvlink_links:
            return None
        same = [f for f in self.nccl_floors if f.collective == collective and not f.exact]
        if not same:
            return None
        ref = min(same, key=lambda f: f.floor_gbps)
        full = self.nvlink_links
        pair = shape.peer_links if shape is not None and shape.peer_links else full
        links = min(full, pair * (gpus - 1)) if collective == "alltoall" else min(full, pair)
        return NcclFloor(gpus=gpus, algo=ref.algo, collective=ref.collective,
                         floor_gbps=round(ref.floor_gbps * links / full, 1),
                         reference_gbps=round(ref.reference_gbps * links / full, 1),
                         source=f"derived from the board: its {ref.gpus}-GPU {collective} floor "
                                f"{ref.floor_gbps:g} GB/s over all {full} NVLinks x {links}/{full} links this shape "
                                f"gives a GPU's {collective} traffic" + (f" ({ref.source})" if ref.source else ""))


_NVLINK4_LINK_GBPS = 26.5625  # FIX-H200: `nvidia-smi nvlink -s` prints 26.562 GB/s per link (NVLink4, 18 x = 478 raw)
_GEN5_X16_GBPS = 63.0  # PCIe 5.0: 32 GT/s x 16 lanes x 128/130 = 63 GB/s one direction (ANCH 3.5: "63 GB/s Gen5 x16")

# Ring all-reduce on NVLink4 (NVLS off): 2 GPUs 347.0 GB/s peak (FIX-H200 nccl-tests @4GiB), 8 GPUs 365.6-370
# (ANCH 3.2: ml-eng network/README.md L929, sjeaugey "370"). Floors are 90% of the reference.
# NVLS, 8 GPUs: 473-482 measured (ANCH 3.2); floor 460 as Azure NHC check_nccl_allreduce (ANCH 3.2, AZ).
# The other collectives, 2 GPUs, ring, NVLS off: busbw peaks of nccl-tests 2.19.6 on the lent 2 x H200 VM (issue 17,
# "measured busbw differs by collective": all_gather ~313, reduce_scatter ~296, sendrecv ~366 GB/s; issue 21 re-measures
# them with the probe's -q -x capture); floors 90% of the reference, as for all_reduce. busbw factors per collective:
# ANCH 3.2 / nccl-tests doc/PERFORMANCE.md (all_gather, reduce_scatter, alltoall (n-1)/n; sendrecv 1).
# 8 GPUs (ML-ENG-8): all_gather 361.4, reduce_scatter 362.9 GB/s on 8 x H200, nccl-tests `-b 16G -e 16G -g 8` with
# NCCL's default (NVLS allowed); NCCL ran them on its Ring path, NVLS being an all-reduce algorithm there, so the
# figure holds for both `nccl.algo` settings. alltoall, 8 GPUs: 320 GB/s busbw on NVLink4 (H100) (GTC25-A2A); H200
# sits on the same NVLink4 NVSwitch baseboard (AIE-NVS). sendrecv, 8 GPUs: "effective NVLink bandwidth of 370GB/s,
# which you can observe as BusBw when running non-allreduce operations" on 8 x H100 (NCCL maintainer, NT-212).
# alltoall and sendrecv are point-to-point (nccl-tests src/alltoall.cu: ncclAlltoAll or grouped ncclSend/ncclRecv;
# src/sendrecv.cu: ncclSend/ncclRecv), so NCCL's collective algorithm (Ring, NVLS) does not apply to them
# (doc/PERFORMANCE.md: the busbw factor is "independent of the algorithm used ... as long as they use point-to-point
# operations"): their floors serve every `nccl.algo` (Sku.nccl_floor).
# No credible public alltoall figure for 2 or 4 GPUs (the one public 4 x H100 alltoall_perf output, NCCL-2169, is an
# open performance question, not a reference): the 4-GPU boards without NVSwitch derive theirs from the board's own
# figures (Sku.derived_nccl_floor: the 8-GPU floor scaled by the NVLinks a GPU's traffic rides; the spec may still set
# certification.floors.nccl_collectives_gbps.alltoall). A 2- or 4-GPU slice of an 8-GPU NVSwitch board
# (platform slice or passthrough) keeps each GPU's 18 NVLinks into the switch, so it takes the board's floors
# (Sku.nccl_floor with nvswitch=True): the lowest published floor of that collective at any GPU count.
#   ML-ENG-8  stas00/ml-engineering network/README.md "NVLink SHARP" table (8 x H200, nccl-tests, 16 GiB),
#             https://github.com/stas00/ml-engineering/blob/master/network/README.md
#   GTC25-A2A NVIDIA GTC 2025 session S72583, slide "All-to-all Communication Bandwidth": "NCCL Tests Alltoall Bus
#             Bandwidth in GB/s, 8 GPUs", NVLink4 (H100) 320, https://www.nvidia.com/en-us/on-demand/session/gtc25-s72583/
#             (the slide is reproduced in ml-engineering network/images/all-to-all-bw-2025.png)
#   NT-212    NVIDIA/nccl-tests issue 212 "H100 all reduce performance is poor", sjeaugey's answer,
#             https://github.com/NVIDIA/nccl-tests/issues/212
#   NCCL-2169 https://github.com/NVIDIA/nccl/issues/2169 "alltoall throughput drops sharply above 512 MB message size"
_ISSUE17 = "2 x H200 nccl-tests 2.19.6 busbw peak, measured (tests/fixtures/h200x2)"
_ML_ENG_8 = "8 x H200 nccl-tests 16 GiB busbw (ml-engineering network/README.md)"
_GTC25_A2A = "8 x H100 NCCL Tests alltoall busbw (NVIDIA GTC25 S72583)"
_NT_212 = "8 x H100 non-allreduce busbw (NCCL maintainer, nccl-tests issue 212)"
_NVLINK4_NCCL = (
    NcclFloor(gpus=2, algo="ring", collective="all_gather", floor_gbps=282.0, reference_gbps=313.0, source=_ISSUE17),
    NcclFloor(gpus=2, algo="ring", collective="reduce_scatter", floor_gbps=266.0, reference_gbps=296.0,
              source=_ISSUE17),
    NcclFloor(gpus=2, algo="ring", collective="sendrecv", floor_gbps=329.0, reference_gbps=366.0, source=_ISSUE17),
    *(NcclFloor(gpus=8, algo=algo, collective="all_gather", floor_gbps=325.0, reference_gbps=361.4, source=_ML_ENG_8)
      for algo in ("ring", "nvls")),
    *(NcclFloor(gpus=8, algo=algo, collective="reduce_scatter", floor_gbps=327.0, reference_gbps=362.9,
                source=_ML_ENG_8) for algo in ("ring", "nvls")),
    NcclFloor(gpus=8, algo="ring", collective="alltoall", floor_gbps=288.0, reference_gbps=320.0, source=_GTC25_A2A),
    NcclFloor(gpus=8, algo="ring", collective="sendrecv", floor_gbps=333.0, reference_gbps=370.0, source=_NT_212),
    NcclFloor(gpus=2, algo="ring", floor_gbps=312.0, reference_gbps=347.0),
    NcclFloor(gpus=4, algo="ring", floor_gbps=320.0, reference_gbps=356.0),  # interpolated 2..8 GPUs (derived)
    NcclFloor(gpus=8, algo="ring", floor_gbps=330.0, reference_gbps=367.0),
    NcclFloor(gpus=8, algo="nvls", floor_gbps=460.0, reference_gbps=476.5),
)

_HGX_SRC = "AIE-NVS, FM: HGX 8-GPU baseboard with NVSwitch, fabric manager on the host"
# HGX SXM nodes (H100 and H200 alike): 8 GPUs on NVSwitch, 4 GPUs joined directly (no NVSwitch, so no fabric manager),
# and VM slices of an 8-GPU baseboard (FM: full passthrough or shared-NVSwitch partitions of 1/2/4/8 GPUs).
_HGX_SHAPES = (
    NodeShape(gpus=8, platform="baremetal", nvswitch=True, fabric_manager_on_node=True, nvlink_links=18,
              source=_HGX_SRC),
    NodeShape(gpus=4, platform="baremetal", nvswitch=False, fabric_manager_on_node=False, nvlink_links=18,
              peer_links=6,
              source="DS-H200/DS-H100: HGX 4-GPU form factor, GPUs joined by NVLink without NVSwitch; FM covers "
                     "NVSwitch systems only; 18 links = 6 to each of the 3 peers (`nvidia-smi topo -m` NV6 on "
                     "4-GPU Hopper boards): a peer copy rides 6 links, about 133 GB/s"),
    NodeShape(gpus=8, platform="passthrough", nvswitch=True, fabric_manager_on_node=False, nvlink_links=18,
              source="FM: full passthrough / shared NVSwitch 8-GPU partition"),
    NodeShape(gpus=4, platform="passthrough", nvswitch=True, fabric_manager_on_node=False, nvlink_links=18,
              source="FM: shared NVSwitch 4-GPU partition"),
    NodeShape(gpus=2, platform="passthrough", nvswitch=True, fabric_manager_on_node=False, nvlink_links=18,
              source="FIX-H200: 2 GPUs in a VM, NV18, fabric state Completed/Success; FM 2-GPU partition"),
    NodeShape(gpus=1, platform="passthrough", nvswitch=False, fabric_manager_on_node=False, nvlink_links=0,
              source="FIX-H200x1: 1 GPU in a VM, fabric state N/A, `nvlink -s` empty; FM 1-GPU partition"),
    *(NodeShape(gpus=n, platform="slice", nvswitch=True, fabric_manager_on_node=True, nvlink_links=18,
                source=f"FM: {n} GPUs of the 8-GPU NVSwitch baseboard on bare metal (a Slurm allocation or container "
                       "slice); every GPU keeps its 18 links into the NVSwitches, the fabric manager runs on the host")
      for n in (2, 4)),
)
# PCIe cards (H100 PCIe, H100 NVL): 1 to 8 per server, NVLink bridges join pairs (12 links), never an NVSwitch.
_PCIE_SRC = "DS-H100 PCIe/NVL: PCIe card, 2-way NVLink bridge (600 GB/s = 12 links), no NVSwitch"
_PCIE_SHAPES = (
    NodeShape(gpus=1, platform="baremetal", nvswitch=False, fabric_manager_on_node=False, nvlink_links=0,
              source=_PCIE_SRC),
    *(NodeShape(gpus=n, platform="baremetal", nvswitch=False, fabric_manager_on_node=False, nvlink_links=12,
                source=_PCIE_SRC) for n in (2, 4, 8)),
    NodeShape(gpus=1, platform="passthrough", nvswitch=False, fabric_manager_on_node=False, nvlink_links=0,
              source=_PCIE_SRC),
    NodeShape(gpus=2, platform="passthrough", nvswitch=False, fabric_manager_on_node=False, nvlink_links=12,
              source=_PCIE_SRC + "; a bridged pair passed through together"),
)

SKUS: tuple[Sku, ...] = (
    Sku(
        name="H100-SXM5-80GB",
        device_id="0x2330",  # ANCH 0: 0x2330 = H100 SXM
        aliases=("h100", "h100-sxm", "h100-sxm5", "NVIDIA H100 80GB HBM3"),
        memory_gib=79.6,  # DS-H100 SXM: "80 GB" HBM3; docs/examples/h100x1: nvidia-smi memory.total 81559 MiB
        nvlink_links=18,  # ANCH 3.4: 18 active links
        nvlink_link_gbps=_NVLINK4_LINK_GBPS,
        nvswitch=True,
        pcie_gen=5,  # ANCH 3.5: LnkSta 32GT/s x16
        pcie_width=16,
        pcie_peak_gbps=_GEN5_X16_GBPS,
        hbm_peak_tbps=3.35,  # DS-H100 SXM; ANCH 3.9
        bf16_dense_tflops=989.0,  # DS-H100 SXM: 1,979 sparse
        fp8_dense_tflops=1979.0,  # DS-H100 SXM: 3,958 sparse
        power_limit_w=700.0,  # ANCH 3.8: DCGM targeted_power 700 W
        max_sm_clock_mhz=1980,  # ANCH 3.8: SI/OC 1980 MHz
        max_mem_clock_mhz=2619,  # ANCH 3.8: H100 2619 MHz
        bf16_gemm_floor_tflops=640.0,  # ~80% of 794.5 measured by mamf-finder (ANCH 3.9)
        fp8_gemm_floor_tflops=1100.0,  # ~78% of 1402.6 measured (ANCH 3.9)
        hbm_copy_floor_tbps=1.9,  # DCGM memory_bandwidth floor 1.905 TB/s (ANCH 3.1, diag-skus.yaml.in)
        h2d_floor_gbps=48.0,  # Azure NHC check_gpu_bw 48 GB/s (ANCH 3.5)
        peer_floor_gbps=335.0,  # Azure NHC P2P floor 335 GB/s (ANCH 3.4)
        nccl_floors=_NVLINK4_NCCL,
        shapes=_HGX_SHAPES,
        goodput_floor_tflops=385.0,  # derived: 75% of GP-H200's 514 reference; same GH100 die, clocks and 989 peak
        goodput_source="75% of 514 model TFLOP/s on H200 (the same GH100 die and clocks; not measured on H100)",
    ),
    Sku(
        name="H200-SXM-141GB",
        device_id="0x2335",  # ANCH 0; FIX-H200 `pci.device_id` 0x233510DE
        aliases=("h200", "h200-sxm", "NVIDIA H200"),
        memory_gib=140.4,  # FIX-H200: 143771 MiB total in nvidia-smi -q (141 GB)
        nvlink_links=18,  # FIX-H200: NV18
        nvlink_link_gbps=_NVLINK4_LINK_GBPS,
        nvswitch=True,
        pcie_gen=5,  # FIX-H200: sysfs 32.0 GT/s PCIe, width 16
        pcie_width=16,
        pcie_peak_gbps=_GEN5_X16_GBPS,
        hbm_peak_tbps=4.8,  # DS-H200 SXM
        bf16_dense_tflops=989.0,  # DS-H200 SXM: 1,979 sparse
        fp8_dense_tflops=1979.0,  # DS-H200 SXM: 3,958 sparse
        power_limit_w=700.0,  # FIX-H200: power.limit 700.00 W
        max_sm_clock_mhz=1980,  # FIX-H200: clocks.max.sm 1980 MHz
        max_mem_clock_mhz=3201,  # ANCH 3.8: H200 3201 MHz
        bf16_gemm_floor_tflops=600.0,  # FIX-H200: 710-800 measured; 75% of 800 as DCGM sets its floors (ANCH 3.1)
        fp8_gemm_floor_tflops=1020.0,  # FIX-H200: 1350-1372 measured, 75%
        hbm_copy_floor_tbps=3.3,  # FIX-H200: 4.05-4.17 TB/s measured (read+write), ~80%
        h2d_floor_gbps=48.0,  # FIX-H200: 55.4 measured; Azure NHC 48 GB/s (ANCH 3.5)
        peer_floor_gbps=335.0,  # FIX-H200: 395 GB/s GPU0->GPU1; Azure NHC 335 (ANCH 3.4)
        nccl_floors=_NVLINK4_NCCL,
        shapes=_HGX_SHAPES,
        goodput_floor_tflops=385.0,  # GP-H200: 75% of the 514 reference (544.4 measured by the probe)
        goodput_source="75% of 514 model TFLOP/s (544.4 measured on an H200, docs/examples/h200x1/issue30)",
    ),
    Sku(
        name="H100-NVL-94GB",
        device_id="0x2321",  # PCI ids database: 10de:2321 GH100 [H100 NVL]
        aliases=("h100-nvl",),
        memory_gib=94,  # DS-H100 NVL: 94 GB HBM3
        nvlink_links=12,  # ANCH 3.4 / AzNHC #162: PCIe/NVL parts have 12 links; the rest read inactive by design
        nvlink_link_gbps=25.0,  # DS-H100 NVL: NVLink bridge 600 GB/s bidirectional = 12 x 25 GB/s x 2
        nvswitch=False,
        pcie_gen=5,
        pcie_width=16,
        pcie_peak_gbps=_GEN5_X16_GBPS,
        hbm_peak_tbps=3.9,  # DS-H100 NVL
        bf16_dense_tflops=835.0,  # DS-H100 NVL: 1,671 sparse
        fp8_dense_tflops=1671.0,  # DS-H100 NVL: 3,341 sparse
        power_limit_w=400.0,  # DS-H100 NVL: 350-400 W
        max_sm_clock_mhz=1785,  # DS-H100 NVL boost clock (derived from the datasheet's peak figures)
        max_mem_clock_mhz=2619,
        bf16_gemm_floor_tflops=530.0,  # 75% of ~710 (scaled from the SXM measurement by dense peak, derived)
        fp8_gemm_floor_tflops=900.0,
        hbm_copy_floor_tbps=2.2,
        h2d_floor_gbps=48.0,  # same Gen5 x16 link as SXM (ANCH 3.5)
        peer_floor_gbps=200.0,  # bridge pair: 300 GB/s one direction peak, ~67% floor (derived)
        # the bridged pair only: with 4 or 8 cards a ring crosses PCIe between pairs, so no floor (the spec sets one)
        nccl_floors=(NcclFloor(gpus=2, algo="ring", floor_gbps=200.0, reference_gbps=260.0, exact=True),),
        shapes=_PCIE_SHAPES,
        goodput_floor_tflops=325.0,  # derived: 385 x 835/989 dense bf16 peak (DS-H100 NVL), not measured
        goodput_source="H200 floor scaled by dense bf16 peak 835/989 (derived, not measured)",
    ),
    Sku(
        name="H100-PCIe-80GB",
        device_id="0x2331",  # PCI ids database: 10de:2331 GH100 [H100 PCIe]
        aliases=("h100-pcie",),
        memory_gib=80,  # DS-H100 PCIe: 80 GB HBM2e
        nvlink_links=12,  # optional NVLink bridge, 12 links (ANCH 3.4 / AzNHC #162)
        nvlink_link_gbps=25.0,
        nvswitch=False,
        pcie_gen=5,
        pcie_width=16,
        pcie_peak_gbps=_GEN5_X16_GBPS,
        hbm_peak_tbps=2.0,  # DS-H100 PCIe: 2 TB/s
        bf16_dense_tflops=756.0,  # DS-H100 PCIe: 1,513 sparse
        fp8_dense_tflops=1513.0,
        power_limit_w=350.0,  # DS-H100 PCIe: 300-350 W
        max_sm_clock_mhz=1755,
        max_mem_clock_mhz=1593,
        bf16_gemm_floor_tflops=450.0,
        fp8_gemm_floor_tflops=800.0,
        hbm_copy_floor_tbps=1.2,
        h2d_floor_gbps=48.0,
        peer_floor_gbps=200.0,
        nccl_floors=(NcclFloor(gpus=2, algo="ring", floor_gbps=200.0, reference_gbps=260.0, exact=True),),
        shapes=_PCIE_SHAPES,
        goodput_floor_tflops=294.0,  # derived: 385 x 756/989 dense bf16 peak (DS-H100 PCIe), not measured
        goodput_source="H200 floor scaled by dense bf16 peak 756/989 (derived, not measured)",
    ),
)

_BY_ID = {s.device_id: s for s in SKUS}
_BY_NAME = {n.lower(): s for s in SKUS for n in (s.name, *s.aliases)}


def lookup(key: str) -> Sku | None:
    """A SKU by PCI device id (`0x2335`, `0x233510de`, `2335`) or by name or alias (case-insensitive)."""
    k = key.strip().lower()
    if k in _BY_NAME:
        return _BY_NAME[k]
    hexpart = k[2:] if k.startswith("0x") else k
    if len(hexpart) == 8:  # nvidia-smi prints 0x233510DE: device id then vendor id
        hexpart = hexpart[:4]
    return _BY_ID.get(f"0x{hexpart}")


def known_keys() -> list[str]:
    return sorted([s.device_id for s in SKUS] + [s.name for s in SKUS])
