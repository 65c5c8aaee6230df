"""TensorRT-LLM engine cache: build once per key, reuse while the key holds, rebuild when any part changes.

The key is everything an engine plan depends on (serving-anchors.md section 6, pain point 10): model and
revision, TensorRT-LLM, TensorRT and CUDA versions, the image that builds and serves it (builds run in the
same image that serves, so the digest pins the real toolchain), GPU model, TP, PP and the build flags.
An entry is usable only when its marker file exists, names the same key and lists files that are all present
with their recorded sizes; anything else is rebuilt. Builds go to a temporary directory and are renamed into
place, so a crashed build never looks complete.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

MARKER = "gridready-engine.json"
SCHEMA = 1


@dataclass(frozen=True)
class EngineKey:
    model: str
    model_revision: str
    tensorrt_llm: str
    tensorrt: str
    cuda: str
    image: str
    gpu_model: str
    tp: int
    pp: int
    build_flags: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["build_flags"] = list(self.build_flags)
        return d

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def dirname(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.model.lower()).strip("-")[-48:] or "model"
        return f"{slug}-tp{self.tp}pp{self.pp}-{self.digest[:16]}"


@dataclass(frozen=True)
class CacheDecision:
    action: Literal["build", "cached"]
    path: Path
    reason: str


@dataclass
class EngineRecord:
    """One engine's outcome for the serve summary."""

    name: str
    status: Literal["built", "cached"]
    key: str
    path: str
    reason: str
    seconds: float
    versions: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def entry_path(root: Path, key: EngineKey) -> Path:
    return root / key.dirname


def _files(directory: Path) -> dict[str, int]:
    return {
        str(p.relative_to(directory)): p.stat().st_size
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def decide(root: Path, key: EngineKey) -> CacheDecision:
    """Build or reuse? Pure inspection of the cache directory."""
    path = entry_path(root, key)
    marker = path / MARKER
    if not path.is_dir():
        return CacheDecision("build", path, "no engine for this key")
    if not marker.is_file():
        return CacheDecision("build", path, "incomplete entry (no completion marker)")
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError) as err:
        return CacheDecision("build", path, f"unreadable completion marker: {err}")
    if data.get("digest") != key.digest or data.get("key") != key.as_dict():
        return CacheDecision("build", path, "completion marker is for another key")
    recorded: dict[str, int] = data.get("files", {})
    if not recorded:
        return CacheDecision("build", path, "completion marker lists no files")
    for rel, size in recorded.items():
        f = path / rel
        if not f.is_file() or f.stat().st_size != size:
            return CacheDecision("build", path, f"engine file missing or changed: {rel}")
    return CacheDecision("cached", path, "complete entry for this key")


@contextmanager
def _lock(root: Path, key: EngineKey) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{key.dirname}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def mark_complete(path: Path, key: EngineKey, versions: Mapping[str, str] | None = None) -> None:
    """Write the completion marker (atomically) listing every file of the entry."""
    marker = {
        "schema": SCHEMA,
        "digest": key.digest,
        "key": key.as_dict(),
        "files": _files(path),
        "versions_found": dict(versions or {}),
        "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = path / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path / MARKER)


def ensure(
    root: Path,
    key: EngineKey,
    build: Callable[[Path], Mapping[str, str] | None],
    *,
    name: str,
) -> EngineRecord:
    """Reuse the engine for `key` or call `build(tmpdir)` (which returns versions found in the image)."""
    start = time.monotonic()
    with _lock(root, key):
        decision = decide(root, key)
        if decision.action == "cached":
            data = json.loads((decision.path / MARKER).read_text())
            return EngineRecord(
                name, "cached", key.digest, str(decision.path), decision.reason,
                round(time.monotonic() - start, 3), data.get("versions_found", {}),
            )
        tmp = root / f".{key.dirname}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            found = dict(build(tmp) or {})
            if not _files(tmp):
                raise RuntimeError(f"engine build for {name} produced no files in {tmp}")
            mark_complete(tmp, key, found)
            shutil.rmtree(decision.path, ignore_errors=True)
            os.replace(tmp, decision.path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return EngineRecord(
            name, "built", key.digest, str(decision.path), decision.reason,
            round(time.monotonic() - start, 3), found,
        )
