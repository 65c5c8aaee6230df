"""The TensorRT-LLM engine cache to the value: the key's digest (sha256 of its canonical JSON, computed here),
the entry's folder name, every reason `decide` gives for a real cache folder, the marker's contents, and
`ensure`'s records (built, cached, timings on a fake clock, failed builds leaving nothing behind)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gridready.serving import engine_cache
from gridready.serving.engine_cache import CacheDecision, EngineKey, EngineRecord

KEY = EngineKey(model="meta-llama/Llama-3.3-70B-Instruct", model_revision="6f6073b4", tensorrt_llm="1.2.1",
                tensorrt="10.14.1", cuda="13.0", image="nvcr.io/nvidia/tritonserver@sha256:ab", gpu_model="H200",
                tp=8, pp=2, build_flags=("--use_paged_context_fmha", "enable"))
FIELDS = {"model": "meta-llama/Llama-3.3-70B-Instruct", "model_revision": "6f6073b4", "tensorrt_llm": "1.2.1",
          "tensorrt": "10.14.1", "cuda": "13.0", "image": "nvcr.io/nvidia/tritonserver@sha256:ab",
          "gpu_model": "H200", "tp": 8, "pp": 2, "build_flags": ["--use_paged_context_fmha", "enable"]}


def test_the_key_as_a_dict_and_its_digest():
    assert KEY.as_dict() == FIELDS
    canonical = ('{"build_flags":["--use_paged_context_fmha","enable"],"cuda":"13.0","gpu_model":"H200",'
                 '"image":"nvcr.io/nvidia/tritonserver@sha256:ab","model":"meta-llama/Llama-3.3-70B-Instruct",'
                 '"model_revision":"6f6073b4","pp":2,"tensorrt":"10.14.1","tensorrt_llm":"1.2.1","tp":8}')
    assert KEY.digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert EngineKey(**{**FIELDS, "build_flags": ()}).as_dict()["build_flags"] == []


def test_the_entry_folder_is_the_model_slug_tp_pp_and_16_hex_of_the_digest():
    assert KEY.dirname == f"meta-llama-llama-3-3-70b-instruct-tp8pp2-{KEY.digest[:16]}"
    long = EngineKey(**{**FIELDS, "model": "/models/" + "A" * 60 + "--"})
    assert long.dirname == f"{'a' * 48}-tp8pp2-{long.digest[:16]}"  # the last 48 characters of the slug
    tail = EngineKey(**{**FIELDS, "model": "b" * 47 + "/c"})
    assert tail.dirname.startswith("b" * 46 + "-c-tp8pp2-")
    bare = EngineKey(**{**FIELDS, "model": "///"})
    assert bare.dirname == f"model-tp8pp2-{bare.digest[:16]}"
    assert engine_cache.entry_path(Path("/cache"), KEY) == Path("/cache") / KEY.dirname


def _complete(root: Path, key: EngineKey = KEY, files: dict[str, str] | None = None) -> Path:
    path = root / key.dirname
    for rel, text in (files or {"rank0.engine": "0123456789", "sub/config.json": "{}"}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    engine_cache.mark_complete(path, key, {"tensorrt_llm": "1.2.1"})
    return path


def test_the_marker_lists_every_file_with_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_cache, "time", SimpleNamespace(
        strftime=time.strftime, monotonic=time.monotonic,
        gmtime=lambda: time.struct_time((2026, 12, 7, 8, 5, 9, 0, 341, 0))))
    path = _complete(tmp_path)
    text = (path / "gridready-engine.json").read_text()
    assert json.loads(text) == {"schema": 1, "digest": KEY.digest, "key": FIELDS,
                                "files": {"rank0.engine": 10, "sub/config.json": 2},
                                "versions_found": {"tensorrt_llm": "1.2.1"}, "completed_at": "2026-12-07T08:05:09Z"}
    assert text.endswith("}\n") and text.startswith('{\n  "completed_at"')  # indented, keys sorted
    assert sorted(p.name for p in path.iterdir()) == ["gridready-engine.json", "rank0.engine", "sub"]
    engine_cache.mark_complete(path, KEY)  # again, without versions: the marker itself is not listed
    again = json.loads((path / "gridready-engine.json").read_text())
    assert again["versions_found"] == {} and set(again["files"]) == {"rank0.engine", "sub/config.json"}


def test_decide_reads_each_state_of_an_entry(tmp_path):
    path = tmp_path / KEY.dirname
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision("build", path, "no engine for this key")
    path.mkdir()
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision(
        "build", path, "incomplete entry (no completion marker)")
    (path / "gridready-engine.json").mkdir()  # not a file
    assert engine_cache.decide(tmp_path, KEY).reason == "incomplete entry (no completion marker)"
    (path / "gridready-engine.json").rmdir()
    (path / "gridready-engine.json").write_text("{not json")
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision(
        "build", path, "unreadable completion marker: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)")
    _complete(tmp_path)
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision("cached", path, "complete entry for this key")


@pytest.mark.parametrize("change", ["digest", "key"])
def test_a_marker_of_another_key_by_digest_or_by_fields_is_rebuilt(tmp_path, change):
    path = _complete(tmp_path)
    data = json.loads((path / "gridready-engine.json").read_text())
    if change == "digest":
        data["digest"] = "0" * 64
    else:
        data["key"]["tp"] = 4
    (path / "gridready-engine.json").write_text(json.dumps(data))
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision("build", path, "completion marker is for another key")


def test_a_marker_without_files_and_changed_files_are_rebuilt(tmp_path):
    path = _complete(tmp_path)
    marker = path / "gridready-engine.json"
    data = json.loads(marker.read_text())
    marker.write_text(json.dumps({**data, "files": {}}))
    assert engine_cache.decide(tmp_path, KEY) == CacheDecision("build", path, "completion marker lists no files")
    marker.write_text(json.dumps({k: v for k, v in data.items() if k != "files"}))
    assert engine_cache.decide(tmp_path, KEY).reason == "completion marker lists no files"
    marker.write_text(json.dumps(data))
    (path / "sub" / "config.json").write_text("{ }")  # one byte more
    assert engine_cache.decide(tmp_path, KEY).reason == "engine file missing or changed: sub/config.json"
    (path / "sub" / "config.json").unlink()
    (path / "sub" / "config.json").mkdir()  # a folder in its place
    assert engine_cache.decide(tmp_path, KEY).reason == "engine file missing or changed: sub/config.json"
    (path / "sub" / "config.json").rmdir()
    assert engine_cache.decide(tmp_path, KEY).reason == "engine file missing or changed: sub/config.json"


class Clock:
    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0)


def _clock(*readings: float) -> SimpleNamespace:
    """engine_cache's view of the time module: a monotonic clock giving `readings` in turn."""
    return SimpleNamespace(monotonic=Clock(*readings), strftime=time.strftime, gmtime=time.gmtime)


