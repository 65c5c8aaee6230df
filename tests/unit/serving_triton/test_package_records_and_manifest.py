"""The Triton package's own records (gridready/serving/triton/__init__.py) by exact value: engine results read
from ansible-runner events, the weights the role links, the repository manifest, the summary entry, the
served-name rules and the role variables of an engine-mode tier."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from gridready.errors import InvalidInput
from gridready.serving import triton, weights
from gridready.serving.engine_cache import EngineRecord
from gridready.serving.triton.build import build_script, engine_key
from gridready.serving.triton.pbtxt import RepositoryError
from gridready.spec.triton import SitePins, TritonSettings

from .conftest import SITE_DIGEST, plan

KEY = "ab" * 32
IMAGE = f"nvcr.io/nvidia/tritonserver@{SITE_DIGEST}"


def ok(host: str, stdout: str, event: str = "runner_on_ok") -> dict:
    return {"event": event, "event_data": {"host": host, "res": {"stdout": stdout}}}


def test_engine_records_from_the_roles_events() -> None:
    events = [ok("gpu01", f"noise\nGRIDREADY_ENGINE built {KEY}\n"),
              ok("gpu02", f"GRIDREADY_ENGINE cached {KEY}"),
              ok("gpu03", f"GRIDREADY_ENGINE built {KEY}", event="runner_on_failed"),
              ok("gpu04", "GRIDREADY_ENGINE built abc"),
              {"event": "runner_on_ok", "event_data": {"res": {"stdout": f"GRIDREADY_ENGINE cached {KEY}"}}},
              {"event": "runner_on_ok", "event_data": {"host": "gpu05", "res": None}},
              {"event": "playbook_on_start"}]
    assert triton.engine_records_from_events(events) == [
        {"host": "gpu01", "status": "built", "key": KEY}, {"host": "gpu02", "status": "cached", "key": KEY},
        {"host": "", "status": "cached", "key": KEY}]


def test_host_weights_of_a_hub_model_and_of_a_local_path() -> None:
    assert triton.host_weights(plan("8b")) == {
        "snapshot": f"{weights.hub_cache()}/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f2",
        "folder": "meta-llama/Llama-3.1-8B-Instruct/0e9e39f2"}
    assert triton.host_weights(plan("8b", tier_over={"model": {"local_path": "/data/llama"}})) == {}


def test_manifest_of_engine_and_llmapi_repositories() -> None:
    p = plan("70b", 8, 2, mode="engine")
    repo = triton.render_repository(p)
    key = engine_key(p)
    m = repo.manifest
    assert {k: m[k] for k in m if k != "files"} == {
        "generated_by": "gridready", "tier": "trt-70b", "mode": "engine", "frontend": "triton",
        "served_model": "llama-70b", "served_name": "llama-70b", "tp": 8, "pp": 2, "world_size": 16, "nodes": 2,
        "gpu_model": "H200-SXM-141GB", "image": IMAGE,
        "versions": {"triton": "25.12", "tensorrt_llm": "1.2.1", "tensorrt": "10.14.1.48", "cuda": None},
        "engine_key": key.digest, "engine_entry": key.dirname,
        "ports": {"http": 8000, "grpc": 8001, "openai": 9000}}
    assert m["files"] == sorted(m["files"])
    llmapi = triton.render_repository(plan("8b")).manifest
    assert (llmapi["mode"], llmapi["engine_key"], llmapi["engine_entry"], llmapi["nodes"]) == (
        "llmapi", None, None, 1)


def test_summary_entry_with_engine_records() -> None:
    p = plan("8b", mode="engine")
    repo = triton.render_repository(p)
    repo.path = Path("/stage/triton/trt-8b/repo")
    assert triton.summary_entry(p, repo, [{"host": "gpu01", "status": "built", "key": KEY}]) == {
        "tier": "trt-8b", "engine": "triton-trtllm", "mode": "engine", "frontend": "triton",
        "repository": "/stage/triton/trt-8b/repo", "served_model": "llama-8b", "tp": 1, "pp": 1, "world_size": 1,
        "image": IMAGE, "versions": {"triton": "25.12", "tensorrt_llm": "1.2.1", "tensorrt": "10.14.1.48",
                                     "cuda": None},
        "engines": [{"host": "gpu01", "status": "built", "key": KEY}]}
    assert triton.summary_entry(p, triton.Repository(Path("x"), {}))["versions"] == {}


@pytest.mark.parametrize(("served", "why"), [
    ("preprocessing", "is the name of another model of the repository (ensemble, postprocessing, preprocessing, "
                      "tensorrt_llm)"),
    ("org/model", "cannot name a Triton model directory (letters, digits, '.', '_', '-'; no '/')"),
])
def test_served_names_triton_cannot_use(served: str, why: str) -> None:
    with pytest.raises(RepositoryError) as err:
        triton.render_repository(plan("8b", mode="engine", tier_over={"served_name": served}))
    assert err.value.lines == [f"tier trt-8b: served_name {served!r} {why}"]
    # the entry model's own template name is its directory, no other model's
    triton.render_repository(plan("8b", mode="engine", tier_over={"served_name": "ensemble"}))


def test_role_variables_of_an_engine_tier() -> None:
    p = plan("70b", 8, 2, mode="engine", startup_timeout_s=900)
    repo = triton.render_repository(p)
    repo.path = Path("/stage/repo")
    v = triton.hosts_extravars(p, repo, ["10.0.0.1", "10.0.0.2"], engine_cache_dir="/srv/engines")
    assert v["gridready_triton_trtllm_build_script"] == build_script(p, cache_dir="/engines").text
    assert {k: v[k] for k in v if k not in ("gridready_triton_trtllm_build_script",
                                            "gridready_triton_trtllm_launch_script")} == {
        "gridready_triton_trtllm_tier": "trt-70b", "gridready_triton_trtllm_mode": "engine",
        "gridready_triton_trtllm_image": IMAGE, "gridready_triton_trtllm_repo_src": "/stage/repo/",
        "gridready_triton_trtllm_bind_address": "10.0.0.1",
        "gridready_triton_trtllm_engine_cache_dir": "/srv/engines", "gridready_triton_trtllm_nodes": 2,
        "gridready_triton_trtllm_served_model": "llama-70b", "gridready_triton_trtllm_served_name": "llama-70b",
        "gridready_triton_trtllm_http_port": 8000, "gridready_triton_trtllm_grpc_port": 8001,
        "gridready_triton_trtllm_metrics_port": 8002, "gridready_triton_trtllm_openai_port": 9000,
        "gridready_triton_trtllm_frontend": "triton", "gridready_triton_trtllm_startup_timeout_s": 900,
        "gridready_triton_trtllm_weights": triton.host_weights(p)}
    llmapi = triton.hosts_extravars(plan("8b", openai_frontend=False), repo)
    assert (llmapi["gridready_triton_trtllm_build_script"], llmapi["gridready_triton_trtllm_openai_port"],
            llmapi["gridready_triton_trtllm_engine_cache_dir"]) == ("", 0, triton.HOST_ENGINE_CACHE)


def test_settings_of_a_tier_with_without_or_with_raw_settings() -> None:
    given = TritonSettings(mode="engine", http_port=9100)
    assert triton.settings_of(SimpleNamespace(triton=given)) is given
    assert triton.settings_of(SimpleNamespace(triton={"mode": "engine", "grpc_port": 9101})) == TritonSettings(
        mode="engine", grpc_port=9101)
    assert triton.settings_of(SimpleNamespace(triton=None)) == TritonSettings()
    assert triton.settings_of(SimpleNamespace()) == TritonSettings()
    assert triton.settings_of(plan("8b").tier) == TritonSettings()


def test_a_placeholder_left_in_a_text_file_is_named_by_line() -> None:
    triton._check_text("m/1/model.yaml", "a: 1\nb: $HOME\n")
    with pytest.raises(RepositoryError) as err:
        triton._check_text("m/1/model.yaml", "a: 1\nb: ${x}\nc: ${y}\n")
    assert err.value.lines == ["m/1/model.yaml:2: unfilled template placeholder"]


def test_summary_entry_with_the_caches_own_records() -> None:
    p = plan("8b", mode="engine")
    rec = EngineRecord("trt-8b", "cached", KEY, "/engines/x", "marker matches", 0.5, {"tensorrt_llm": "1.2.1"})
    assert triton.summary_entry(p, triton.render_repository(p), [rec])["engines"] == [
        {"name": "trt-8b", "status": "cached", "key": KEY, "path": "/engines/x", "reason": "marker matches",
         "seconds": 0.5, "versions": {"tensorrt_llm": "1.2.1"}}]


def test_trtllm_serve_writes_only_the_llm_arguments_beyond_its_flags() -> None:
    p = plan("8b", frontend="trtllm-serve", kv_cache_free_gpu_mem_fraction=0.8,
             tier_over={"lora_adapters": [{"name": "a", "path": "/lora/a"}], "kv_cache_dtype": "fp8"})
    files = triton.render_repository(p).files
    assert sorted(files) == ["extra-llm-api.yaml", "gridready-repo.json"]
    assert files["extra-llm-api.yaml"] == (
        "enable_chunked_prefill: true\n"
        "kv_cache_config:\n  free_gpu_memory_fraction: 0.8\n  enable_block_reuse: true\n  dtype: fp8\n"
        "lora_config:\n  lora_dir:\n  - /lora/a\n  max_lora_rank: 16\n")


def test_a_bls_model_pointing_at_no_model_is_refused() -> None:
    p = plan("8b", mode="engine", bls=True, parameters={"tensorrt_llm_bls": {"tensorrt_llm_model_name": "trt"}})
    with pytest.raises(RepositoryError) as err:
        triton.render_repository(p)
    # the BLS model is the entry, so its directory is the served name
    assert err.value.lines == ["llama-8b/config.pbtxt: tensorrt_llm_model_name 'trt' is no model"]
    assert "llama-8b/config.pbtxt" in triton.render_repository(plan("8b", mode="engine", bls=True)).files


def test_an_llmapi_served_name_may_not_be_another_models() -> None:
    triton.render_repository(plan("8b", tier_over={"served_name": "tensorrt_llm"}))
    assert "llama-8b/1/model.yaml" in triton.render_repository(plan("8b")).files


def test_plan_for_reads_the_tier_plans_group_and_parallelism() -> None:
    base = plan("70b", 8, 2, mode="engine")
    tier_plan = SimpleNamespace(tier=base.tier.model_copy(update={"triton": TritonSettings(mode="engine")}),
                                group=SimpleNamespace(catalog_sku=base.sku), parallel=base.parallel)
    p = triton.plan_for(tier_plan, site_pins=SitePins(lines={"engine": {"image_digest": SITE_DIGEST}}),
                        source="inv/cluster.yml")
    assert (p.name, p.mode, p.sku.name, p.tp, p.pp, p.release.image_digest) == (
        "trt-70b", "engine", "H200-SXM-141GB", 8, 2, SITE_DIGEST)
    with pytest.raises(InvalidInput) as err:
        triton.plan_for(tier_plan, source="inv/cluster.yml")
    assert err.value.lines[0].startswith("inv/cluster.yml: serving.tiers[trt-70b].triton.versions.image_digest: ")
    with pytest.raises(InvalidInput) as err:
        triton.plan_for(tier_plan)
    assert err.value.lines[0].startswith("cluster.yml: serving.tiers[trt-70b].triton.versions.image_digest: ")


def test_manifest_text_and_an_unknown_llmapi_parameter() -> None:
    repo = triton.render_repository(plan("8b"))
    assert repo.path == Path()
    assert repo.files["gridready-repo.json"].startswith(
        '{\n  "engine_entry": null,\n  "engine_key": null,\n  "files": [\n')
    with pytest.raises(RepositoryError) as err:
        triton.render_repository(plan("8b", parameters={"tensorrt_llm": {"x": "y"}}))
    assert err.value.lines == ["llama-8b/config.pbtxt: parameters: unknown key 'x' for model 'llama-8b'"]


def test_a_placeholder_in_model_yaml_is_refused_by_file_name() -> None:
    with pytest.raises(RepositoryError) as err:
        triton.render_repository(plan("8b", tier_over={"model": {"local_path": "/data/${x}"}}))
    (line,) = err.value.lines
    assert line.startswith("llama-8b/1/model.yaml:") and line.endswith(": unfilled template placeholder")


def test_write_repository_replaces_a_stale_temporary_copy(tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    stale = tmp_path / f".repo.tmp-{os.getpid()}"
    (stale / "old").mkdir(parents=True)
    (stale / "old" / "leftover.txt").write_text("x")
    written = triton.write_repository(plan("8b"), dest)
    assert written.path == dest
    assert sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file()) == [
        "gridready-repo.json", "llama-8b/1/model.yaml", "llama-8b/config.pbtxt"]
    assert not stale.exists()


def test_ensure_engine_names_its_record_after_the_tier_and_skips_llmapi(tmp_path: Path) -> None:
    def build(tmp: Path) -> dict[str, str]:
        (tmp / "engine").mkdir(parents=True)
        (tmp / "engine" / "rank0.engine").write_text("engine bytes")
        return {}

    rec = triton.ensure_engine(plan("8b", mode="engine"), tmp_path, build)
    assert rec is not None and (rec.name, rec.status, rec.key) == ("trt-8b", "built",
                                                                   engine_key(plan("8b", mode="engine")).digest)
    assert triton.ensure_engine(plan("8b"), tmp_path, build) is None
