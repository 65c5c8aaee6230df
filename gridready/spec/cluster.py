"""pydantic models of `inventories/<customer>/cluster.yml`, the one description of a customer's fleet.

`invoke schema` prints the JSON Schema of ClusterSpec; field descriptions double as documentation.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from gridready import catalog
from gridready.spec.bastion import Bastion
from gridready.spec.certification import CertificationSpec
from gridready.spec.names import ANSIBLE_NAME, SLUG, require_unique
from gridready.spec.serving import ServingSpec


class Nic(BaseModel):
    """One HCA or NIC of a node (InfiniBand, RoCE or plain Ethernet)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="RDMA device (mlx5_0) or interface name")
    kind: Literal["infiniband", "roce", "ethernet"] = "infiniband"
    rate_gbps: PositiveInt = Field(description="expected link rate in Gb/s (400 for NDR, 200 for HDR)")
    rail: int | None = Field(None, ge=0, description="rail index; GPU i is expected nearest to rail i")
    netdev: str | None = Field(None, description="kernel interface of the port (ibp12s0, ens1f0np0)")
    gid_index: int | None = Field(None, ge=0, description="RoCE: the GID index NCCL should use")
    mtu: PositiveInt | None = Field(None, description="RoCE: expected MTU")


class NodeGroup(BaseModel):
    """A group of identical GPU nodes; `name` is the Ansible group in hosts.yml."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=ANSIBLE_NAME, description="Ansible group in hosts.yml")
    sku: str = Field(description="catalog SKU name or PCI device id, e.g. H200-SXM-141GB or 0x2335")
    gpus_per_node: PositiveInt = Field(8, le=16)
    platform: Literal["baremetal", "passthrough", "slice"] = Field(
        "baremetal", description="bare metal, GPUs passed through to a VM, or a slice (2 or 4 GPUs of an 8-GPU "
                                 "NVSwitch board on bare metal, a Slurm allocation); with gpus_per_node a shape")
    os: Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12", "debian-13"] = "ubuntu-22.04"
    nics: list[Nic] = Field(default_factory=list, description="HCAs/NICs every node of the group has")
    mgmt_interface: str | None = Field(None, description="interface for NCCL/Gloo bootstrap sockets")
    gpudirect_rdma: bool = Field(True, description="load nvidia-peermem and expect GDR over the HCAs")

    @field_validator("sku")
    @classmethod
    def _known_sku(cls, value: str) -> str:
        if catalog.lookup(value) is None:
            raise ValueError(f"unknown SKU {value!r}; known: {', '.join(catalog.known_keys())}")
        return value

    @property
    def catalog_sku(self) -> catalog.Sku:
        sku = catalog.lookup(self.sku)
        assert sku is not None  # validated above
        return sku

    @property
    def nic_bandwidth_gbytes(self) -> float:
        """Aggregate NIC bandwidth of one node in GB/s (8 x 400 Gb/s = 400 GB/s)."""
        return sum(n.rate_gbps for n in self.nics if n.kind != "ethernet") / 8

    @model_validator(mode="after")
    def _known_shape(self) -> NodeGroup:
        sku = self.catalog_sku
        if sku.shapes and sku.shape(self.gpus_per_node, self.platform) is None:
            raise ValueError(f"{sku.name} does not come as {self.gpus_per_node} GPUs {self.platform}; catalog "
                             f"shapes: {sku.shape_names()} (gpus_per_node, platform)")
        return self

    @model_validator(mode="after")
    def _unique_nics(self) -> NodeGroup:
        require_unique((n.name for n in self.nics), "NIC names")
        require_unique((n.netdev for n in self.nics if n.netdev), "NIC netdevs")
        return self


class SoftwarePins(BaseModel):
    """Versions every node is provisioned to; checked against gridready/data/version_matrix.yml."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    driver_branch: str = Field("580", pattern=r"^[0-9]{3}$", description="NVIDIA driver branch (open modules)")
    driver_version: str | None = Field(
        None, pattern=r"^[0-9]{3}\.[0-9]+(?:\.[0-9]+)?$",
        description="exact driver release of the branch every node gets (e.g. 580.95.05); null: the newest the "
                    "repository offers when a node is first provisioned (nodes provisioned later may then differ)")
    cuda: str = Field("13.0", pattern=r"^[0-9]+\.[0-9]+$")
    dcgm_major: int = Field(4, ge=3, le=4)
    dcgm_version: str | None = Field(
        None, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="exact DCGM release every node gets and keeps (held; e.g. 4.5.0, of dcgm_major); null: the newest "
                    "the repository offers when a node is first provisioned (nodes provisioned later may then differ)")
    container_toolkit: str | None = Field(
        None, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="exact NVIDIA Container Toolkit release every node gets and keeps (held; e.g. 1.18.0); null: the "
                    "newest the repository offers when a node is first provisioned")
    nccl: str = Field("2.28.9", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    nccl_tests: str = Field("2.17.6", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    rdma_stack: Literal["distro", "doca"] = "distro"
    doca_ofed: str | None = Field(None, description="DOCA-OFED version when rdma_stack is doca")
    package_mirror: str | None = Field(None, description="mirror URL of the NVIDIA repository for air-gapped sites "
                                       "(http, https or file)")
    package_mirror_key_fingerprint: str | None = Field(
        None, pattern=r"^(?:[0-9A-Fa-f]{4} ?){10}$|^[0-9A-Fa-f]{64}$",
        description="OpenPGP fingerprint of the mirror's signing key (40 hex digits, V4; 64 for V6); required for a "
                    "plain-http mirror, checked on every node against the downloaded key")
    python_index: str | None = Field(
        None, description="PEP 503 simple index (a PyPI mirror) that the nodes' pip installs Ray, vLLM, SGLang and "
                          "huggingface_hub from, for air-gapped sites (https; http only with python_index_plain_http)")
    python_index_plain_http: bool = Field(
        False, description="accept an http:// python_index (pip's --trusted-host for its host): the packages then "
                           "come unauthenticated, so only on an isolated network you control")
    probe_torch: str | None = Field(
        "2.9.1", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="PyTorch release provision installs for certification's GPU gates (GEMM, HBM, H2D, SDC, goodput), "
                    "from python_index or PyPI; null installs none (bring your own: gridready_certify_python)")

    @model_validator(mode="after")
    def _dcgm_release_of_the_major(self) -> SoftwarePins:
        if self.dcgm_version and int(self.dcgm_version.split(".")[0]) != self.dcgm_major:
            raise ValueError(f"dcgm_version {self.dcgm_version} is not a release of dcgm_major {self.dcgm_major}")
        return self

    def pip_index_args(self) -> list[str]:
        """`--index-url <mirror>` (and `--trusted-host <host>` for an accepted plain-http one), else nothing."""
        if not self.python_index:
            return []
        args = ["--index-url", self.python_index]
        if self.python_index.lower().startswith("http://") and self.python_index_plain_http:
            args += ["--trusted-host", urlsplit(self.python_index).hostname or ""]
        return args


class ClusterSpec(BaseModel):
    """The whole of cluster.yml."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, hide_input_in_errors=True)

    customer: str = Field(pattern=SLUG, description="slug: inventory dir, artifacts folder, Pulumi stack")
    description: str = ""
    node_groups: list[NodeGroup] = Field(min_length=1)
    software: SoftwarePins = Field(default_factory=SoftwarePins)
    certification: CertificationSpec = Field(default_factory=CertificationSpec)
    serving: ServingSpec = Field(default_factory=ServingSpec)
    bastion: Bastion | None = Field(None, description="jump host every SSH connection to the nodes goes through "
                                                      "(ProxyJump, its host key checked)")

    @model_validator(mode="after")
    def _unique_groups(self) -> ClusterSpec:
        require_unique((g.name for g in self.node_groups), "node group names")
        return self

    def group(self, name: str) -> NodeGroup | None:
        return next((g for g in self.node_groups if g.name == name), None)
