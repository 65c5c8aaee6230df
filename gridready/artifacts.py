"""Run ids, stage folders and atomic writes under artifacts/<customer>/<run-id>/<stage>/."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from gridready import safefile
from gridready.errors import InvalidInput

# A run id names a folder: letters, digits, '-' and '_' only (no '/', no '.', so no '..'), at most 64.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
LOCK_FILE = ".lock"
MAX_JSON_BYTES = 256 << 20  # a summary, a ledger or a probe.json: a few MiB at most


def validate_run_id(run_id: str, source: str = "GRIDREADY_RUN_ID") -> str:
    """The run id, or InvalidInput naming where it came from; never echoes more than the pattern."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise InvalidInput(f"{source}: (run id): must match {RUN_ID.pattern} (letters, digits, '-', '_')")
    return run_id


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: 20261130T031400Z-3f9a."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


# The artifacts roots of this process's run contexts: beneath them no link is followed, whoever writes.
_ROOTS: set[str] = set()


def _root_of(path: Path) -> Path | None:
    absolute = os.path.abspath(path)
    found = [r for r in _ROOTS if absolute == r or absolute.startswith(r.rstrip("/") + "/")]
    return Path(max(found, key=len)) if found else None


def write_atomic(path: Path, data: str | bytes, root: Path | None = None, mode: int = 0o600, *,
                 durable: bool = True) -> Path:
    """Write to a create-exclusive temp file in the same folder, fsync, then rename over `path`
    (gridready.safefile): no component beneath `root` (by default the artifacts root `path` is under) may be a
    link, and a link at `path` is replaced, never written through. InvalidInput naming the path otherwise.
    `durable=False` leaves out the fsync, for one of many files written in a row that the caller makes durable at
    once (sync_all)."""
    try:
        return safefile.write_atomic(path, data.encode() if isinstance(data, str) else data,
                                     root or _root_of(path), mode, durable)
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (file): {err}") from None


@contextlib.contextmanager
def open_atomic(path: Path, root: Path | None = None, mode: int = 0o600) -> Iterator[IO[str]]:
    """A text file to write a large output in pieces, as write_atomic writes: renamed over `path` when the block
    ends without an error (removed when it raises), never through a link."""
    try:
        with safefile.open_atomic(path, root or _root_of(path), mode) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8")
            yield text
            text.flush()
            text.detach()  # the raw file is safefile's to close and rename
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (file): {err}") from None


def write_json_atomic(path: Path, obj: Any, root: Path | None = None, *, durable: bool = True) -> Path:
    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = json.dumps(obj, indent=2, sort_keys=True, default=str)
    return write_atomic(path, text + "\n", root, durable=durable)


