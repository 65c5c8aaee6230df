"""What the multi-node fabric phase found (gridready.stages.fabric runs it): per-run records and the phase's
result, read by the certify stage's judging and by the reports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gridready.certify.result import GateResult, GateStatus


class CollectiveRecord(BaseModel):
    """One nccl-tests run (a pair or the whole set) with its busbw curve (bytes -> GB/s)."""

    hosts: list[str]
    collective: str = "all_reduce"
    phase: str = "set"  # pair | retest | cross | set
    round: int = 0
    status: GateStatus
    busbw_gbps: float | None = None
    pct_of_nic: float | None = None
    floor_gbps: float
    transport: str = "unknown"
    reason: str
    curve: dict[int, float] = Field(default_factory=dict)
    wall_s: float = 0.0
    command: str = ""
    evidence: str | None = None


class FabricResult(BaseModel):
    status: Literal["pass", "fail", "error", "skipped"]
    reason: str
    nodes: list[str]
    certified: list[str] = Field(description="nodes with no blocking fabric gate")
    quarantined: dict[str, str] = Field(default_factory=dict, description="node -> one-line reason")
    unresolved: list[str] = Field(default_factory=list, description="failed once, no known-good partner left")
    node_results: dict[str, list[GateResult]] = Field(default_factory=dict)
    pair_runs: list[CollectiveRecord] = Field(default_factory=list)
    set_runs: list[CollectiveRecord] = Field(default_factory=list)
    pairwise_run_count: int = 0
    isolation_rounds: int = 0
    isolation_wall_s: float = 0.0
    fabric_wide_failure: bool = False
    nic_gbytes: float | None = None
    floor_gbps: float | None = None
    floor_source: str | None = None
    plots: list[str] = Field(default_factory=list)
    timings_s: dict[str, float] = Field(default_factory=dict, description="hca, isolation, set, total")

    def gates(self) -> list[GateResult]:
        return [g for gs in self.node_results.values() for g in gs]
