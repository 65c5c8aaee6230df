"""Expectations for one node: the catalog's SKU facts, overridden by the customer's spec (most specific wins)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gridready import catalog
from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.spec.certification import CertificationSpec

# spec floor name -> catalog attribute
_FLOOR_ATTR = {
    "bf16_gemm_tflops": "bf16_gemm_floor_tflops",
    "fp8_gemm_tflops": "fp8_gemm_floor_tflops",
    "hbm_copy_tbps": "hbm_copy_floor_tbps",
    "h2d_gbps": "h2d_floor_gbps",
    "peer_gbps": "peer_floor_gbps",
}


@dataclass(frozen=True)
class Expectations:
    node: str
    sku: catalog.Sku
    gpus: int
    spec: CertificationSpec
    driver_branch: str | None = None  # SoftwarePins.driver_branch, e.g. "580"
    gpudirect_rdma: bool = True
    rdma_stack: str | None = None  # SoftwarePins.rdma_stack: distro (inbox) | doca; None: not known
    nics: tuple[str, ...] = ()  # HCA names the node group declares (mlx5_0 ...)
    platform: str = "baremetal"  # NodeGroup.platform: baremetal | passthrough

    @property
    def shape(self) -> catalog.NodeShape | None:
        """The catalog's shape for this GPU count and platform (None: the SKU is not sold that way)."""
        return self.sku.shape(self.gpus, self.platform)

    def shape_error(self, gate: str) -> GateResult:
        return self.result(gate, GateStatus.ERROR, f"{self.gpus} x {self.sku.name} {self.platform} is not a shape the "
                           f"catalog knows ({self.sku.shape_names()}): what this gate expects is unknown")

    def not_applicable(self, gate: str, why: str) -> GateResult:
        """A gate the node's shape makes meaningless: reported `skipped` with `n/a: <why>`, never passed."""
        return self.result(gate, GateStatus.SKIPPED, f"n/a: {why}", required=False)

    def floor(self, name: str) -> Expected:
        """A spec override (source 'spec') or the catalog floor (source 'catalog: <sku>')."""
        override = getattr(self.spec.floors, name, None)
        if override is not None:
            return Expected(floor=override, source="spec")
        base = getattr(self.sku, _FLOOR_ATTR[name])
        shape = self.shape
        if name == "peer_gbps" and shape is not None and shape.peer_links and self.sku.nvlink_links:
            # a direct-connect board: one pair rides only its share of the links (HGX 4-GPU: 6 of 18)
            return Expected(floor=round(base * shape.peer_links / self.sku.nvlink_links, 1),
                            source=f"catalog: {self.sku.name} {shape.label}, {base:g} GB/s x {shape.peer_links}/"
                                   f"{self.sku.nvlink_links} NVLinks per GPU pair")
        return Expected(floor=base, source=f"catalog: {self.sku.name}")

    def result(self, gate: str, status: GateStatus, reason: str, **kw: Any) -> GateResult:
        return GateResult(gate=gate, node=self.node, status=status, reason=reason, **kw)


def from_target(node: str, spec: CertificationSpec, target: Any, *, driver_branch: str | None = None,
                rdma_stack: str | None = None) -> Expectations:
    """`target` is a NodeGroup (lead's spec: .catalog_sku/.sku, .gpus_per_node, .nics, .gpudirect_rdma), a catalog
    Sku, or a SKU key ("h200", "0x2335"); with a Sku or key the GPU count defaults to 8."""
    gpus, nics, gdr, platform = 8, (), True, "baremetal"
    sku: catalog.Sku | None
    if isinstance(target, catalog.Sku):
        sku = target
    elif isinstance(target, str):
        found = catalog.lookup(target)
        if found is None:
            raise ValueError(f"unknown SKU {target!r}")
        sku = found
    else:
        sku = getattr(target, "catalog_sku", None) or catalog.lookup(str(target.sku))
        if not isinstance(sku, catalog.Sku):
            raise ValueError(f"unknown SKU {target.sku!r}")
        gpus = int(target.gpus_per_node)
        nics = tuple(n.name for n in getattr(target, "nics", []) or [])
        gdr = bool(getattr(target, "gpudirect_rdma", True))
        platform = str(getattr(target, "platform", "baremetal"))
    return Expectations(node=node, sku=sku, gpus=gpus, spec=spec, driver_branch=driver_branch,
                        gpudirect_rdma=gdr, rdma_stack=rdma_stack, nics=nics, platform=platform)
