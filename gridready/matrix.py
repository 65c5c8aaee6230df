"""The version matrix (gridready/data/version_matrix.yml): which driver, CUDA, DCGM, NCCL, nccl-tests, fabric manager
and OFED versions gridready provisions together, and a check of a spec's `software:` pins against it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gridready.errors import InvalidInput

if TYPE_CHECKING:
    from gridready.spec import ClusterSpec, SoftwarePins

MATRIX_PATH = Path(__file__).resolve().parent / "data" / "version_matrix.yml"
BUNDLED_DIR = Path(__file__).resolve().parent / "data" / "nccl-tests"  # nccl-tests releases gridready ships
OS_KEYS = {"debian-12": "Debian-12", "debian-13": "Debian-13", "ubuntu-22.04": "Ubuntu-22",
           "ubuntu-24.04": "Ubuntu-24"}


GpuDirectPath = Literal["dmabuf", "peermem", "none"]


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: list[str] = Field(min_length=1)


class DriverBranch(_Row):
    designation: Literal["long-term support", "production", "new feature"]
    status: Literal["supported", "end-of-life"]
    eol: str
    min_version: str
    cuda: list[str]
    dcgm_majors: list[int]
    open_kernel_modules: bool


class DcgmPackage(_Row):
    package: str


class PackageRow(_Row):
    role: str


class CudaRow(_Row):
    min_driver: str
    dcgm: dict[int, DcgmPackage]
    nccl: list[str]


class ProbeTorchRow(_Row):
    cuda: str  # the CUDA runtime of its PyPI wheel


class BundledTarball(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(pattern=r"^[A-Za-z0-9._-]+\.tar\.gz$")  # under gridready/data/nccl-tests/
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class NcclTestsRow(_Row):
    url: str
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    bundled: BundledTarball | None = None
    min_nccl: str


class FabricManagerRule(_Row):
    rule: Literal["same-version-as-driver"]


class DistroRdma(_Row):
    packages: list[str]
    rdma_core: dict[str, str]


class DocaRow(_Row):
    os: list[str]
    driver_branches: list[str]


class RdmaRows(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    distro: DistroRdma
    doca: dict[str, DocaRow]


class OsRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cuda_repo: str
    min_kernel: str


class VersionMatrix(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: int = Field(alias="schema")
    sources: dict[str, str]
    driver_branches: dict[str, DriverBranch]
    cuda: dict[str, CudaRow]
    nccl_tests: dict[str, NcclTestsRow]
    probe_torch: dict[str, ProbeTorchRow]
    fabricmanager: FabricManagerRule
    rdma: RdmaRows
    packages: dict[str, PackageRow]
    os: dict[str, OsRow]

    @model_validator(mode="after")
    def _sources_known(self) -> VersionMatrix:
        rows: list[tuple[str, _Row]] = [
            *((f"driver_branches.{k}", r) for k, r in self.driver_branches.items()),
            *((f"cuda.{k}", r) for k, r in self.cuda.items()),
            *((f"nccl_tests.{k}", r) for k, r in self.nccl_tests.items()),
            *((f"probe_torch.{k}", r) for k, r in self.probe_torch.items()),
            ("fabricmanager", self.fabricmanager),
            ("rdma.distro", self.rdma.distro),
            *((f"rdma.doca.{k}", r) for k, r in self.rdma.doca.items()),
            *((f"cuda.{c}.dcgm.{k}", r) for c, row in self.cuda.items() for k, r in row.dcgm.items()),
            *((f"packages.{k}", r) for k, r in self.packages.items()),
        ]
        unknown = [f"{where}: unknown source {s!r}" for where, r in rows for s in r.sources if s not in self.sources]
        for branch, row in self.driver_branches.items():
            unknown += [f"driver_branches.{branch}: CUDA {c} not in cuda:" for c in row.cuda if c not in self.cuda]
        if unknown:
            raise ValueError("; ".join(unknown))
        return self

    def check(self, pins: SoftwarePins, os: str | None = None) -> list[str]:
        """One `software.<key>: message` line per pin that is not a supported combination (empty: fine)."""
        errors: list[str] = []
        branch = self.driver_branches.get(pins.driver_branch)
        cuda = self.cuda.get(pins.cuda)
        if branch is None:
            errors.append(f"software.driver_branch: {pins.driver_branch} is not in the version matrix "
                          f"(known: {', '.join(self.driver_branches)})")
        elif branch.status == "end-of-life":
            errors.append(f"software.driver_branch: R{pins.driver_branch} ({branch.designation} branch) is end of life "
                          f"({branch.eol}); use {self.recommended_branch()}")
        if cuda is None:
            errors.append(f"software.cuda: {pins.cuda} is not in the version matrix (known: {', '.join(self.cuda)})")
        if pins.driver_version is not None:
            if pins.driver_version.split(".")[0] != pins.driver_branch:
                errors.append(f"software.driver_version: {pins.driver_version} is not a release of driver branch "
                              f"{pins.driver_branch}")
            elif branch is not None and cuda is not None and pins.cuda in branch.cuda:
                floor = self.min_driver(pins.driver_branch, pins.cuda)
                if _vtuple(pins.driver_version) < _vtuple(floor):
                    errors.append(f"software.driver_version: {pins.driver_version} is older than {floor}, the oldest "
                                  f"release of branch {pins.driver_branch} that runs CUDA {pins.cuda}")
        if branch is not None and cuda is not None:
            if pins.cuda not in branch.cuda:
                errors.append(f"software.cuda: CUDA {pins.cuda} needs driver >= {cuda.min_driver}; "
                              f"branch {pins.driver_branch} supports CUDA {', '.join(branch.cuda)}")
            if pins.dcgm_major not in branch.dcgm_majors:
                errors.append(f"software.dcgm_major: DCGM {pins.dcgm_major} is not supported with driver branch "
                              f"{pins.driver_branch} (supported: {', '.join(map(str, branch.dcgm_majors))})")
        if cuda is not None:
            if pins.dcgm_major not in cuda.dcgm:
                errors.append(f"software.dcgm_major: no DCGM {pins.dcgm_major} package for CUDA {pins.cuda}")
            if pins.nccl not in cuda.nccl:
                errors.append(f"software.nccl: NCCL {pins.nccl} is not built for CUDA {pins.cuda} "
                              f"(known: {', '.join(cuda.nccl)})")
        tests = self.nccl_tests.get(pins.nccl_tests)
        if tests is None:
            errors.append(f"software.nccl_tests: {pins.nccl_tests} is not in the version matrix "
                          f"(known: {', '.join(self.nccl_tests)})")
        elif _vtuple(pins.nccl) < _vtuple(tests.min_nccl):
            errors.append(f"software.nccl_tests: nccl-tests {pins.nccl_tests} needs NCCL >= {tests.min_nccl}")
        if pins.probe_torch is not None:
            torch = self.probe_torch.get(pins.probe_torch)
            if torch is None:
                errors.append(f"software.probe_torch: {pins.probe_torch} is not in the version matrix "
                              f"(known: {', '.join(self.probe_torch)})")
            elif branch is not None and torch.cuda not in branch.cuda:
                errors.append(f"software.probe_torch: torch {pins.probe_torch} runs CUDA {torch.cuda}, which driver "
                              f"branch {pins.driver_branch} does not support ({', '.join(branch.cuda)})")
        if pins.rdma_stack == "doca":
            doca = self.rdma.doca.get(pins.doca_ofed or "")
            if doca is None:
                errors.append(f"software.doca_ofed: rdma_stack doca needs a DOCA-OFED version from the matrix "
                              f"(known: {', '.join(self.rdma.doca)}), got {pins.doca_ofed!r}")
            else:
                if pins.driver_branch not in doca.driver_branches:
                    errors.append(f"software.doca_ofed: DOCA-OFED {pins.doca_ofed} is not qualified with driver "
                                  f"branch {pins.driver_branch}")
                if os is not None and OS_KEYS.get(os, os) not in doca.os:
                    errors.append(f"software.doca_ofed: DOCA-OFED {pins.doca_ofed} does not support {os}")
        elif pins.doca_ofed:
            errors.append("software.doca_ofed: set only with rdma_stack: doca")
        return errors

    def gpudirect_path(self, branch: str | None, rdma_stack: str | None) -> GpuDirectPath | None:
        """GPUDirect RDMA's path on a node of `branch` over `rdma_stack` (None: the branch is not in the matrix).
        With the open kernel modules it is DMA-BUF, NVIDIA's recommended path, which NCCL takes by itself (every
        supported OS has Linux 5.12+ and rdma-core 34+); nvidia-peermem only with the proprietary modules over
        DOCA-OFED/MLNX_OFED (it needs their peer-memory API and is built against their symbols); with the
        proprietary modules over the inbox stack there is none. GPUDirect RDMA guide, "Using DMA-BUF" / "Using
        nvidia-peermem", https://docs.nvidia.com/cuda/gpudirect-rdma/index.html"""
        row = self.driver_branches.get(branch or "")
        if row is None:
            return None
        if row.open_kernel_modules:
            return "dmabuf"
        return "peermem" if rdma_stack == "doca" else "none"

    def recommended_branch(self) -> str:
        """The supported long-term support branch named in refusals (R580, EOL June 2028)."""
        lts = [(k, b) for k, b in self.driver_branches.items()
               if b.status == "supported" and b.designation == "long-term support"]
        k, b = max(lts, key=lambda kb: int(kb[0]))
        return f"R{k} (long-term support, end of life {b.eol})"

    def min_driver(self, branch: str, cuda: str) -> str:
        """The oldest driver of `branch` that runs CUDA `cuda`: the later of the two minimums."""
        return max(self.driver_branches[branch].min_version, self.cuda[cuda].min_driver, key=_vtuple)

    def min_kernel(self, os: str) -> str:
        return self.os[OS_KEYS.get(os, os)].min_kernel

    def min_rdma_core(self, os: str) -> str:
        return self.rdma.distro.rdma_core[OS_KEYS.get(os, os)]

    def dcgm_package(self, cuda: str, major: int) -> str:
        return self.cuda[cuda].dcgm[major].package

    def nccl_tests_checksum(self, version: str) -> str:
        row = self.nccl_tests.get(version)
        return f"sha256:{row.sha256}" if row is not None and row.sha256 else ""

    def nccl_tests_bundled(self, version: str) -> tuple[Path, str] | None:
        """The copy of release `version` gridready ships and its `sha256:<hex>`, where the matrix has one."""
        row = self.nccl_tests.get(version)
        if row is None or row.bundled is None:
            return None
        return BUNDLED_DIR / row.bundled.file, f"sha256:{row.bundled.sha256}"


@lru_cache(maxsize=4)
def load(path: Path = MATRIX_PATH) -> VersionMatrix:
    return VersionMatrix.model_validate(yaml.safe_load(path.read_text()))


def check_spec(spec: ClusterSpec) -> list[str]:
    """Error lines for the spec's pins, checked once per OS its node groups use."""
    matrix = load()
    errors: list[str] = []
    for os in sorted({g.os for g in spec.node_groups}):
        errors += [e for e in matrix.check(spec.software, os) if e not in errors]
    return errors


def require_supported(spec: ClusterSpec, file: str = "cluster.yml") -> None:
    """Raise InvalidInput (exit 2) with `<file>: software.<key>: message` lines when a pin is unsupported."""
    errors = check_spec(spec)
    if errors:
        raise InvalidInput([f"{file}: {e}" for e in errors])
