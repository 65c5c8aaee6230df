"""StageResult, the summary every stage writes, and helpers the stages share."""

from __future__ import annotations

import platform
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from gridready.ansible import PlaybookResult
from gridready.artifacts import RunContext, write_json_atomic
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory

SCHEMA_VERSION = 1


def tool_versions() -> dict[str, str]:
    """Versions of the controller-side tools every summary records."""
    versions = {"python": platform.python_version()}
    for dist in ("gridready", "ansible-core", "ansible-runner", "pydantic", "invoke", "pulumi", "pulumi-kubernetes"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


class HostOutcome(BaseModel):
    status: Literal["ok", "changed", "failed", "unreachable", "skipped", "certified", "quarantined", "error"]
    changed: int = 0
    detail: dict[str, Any] = Field(default_factory=dict)


class StageResult(BaseModel):
    schema_version: int = SCHEMA_VERSION
    stage: str
    customer: str
    run_id: str
    status: Literal["success", "failed", "changes-pending", "not-certified", "unreachable", "error"]
    exit_code: int
    check: bool = False
    started_at: str
    finished_at: str | None = None
    seconds: float = 0.0
    hosts: dict[str, HostOutcome] = Field(default_factory=dict)
    messages: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=tool_versions)
    data: dict[str, Any] = Field(default_factory=dict, description="stage-specific results")

    def write(self, ctx: RunContext) -> Path:
        return write_json_atomic(ctx.stage_dir(self.stage) / "summary.json", self)


class Timer:
    def __init__(self) -> None:
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._t0 = time.monotonic()

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self._t0, 2)


def base_extravars(inv: Inventory) -> dict[str, Any]:
    """Every stage playbook gets the customer and the GPU node groups (its preflight play asserts them)."""
    return {"gridready_customer": inv.customer, "gridready_node_groups": [g.name for g in inv.spec.node_groups]}


def outcome_from_playbook(result: PlaybookResult) -> tuple[str, ExitCode, dict[str, HostOutcome]]:
    """Map per-host stats to (status, exit code, hosts): unreachable 4, failed 3, pending changes in check 6."""
    hosts: dict[str, HostOutcome] = {}
    for host, stats in result.hosts.items():
        if stats.unreachable:
            state = "unreachable"
        elif stats.failures:
            state = "failed"
        elif stats.changed:
            state = "changed"
        else:
            state = "ok"
        hosts[host] = HostOutcome(status=state, changed=stats.changed)  # type: ignore[arg-type]
    if result.unreachable_hosts:
        return "unreachable", ExitCode.UNREACHABLE, hosts
    if result.failed_hosts or result.status not in ("successful",) or not hosts:
        return "failed", ExitCode.STAGE_FAILED, hosts
    return "success", ExitCode.OK, hosts
