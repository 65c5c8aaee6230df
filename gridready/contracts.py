"""Stage contracts: the `<stage>/summary.json` each stage writes and later stages read (docs/architecture.md).

Every summary is a pydantic model with its own `schema_version`; a stage writes its summary only through
`StageSummary.close` and a reader takes one only through `read` / `latest`, which validate it against the model
they expect. A summary of another stage, of an older schema or with a drifted key is refused with exit 2 and one
line naming the file, never half-read.
"""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gridready.artifacts import RunContext, latest_summary, read_json, write_json_atomic
from gridready.errors import InvalidInput

SUMMARY_FILE = "summary.json"
Status = Literal["success", "failed", "changes-pending", "not-certified", "unreachable", "error"]


def tool_versions() -> dict[str, str]:
    """Versions of the controller-side tools every summary records."""
    versions = {"python": platform.python_version()}
    for dist in ("gridready", "ansible-core", "ansible-runner", "pydantic", "invoke", "pulumi", "pulumi-kubernetes"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class HostOutcome(BaseModel):
    """One host's result in a provision, serve or bench summary."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "changed", "failed", "unreachable", "skipped", "error"]
    changed: int = 0
    detail: dict[str, Any] = Field(default_factory=dict)


class StageSummary(BaseModel):
    """What every stage's summary.json holds. A stage's model names its STAGE and SCHEMA; `stage` and
    `schema_version` default to them and take no other value."""

    model_config = ConfigDict(extra="forbid")

    STAGE: ClassVar[str] = ""
    SCHEMA: ClassVar[str] = ""

    schema_version: str
    stage: str
    customer: str
    run_id: str
    status: Status
    exit_code: int
    check: bool = False
    started_at: str
    finished_at: str | None = None
    seconds: float = 0.0
    hosts: dict[str, HostOutcome] = Field(default_factory=dict)
    messages: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=tool_versions)
    data: dict[str, Any] = Field(default_factory=dict, description="stage-specific details for people")

    @model_validator(mode="before")
    @classmethod
    def _identity_defaults(cls, data: Any) -> Any:
        return {"schema_version": cls.SCHEMA, "stage": cls.STAGE, **data} if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _own_identity(self) -> Self:
        for key, own in (("stage", self.STAGE), ("schema_version", self.SCHEMA)):
            if getattr(self, key) != own:
                raise ValueError(f"{key} {getattr(self, key)!r} is not {own!r}")
        return self

    def close(self, ctx: RunContext) -> Self:
        """Stamp finished_at and write `<stage_dir>/summary.json` atomically; the only way a summary is written."""
        self.finished_at = now_iso()
        write_json_atomic(ctx.stage_dir(self.stage) / SUMMARY_FILE, self)
        return self


class ProvisionSummary(StageSummary):
    STAGE: ClassVar[str] = "provision"
    SCHEMA: ClassVar[str] = "gridready.provision-summary/2"


class NodeCertification(BaseModel):
    """One node in the certify summary: the verdict serve relies on."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["certified", "quarantined", "unreachable"]
    changed: int = 0
    valid_until: str | None = Field(None, description="certified nodes: until when serve may use them")
    blocking: list[str] = Field(default_factory=list, description="why the node is not certified")
    certification: str | None = Field(None, description="path of the node's certification.json")
    reused: bool = Field(False, description="certified by an earlier run whose window is still open")
    hcas_passed: list[str] | None = Field(
        None, description="RDMA HCAs with no failed gate (NCCL_IB_HCA); None: no HCA gate ran on this node")
    hcas_failed: list[str] = Field(default_factory=list, description="HCAs with a failed gate, waived or not")


class CertifySummary(StageSummary):
    STAGE: ClassVar[str] = "certify"
    SCHEMA: ClassVar[str] = "gridready.certify-summary/2"

    hosts: dict[str, NodeCertification] = Field(default_factory=dict)  # type: ignore[assignment]
    certified: list[str] = Field(default_factory=list)
    quarantined: list[str] = Field(default_factory=list)
    reused: list[str] = Field(default_factory=list)
    fleet_status: Literal["certified", "degraded", "not-certified"] = "not-certified"
    profile: str
    failure_policy: str
    validity_hours: int = Field(description="the spec's window when the certification was made")
    reports: dict[str, str] = Field(default_factory=dict, description="report kind -> path under the stage dir")
    simulated: list[str] = Field(default_factory=list,
                                 description="SIMULATED: nodes whose evidence came from gridready's simulated tools")


class Endpoint(BaseModel):
    """A served tier as clients and `invoke bench` reach it."""

    model_config = ConfigDict(extra="forbid")

    tier: str
    engine: str
    api: str = Field(description="openai-chat or triton-generate (gridready.bench.protocols.Api)")
    model: str = Field(description="the served model name clients send")
    url: str = Field(description="base URL on the first replica's head")
    metrics_url: str | None = None
    heads: list[str] = Field(description="head node of every replica")


class ServeSummary(StageSummary):
    STAGE: ClassVar[str] = "serve"
    SCHEMA: ClassVar[str] = "gridready.serve-summary/2"

    certification: str | None = Field(None, description="the ledger (path#revision) this deployment is based on")
    endpoints: list[Endpoint] = Field(default_factory=list)


class BenchSummary(StageSummary):
    STAGE: ClassVar[str] = "bench"
    SCHEMA: ClassVar[str] = "gridready.bench-summary/2"

    serve_summary: str | None = Field(None, description="the serve summary.json whose endpoints were measured")


S = TypeVar("S", bound=StageSummary)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read(path: Path, model: type[S], root: Path | None = None) -> S:
    """The summary at `path` (beneath the artifacts `root` when given) as `model`; InvalidInput (exit 2, one line
    naming the file) for anything else, a FIFO or a link out included."""
    shown = _shown(path)
    try:
        raw = read_json(path, root)
    except InvalidInput as err:
        raise InvalidInput(f"{shown}: (file): not a readable summary: {str(err).split(': ', 2)[-1]}") from None
    if raw is None:
        raise InvalidInput(f"{shown}: (file): not a readable summary: no such file")
    if not isinstance(raw, dict):
        raise InvalidInput(f"{shown}: (file): a summary is a JSON object, got {type(raw).__name__}")
    if raw.get("stage") != model.STAGE:
        raise InvalidInput(f"{shown}: stage: {raw.get('stage')!r}, expected a {model.STAGE} summary")
    if raw.get("schema_version") != model.SCHEMA:
        raise InvalidInput(f"{shown}: schema_version: {raw.get('schema_version')!r} is not {model.SCHEMA!r} "
                           f"(written by another gridready version); run `invoke {model.STAGE}` again")
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise InvalidInput(f"{shown}: {where}: {first['msg']}") from None


def latest(root: Path, customer: str, model: type[S]) -> tuple[Path, S] | None:
    """The newest non-check-mode summary of `model`'s stage for this customer, validated; None when none exists."""
    found = latest_summary(root, customer, model.STAGE)
    if found is None:
        return None
    return found[0], read(found[0], model, root)
