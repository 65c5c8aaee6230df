"""Run ids, stage folders and atomic writes under artifacts/<customer>/<run-id>/<stage>/."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: 20261130T031400Z-3f9a."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, obj: Any) -> Path:
    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = json.dumps(obj, indent=2, sort_keys=True, default=str)
    return write_atomic(path, text + "\n")


@dataclass
class RunContext:
    """What every stage of one command line shares: where to write, and the flags that apply to all."""

    customer: str
    run_id: str
    root: Path  # the artifacts root (artifacts/)
    check: bool = False
    limit: str | None = None
    tags: str | None = None
    force: bool = False
    json: bool = False
    render: bool = False

    @property
    def run_dir(self) -> Path:
        return self.root / self.customer / self.run_id

    def stage_dir(self, stage: str) -> Path:
        path = self.run_dir / stage
        path.mkdir(parents=True, exist_ok=True)
        return path


def latest_summary(
    root: Path, customer: str, stage: str, *, include_check: bool = False
) -> tuple[Path, dict[str, Any]] | None:
    """The newest `<stage>/summary.json` of any run of this customer (run ids sort by time).

    Check-mode summaries record what would happen; later stages never take them as results unless asked.
    """
    base = root / customer
    if not base.is_dir():
        return None
    for run in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        summary = run / stage / "summary.json"
        if summary.is_file():
            try:
                data = json.loads(summary.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if data.get("check") and not include_check:
                continue
            return summary, data
    return None
