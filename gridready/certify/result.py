"""GateResult: the one verdict record every gate returns (DESIGN.md section 3)."""

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GateStatus(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"  # the gate could not run or its data is missing: never a pass
    SKIPPED = "skipped"  # not applicable or waived by the spec (reason says which)


class Expected(BaseModel):
    """What the measurement was held against; one or more of the bounds is set."""

    model_config = ConfigDict(extra="forbid")

    floor: float | None = None
    ceiling: float | None = None
    equals: Any = None
    source: str | None = Field(None, description="where the expectation came from: catalog, spec or fleet")


class GateResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate: str = Field(description="gate name, e.g. pcie_link, nvlink, nccl_allreduce")
    node: str
    gpu: int | None = None
    hca: str | None = None
    status: GateStatus
    measured: Any = None
    expected: Expected | None = None
    unit: str | None = None
    reason: str = Field(description="one human sentence")
    evidence: str | None = Field(None, description="path or key of the raw output this verdict read")
    required: bool = True
    waived: bool = False

    @property
    def blocks_certification(self) -> bool:
        """fail/error (or a required gate skipped without a waiver) means not certified."""
        if self.waived:
            return False
        if self.status in (GateStatus.FAIL, GateStatus.ERROR):
            return True
        return self.status is GateStatus.SKIPPED and self.required