def test_ensure_builds_then_reuses_with_timings_to_the_millisecond(tmp_path, monkeypatch):
    calls: list[Path] = []

    def build(tmp: Path) -> dict[str, str]:
        calls.append(tmp)
        assert tmp == tmp_path / f".{KEY.dirname}.partial-{os.getpid()}" and tmp.is_dir() and not any(tmp.iterdir())
        (tmp / "rank0.engine").write_text("engine")
        return {"tensorrt_llm": "1.2.1"}

    monkeypatch.setattr(engine_cache, "time", _clock(10.0, 22.34567))
    built = engine_cache.ensure(tmp_path, KEY, build, name="llama70b")
    path = tmp_path / KEY.dirname
    assert built == EngineRecord("llama70b", "built", KEY.digest, str(path), "no engine for this key", 12.346,
                                 {"tensorrt_llm": "1.2.1"})
    assert built.as_dict() == {"name": "llama70b", "status": "built", "key": KEY.digest, "path": str(path),
                               "reason": "no engine for this key", "seconds": 12.346,
                               "versions": {"tensorrt_llm": "1.2.1"}}
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{KEY.dirname}.lock", KEY.dirname]
    monkeypatch.setattr(engine_cache, "time", _clock(5.0, 5.2504))
    cached = engine_cache.ensure(tmp_path, KEY, build, name="llama70b")
    assert cached == EngineRecord("llama70b", "cached", KEY.digest, str(path), "complete entry for this key", 0.25,
                                  {"tensorrt_llm": "1.2.1"})
    assert len(calls) == 1
    # a marker written without the versions found (an older writer) is still complete; the record has none
    marker = path / "gridready-engine.json"
    marker.write_text(json.dumps({k: v for k, v in json.loads(marker.read_text()).items() if k != "versions_found"}))
    monkeypatch.setattr(engine_cache, "time", _clock(1.0, 2.0))
    assert engine_cache.ensure(tmp_path, KEY, build, name="llama70b").versions == {}


def test_ensure_replaces_a_stale_entry_and_a_leftover_partial_folder(tmp_path):
    path = tmp_path / KEY.dirname
    (path / "old").mkdir(parents=True)
    (path / "old" / "rank0.engine").write_text("stale")
    partial = tmp_path / f".{KEY.dirname}.partial-{os.getpid()}"
    partial.mkdir()
    (partial / "junk").write_text("x")

    def build(tmp: Path) -> None:
        assert not (tmp / "junk").exists()
        (tmp / "rank0.engine").write_text("fresh")

    rec = engine_cache.ensure(tmp_path, KEY, build, name="t")
    assert (rec.status, rec.reason, rec.versions) == ("built", "incomplete entry (no completion marker)", {})
    assert sorted(p.name for p in path.iterdir()) == ["gridready-engine.json", "rank0.engine"]
    assert not partial.exists()


def test_a_build_that_writes_nothing_or_fails_leaves_no_entry(tmp_path):
    with pytest.raises(RuntimeError) as err:
        engine_cache.ensure(tmp_path, KEY, lambda tmp: None, name="llama70b")
    partial = tmp_path / f".{KEY.dirname}.partial-{os.getpid()}"
    assert str(err.value) == f"engine build for llama70b produced no files in {partial}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{KEY.dirname}.lock"]

    def interrupted(tmp: Path) -> None:
        (tmp / "half.engine").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine_cache.ensure(tmp_path, KEY, interrupted, name="llama70b")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{KEY.dirname}.lock"]

    def cleaned_up(tmp: Path) -> None:  # a build tool that removes its output folder when it fails
        tmp.rmdir()
        raise RuntimeError("trtllm-build: out of memory")

    with pytest.raises(RuntimeError, match=r"^trtllm-build: out of memory$"):  # its error, not the cleanup's
        engine_cache.ensure(tmp_path, KEY, cleaned_up, name="llama70b")
