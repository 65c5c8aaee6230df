"""Engine cache: build on first serve, reuse on an identical second, rebuild when the key changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridready.serving import engine_cache, triton
from gridready.serving.triton.build import build_script, engine_key

from .conftest import plan, run_in_image


def _serve(p, cache: Path, calls: list[str]) -> dict:
    def build(tmp: Path) -> dict[str, str]:
        calls.append(p.name)
        (tmp / "engine").mkdir()
        (tmp / "engine" / "rank0.engine").write_text("SIMULATED")
        return {"tensorrt_llm": p.release.tensorrt_llm}

    rec = triton.ensure_engine(p, cache, build)
    return triton.summary_entry(p, triton.render_repository(p), [rec])


def test_build_then_cached_then_rebuild_on_version_or_tp_change(tmp_path: Path) -> None:
    cache, calls = tmp_path / "engines", []
    first = _serve(plan("70b", 8, 1, mode="engine"), cache, calls)
    second = _serve(plan("70b", 8, 1, mode="engine"), cache, calls)
    newer = _serve(plan("70b", 8, 1, mode="engine", versions={"tensorrt_llm": "1.2.2"}), cache, calls)
    wider = _serve(plan("70b", 8, 2, mode="engine"), cache, calls)
    statuses = [e["engines"][0]["status"] for e in (first, second, newer, wider)]
    assert statuses == ["built", "cached", "built", "built"]
    assert len(calls) == 3
    assert first["engines"][0]["key"] == second["engines"][0]["key"] != newer["engines"][0]["key"]
    assert second["engines"][0]["reason"] == "complete entry for this key"
    assert json.dumps(first)  # the summary entry is JSON as is


def test_key_covers_every_part() -> None:
    base = engine_key(plan("70b", 8, 1, mode="engine"))
    variants = [
        plan("70b", 8, 1, mode="engine", versions={"tensorrt": "10.15.0"}),
        plan("70b", 8, 1, mode="engine", versions={"cuda": "13.1"}),
        plan("70b", 8, 1, mode="engine", versions={"image_digest": "sha256:" + "0" * 64}),
        plan("70b", 8, 1, mode="engine", tier_over={"model": {"hf_id": "meta-llama/Llama-3.3-70B-Instruct",
                                                              "revision": "f" * 40}}),
        plan("70b", 8, 1, mode="engine", tier_over={"max_model_len": 4096}),
        plan("70b", 4, 1, mode="engine"),
    ]
    digests = {engine_key(v).digest for v in variants}
    assert base.digest not in digests and len(digests) == len(variants)


def _one_rank(tmp: Path) -> dict[str, str]:
    (tmp / "engine").mkdir()
    (tmp / "engine" / "rank0.engine").write_text("engine bytes")
    return {}


def test_incomplete_or_damaged_entries_are_rebuilt(tmp_path: Path) -> None:
    p, cache = plan("8b", mode="engine"), tmp_path / "engines"
    assert triton.ensure_engine(p, cache, _one_rank).status == "built"
    entry = engine_cache.entry_path(cache, engine_key(p))
    (entry / "engine" / "rank0.engine").write_text("truncated")
    decision = engine_cache.decide(cache, engine_key(p))
    assert decision.action == "build" and "engine file missing or changed" in decision.reason
    assert triton.ensure_engine(p, cache, _one_rank).status == "built"
    (entry / engine_cache.MARKER).unlink()
    assert engine_cache.decide(cache, engine_key(p)).reason == "incomplete entry (no completion marker)"


def test_failed_build_leaves_nothing_that_looks_complete(tmp_path: Path) -> None:
    p, cache = plan("8b", mode="engine"), tmp_path / "engines"

    def boom(tmp: Path) -> None:
        (tmp / "half.engine").write_text("x")
        raise RuntimeError("trtllm-build failed")

    with pytest.raises(RuntimeError, match="trtllm-build failed"):
        triton.ensure_engine(p, cache, boom)
    assert engine_cache.decide(cache, engine_key(p)).action == "build"
    assert [x.name for x in cache.iterdir() if not x.name.endswith(".lock")] == []


def test_llmapi_mode_has_no_engine(tmp_path: Path) -> None:
    assert triton.ensure_engine(plan("8b"), tmp_path, _one_rank) is None


def test_build_script_and_python_agree_on_the_marker(tmp_path: Path) -> None:
    """The script the role/Job runs (here against the sandbox image's SIMULATED convert_checkpoint.py and
    trtllm-build) writes the marker engine_cache reads, and reuses it the second time."""
    p, cache = plan("8b", 8, 1, mode="engine"), tmp_path / "engines"
    cache.mkdir()
    weights = tmp_path / "hf"
    snapshot = weights / p.model_id / p.revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    text = build_script(p, cache_dir=str(cache)).text
    runs = [run_in_image(text, tmp_path, weights) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    out1, out2 = (r.stdout for r in runs)
    key = engine_key(p)
    assert out1.strip() == f"GRIDREADY_ENGINE built {key.digest}"
    assert out2.strip() == f"GRIDREADY_ENGINE cached {key.digest}"
    assert engine_cache.decide(cache, key).action == "cached"
    assert len(list((cache / key.dirname / "engine").glob("rank*.engine"))) == 8
    events = [{"event": "runner_on_ok", "event_data": {"host": "gpu01", "res": {"stdout": o}}} for o in (out1, out2)]
    assert [e["status"] for e in triton.engine_records_from_events(events)] == ["built", "cached"]


def test_local_weights_and_lora_dirs_key_the_engine_by_content(tmp_path: Path) -> None:
    """A local_path model and LoRA directories are not pinned by their names: changed bytes (even at the same size
    and name) rebuild the engine, unchanged ones reuse it, a missing directory fails the build."""
    model, lora = tmp_path / "llama", tmp_path / "adapters" / "sql"
    model.mkdir()
    lora.mkdir(parents=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "model.safetensors").write_bytes(b"a" * 4096)
    (lora / "adapter_model.safetensors").write_bytes(b"l" * 64)
    p = plan("8b", 1, 1, mode="engine", model_family="llama",
             tier_over={"model": {"local_path": str(model)}, "lora_adapters": [{"name": "sql", "path": str(lora)}]})
    cache = tmp_path / "engines"
    cache.mkdir()
    text = build_script(p, cache_dir=str(cache)).text

    def run() -> str:
        done = run_in_image(text, tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[1]

    assert [run(), run()] == ["built", "cached"]
    (model / "model.safetensors").write_bytes(b"b" * 4096)  # same name and size, other bytes
    assert [run(), run()] == ["built", "cached"]
    (lora / "adapter_model.safetensors").write_bytes(b"m" * 64)
    assert run() == "built"
    marker = json.loads((cache / engine_key(p).dirname / engine_cache.MARKER).read_text())
    assert len(marker["key"]["inputs_sha256"]) == 64
    (model / "model.safetensors").unlink()
    (model / "config.json").unlink()
    failed = run_in_image(text, tmp_path)
    assert failed.returncode != 0 and f"engine input {model}: missing or empty" in failed.stderr


def test_a_hub_model_is_keyed_by_its_revision_alone() -> None:
    from gridready.serving.triton.build import content_inputs
    assert content_inputs(plan("8b", 1, 1, mode="engine")) == []
