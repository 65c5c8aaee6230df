"""The rolling provision's state: `artifacts/<customer>/roll.json`, written at every step of every node, so that
`gridready -i <c> status` shows the roll as it goes and a second `provision` resumes where the first stopped.

A roll is known by the digest of what it applies (the role variables of every node group, the tags): a stopped roll
with the same digest resumes (its done nodes are not rolled again, its failed nodes go first); a different change
starts a new roll. Written atomically under the customer's lock (the provision stage holds it); read by anyone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gridready.artifacts import read_json, write_json_atomic
from gridready.contracts import now_iso
from gridready.errors import InvalidInput

SCHEMA: Final = "gridready.roll/1"
ROLL_FILE = "roll.json"
Step = Literal["pending", "draining", "provisioning", "rebooting", "verifying", "certifying", "returning", "done",
               "failed"]


class NodeRoll(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch: int = Field(description="1-based batch of the run that rolled (or rolls) the node")
    serving: bool = Field(description="served when the roll planned it (drained and returned), else idle")
    step: Step = "pending"
    reason: str | None = Field(None, description="failed: why, one line")
    rebooted: bool = False
    gates: list[str] | None = Field(None, description="gates re-certified; [] for every gate, None for none")
    run_id: str | None = Field(None, description="the provision run that last touched the node")
    started_at: str | None = None
    seconds: float | None = Field(None, description="drain to return (or failure), this node's batch")


class RollState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["gridready.roll/1"] = SCHEMA
    customer: str
    key: str = Field(description="digest of what the roll applies; a stopped roll resumes only with the same")
    status: Literal["running", "stopped", "done"] = "running"
    runs: list[str] = Field(default_factory=list, description="the provision runs of this roll, oldest first")
    started_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    batch_size: int
    max_failures: int
    batches: list[list[str]] = Field(default_factory=list, description="the latest run's batches")
    current: int = Field(0, description="the batch under way (1-based), 0 before the first")
    nodes: dict[str, NodeRoll] = Field(default_factory=dict)
    stopped_because: str | None = None

    def done(self) -> set[str]:
        return {n for n, r in self.nodes.items() if r.step == "done"}

    def failed(self) -> list[str]:
        return sorted(n for n, r in self.nodes.items() if r.step == "failed")


def path_of(root: Path, customer: str) -> Path:
    return root / customer / ROLL_FILE


def read(root: Path, customer: str) -> RollState | None:
    """The customer's roll (None when none ran); InvalidInput naming the file and key for a foreign or drifted one."""
    path = path_of(root, customer)
    raw = read_json(path, root)
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA:
        found = raw.get("schema_version") if isinstance(raw, dict) else type(raw).__name__
        raise InvalidInput(f"{path}: schema_version: {found!r} is not {SCHEMA!r}; move it aside to start a new roll")
    try:
        state = RollState.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise InvalidInput(f"{path}: {'.'.join(map(str, first['loc'])) or '(file)'}: {first['msg']}") from None
    if state.customer != customer:
        raise InvalidInput(f"{path}: customer: {state.customer!r} is not {customer!r}")
    return state


def write(root: Path, state: RollState) -> None:
    state.updated_at = now_iso()
    write_json_atomic(path_of(root, state.customer), state, root)


def resumable(previous: RollState | None, key: str) -> RollState | None:
    """The earlier roll this run continues: one that did not finish, of the same change."""
    if previous is None or previous.status == "done" or previous.key != key:
        return None
    return previous