def read_json(path: Path, root: Path | None, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON file gridready wrote under the artifacts `root`, read as gridready.safefile reads (no link at any
    component beneath `root`, a regular file, at most `limit` bytes); None when missing; InvalidInput naming the
    file otherwise. A FIFO never blocks the reader."""
    try:
        data = safefile.read_optional(path, limit, root, follow_inside=root is None)
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (file): {err}") from None
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as err:
        raise InvalidInput(f"{path}: (file): not JSON ({str(err).split(':')[0]})") from None


def make_dirs(path: Path, root: Path | None = None) -> Path:
    """mkdir -p that follows no link beneath `root` (by default the artifacts root `path` is under); InvalidInput
    otherwise."""
    try:
        return safefile.make_dirs(path, root or _root_of(path))
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (file): {err}") from None


def run_folders(root: Path, customer: str) -> list[Path]:
    """The folders under artifacts/<customer>/ (sorted); a link there, or a customer folder that is not a plain
    folder, is InvalidInput: gridready never makes one, and it may lead out."""
    base = root / customer
    try:
        what = safefile.kind(base, root)
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{base}: (file): {err}") from None
    if what is None:
        return []
    if what != "dir":
        raise InvalidInput(f"{base}: (file): {what}, not a folder of runs")
    out = []
    for entry in sorted(base.iterdir()):
        if entry.is_symlink():
            raise InvalidInput(f"{entry}: (file): a symbolic link, which is never followed under artifacts/")
        if entry.is_dir():
            out.append(entry)
    return out


def sync_all() -> None:
    """Make every file written with durable=False durable, in one call: one fsync per file of 10,000 per-node files
    cost 2-3 ms each on a busy disk, most of a large fleet's report time."""
    os.sync()


@dataclass
class RunContext:
    """What every stage of one command line shares: where to write, and the flags that apply to all."""

    customer: str
    run_id: str
    root: Path  # the artifacts root (artifacts/)
    check: bool = False
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    force: bool = False
    json: bool = False
    render: bool = False
    canary: str | None = None  # serve: the tier `invoke serve --canary` rolls out through the router
    canary_weight: int = 10  # serve: the canary's share of its route, %
    purge_volumes: bool = False  # serve --down: also delete the kept weights and engine-cache claims (Kubernetes)
    gates: tuple[str, ...] = ()  # certify: run and judge only these gates (a diagnostic run)
    skip_gates: tuple[str, ...] = ()  # certify: every gate but these (a diagnostic run)
    batch: str | None = None  # provision: serving nodes per batch of the roll, N or N% (gridready.stages.roll_plan)
    max_fail: str | None = None  # provision: failed nodes the roll tolerates before it stops, N or N%

    def __post_init__(self) -> None:
        # links above the artifacts root are where the user put it; beneath it none is followed (gridready.safefile)
        self.root = Path(os.path.realpath(self.root))
        _ROOTS.add(str(self.root))

    @property
    def run_dir(self) -> Path:
        return self.root / self.customer / self.run_id

    def claim_stage(self, stage: str) -> Path:
        """Create this run's folder of `stage`; a run id already used for that stage is refused (exit 2)."""
        path = self.run_dir / stage
        make_dirs(path.parent, self.root)
        try:
            os.mkdir(path)  # the parent was just walked without following a link
        except FileExistsError:
            raise InvalidInput(
                f"GRIDREADY_RUN_ID: (run id): run {self.run_id!r} of {self.customer} already has a {stage} stage "
                f"({path}); artifacts are never overwritten, use a new run id"
            ) from None
        return path

    def stage_dir(self, stage: str) -> Path:
        return make_dirs(self.run_dir / stage, self.root)


def _recorded_time(data: dict[str, Any]) -> float | None:
    """When the stage recorded its result (finished_at, else started_at) as a POSIX time; None if absent."""
    for key in ("finished_at", "started_at"):
        value = data.get(key)
        if isinstance(value, str):
            try:
                stamp = datetime.fromisoformat(value)
            except ValueError:
                continue
            return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    return None


def latest_summary(
    root: Path, customer: str, stage: str, *, include_check: bool = False
) -> tuple[Path, dict[str, Any]] | None:
    """The newest `<stage>/summary.json` of any run of this customer, by the time the summary records.

    Run ids are never compared (`123-9` vs `123-10`, a local timestamp vs a CI number); ties on the recorded
    second fall back to when the file was written. Check-mode summaries record what would happen; later stages
    never take them as results unless asked.
    """
    found: list[tuple[float, int, Path, dict[str, Any]]] = []
    for run in run_folders(root, customer):
        summary = run / stage / "summary.json"
        try:
            data = read_json(summary, root)
        except InvalidInput as err:
            if "not JSON" in str(err):  # a summary being written, or cut short: not a result
                continue
            raise
        if data is None:
            continue
        written = summary.lstat().st_mtime_ns
        if not isinstance(data, dict) or (data.get("check") and not include_check):
            continue
        recorded = _recorded_time(data)
        found.append((recorded if recorded is not None else written / 1e9, written, summary, data))
    if not found:
        return None
    _, _, path, data = max(found, key=lambda f: (f[0], f[1]))
    return path, data


@contextlib.contextmanager
def customer_lock(root: Path, customer: str, holder: str, wait_s: float = 0.0) -> Iterator[Path]:
    """One stage at a time per customer: an exclusive flock on artifacts/<customer>/.lock.

    A second run waits up to `wait_s` seconds, then stops with exit 2 naming the run that holds the lock.
    The kernel drops the lock when its process ends, so a killed run never leaves a stale one.
    """
    path = root / customer / LOCK_FILE
    try:
        fd = safefile.open_lock(path, root)
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (lock): {err}; the lock is a plain file gridready makes") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    other = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another run"
                    raise InvalidInput(
                        f"{path}: (lock): {other} is using customer {customer}; one stage at a time per "
                        f"customer (wait with GRIDREADY_LOCK_WAIT_S=<seconds>)"
                    ) from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def prunable(root: Path, customer: str, keep: int, protected: set[str]) -> list[Path]:
    """Run folders retention may remove: for every stage, the `keep` newest valid runs (a summary that is not
    check mode and exited 0) are kept, and so is every run newer than the oldest of them (a recent failure stays to
    be read); a run is removed only when no stage keeps it and its id is not in `protected` (the runs the ledger
    points to). Folders without any summary are left alone (a run in progress)."""
    if keep < 1:
        raise InvalidInput(f"--keep: (flag): {keep} must be at least 1")
    runs: dict[Path, dict[str, tuple[float, bool]]] = {}
    for run in (p for p in run_folders(root, customer) if RUN_ID.match(p.name)):
        for summary in run.glob("*/summary.json"):
            try:
                data = read_json(summary, root)
            except InvalidInput as err:
                if "not JSON" not in str(err):
                    raise
                data = {}
            data = data if isinstance(data, dict) else {}
            recorded = _recorded_time(data) or summary.lstat().st_mtime
            valid = not data.get("check") and data.get("exit_code") == 0
            runs.setdefault(run, {})[summary.parent.name] = (recorded, valid)
    kept: set[Path] = set()
    for stage in {s for stages in runs.values() for s in stages}:
        of_stage = sorted(((v[0], r) for r, s in runs.items() if (v := s.get(stage))), reverse=True)
        valid = [(t, r) for t, r in of_stage if runs[r][stage][1]]
        floor = valid[keep - 1][0] if len(valid) >= keep else float("-inf")
        kept |= {r for t, r in of_stage if t >= floor}
    return sorted(r for r in runs if r not in kept and r.name not in protected)
