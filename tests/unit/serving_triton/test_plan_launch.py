"""World size, build flags and the container command are derived from the tier."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from gridready.serving import triton
from gridready.serving.triton.build import build_flags, build_script, conversion_args
from gridready.serving.triton.launch import server_command

from .conftest import plan


@pytest.mark.parametrize(("tp", "pp", "nodes"), [(1, 1, 1), (8, 1, 1), (8, 2, 2)])
def test_world_size_and_nodes_are_derived(tp: int, pp: int, nodes: int) -> None:
    p = plan("70b", tp, pp, mode="engine")
    assert (p.world_size, p.nodes) == (tp * pp, nodes)


def test_engine_single_gpu_runs_one_server_without_mpi() -> None:
    argv = server_command(plan("8b", mode="engine", openai_frontend=False))
    assert argv[0] == "tritonserver"
    assert "--http-port=8000" in argv and "--metrics-port=8002" in argv and "--grpc-port=8001" in argv


def test_engine_tp8_runs_one_rank_per_gpu() -> None:
    argv = server_command(plan("70b", 8, 1, mode="engine", openai_frontend=False))
    assert argv[:2] == ["mpirun", "--allow-run-as-root"]
    contexts = " ".join(argv).split(" : ")
    assert len(contexts) == 8
    assert "--http-port=8000" in contexts[0] and "--model-control-mode" not in contexts[0]
    for rank, ctx in enumerate(contexts[1:], start=1):
        assert f"shm-region-prefix-name=prefix{rank}_" in ctx
        assert "--load-model=tensorrt_llm" in ctx and "--allow-http=false" in ctx


def test_multi_node_needs_the_hosts_and_lists_them() -> None:
    p = plan("70b", 8, 2, mode="engine")
    with pytest.raises(ValueError, match="2 nodes needed"):
        server_command(p, ["10.77.0.11"])
    argv = server_command(p, ["10.77.0.11", "10.77.0.12"])
    assert argv[argv.index("--host") + 1] == "10.77.0.11:8,10.77.0.12:8"
    assert " ".join(argv).count(" : ") == 15


def test_openai_frontend_listens_on_the_tier_port_with_kserve_health() -> None:
    argv = server_command(plan("8b"))
    assert argv[1].endswith("openai_frontend/main.py")
    assert argv[argv.index("--openai-port") + 1] == "9000"
    assert "--enable-kserve-frontends" in argv
    assert argv[argv.index("--kserve-http-port") + 1] == "8000"


def test_launch_script_copies_python_models_from_the_image() -> None:
    script = triton.launch_script(plan("8b", mode="engine", bls=True))
    assert "cp -rn /app/all_models/inflight_batcher_llm/preprocessing/1/. /models/repo/preprocessing/1/" in script
    assert "tensorrt_llm_bls/1/" in script
    assert script.splitlines()[-1].startswith("exec ")
    shlex.split(script.splitlines()[-1])  # one valid shell command line


def test_build_flags_follow_the_tier() -> None:
    base = build_flags(plan("8b", mode="engine"))
    assert base[base.index("--kv_cache_type") + 1] == "paged"
    assert base[base.index("--use_paged_context_fmha") + 1] == "enable"  # KV reuse + chunked context
    assert base[base.index("--max_batch_size") + 1] == "256"  # tier.max_num_seqs
    assert base[base.index("--max_seq_len") + 1] == "8192"  # tier.max_model_len
    no_reuse = build_flags(plan("8b", mode="engine",
                                tier_over={"enable_prefix_caching": False, "enable_chunked_prefill": False}))
    assert "--use_paged_context_fmha" not in no_reuse
    fp8 = plan("8b", mode="engine", tier_over={"quantization": "fp8"})
    assert "--use_fp8_context_fmha" in build_flags(fp8)
    assert conversion_args(fp8)[-4:] == ["--qformat", "fp8", "--kv_cache_dtype", "fp8"]  # quantize.py
    kv_only = plan("8b", mode="engine", tier_over={"kv_cache_dtype": "fp8"})  # bf16 weights: convert_checkpoint.py
    assert conversion_args(kv_only)[-1] == "--fp8_kv_cache" and "--kv_cache_dtype" not in conversion_args(kv_only)
    real = plan("8b", mode="engine", versions={"image_digest": "sha256:" + "5e" * 32},
                tier_over={"kv_cache_dtype": "fp8"})
    text = build_script(real).text
    assert "/convert_checkpoint.py --model_dir" in text and "--fp8_kv_cache" in text
    lora = build_flags(plan("8b", mode="engine",
                            tier_over={"lora_adapters": [{"name": "a", "path": "/adapters/a"}], "max_lora_rank": 32}))
    assert lora[lora.index("--lora_plugin") + 1] == "auto"
    assert lora[lora.index("--max_lora_rank") + 1] == "32"
    assert lora[-1] == "/adapters/a"


def test_conversion_fixes_tp_and_pp() -> None:
    assert conversion_args(plan("70b", 8, 2, mode="engine"))[:6] == [
        "--dtype", "bfloat16", "--tp_size", "8", "--pp_size", "2"]


def test_hosts_extravars_cover_the_role_interface(tmp_path: Path) -> None:
    p = plan("8b", mode="engine")
    repo = triton.write_repository(p, tmp_path / "repo")
    extra = triton.hosts_extravars(p, repo, ["10.77.0.11"])
    role = Path(__file__).resolve().parents[3] / "roles" / "gridready_triton_trtllm"
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    assert set(extra) <= set(options), set(extra) - set(options)
    assert "GRIDREADY_ENGINE built" in extra["gridready_triton_trtllm_build_script"]
    # the build runs in the image, the node's cache mounted at /engines (the role's docker run --volume)
    assert "/engines/" in extra["gridready_triton_trtllm_build_script"]
    assert "/var/lib/gridready/engines" not in extra["gridready_triton_trtllm_build_script"]
    assert extra["gridready_triton_trtllm_engine_cache_dir"] == "/var/lib/gridready/engines"


def test_the_role_links_the_snapshot_the_weights_role_downloads_where_the_image_reads_it(tmp_path: Path) -> None:
    """Issue 29, finding 9: nothing filled <weights_dir>/<hf_id>/<revision> on hosts, so the engine build (and the
    simulated trtllm-build, which refuses a folder without config.json) failed on a fresh node."""
    from gridready.serving import weights

    p = plan("8b", mode="engine")
    extra = triton.hosts_extravars(p, triton.write_repository(p, tmp_path / "repo"), ["10.77.0.11"])
    model = p.tier.model
    download = weights.download(model)
    assert download is not None
    w = extra["gridready_triton_trtllm_weights"]
    assert w["snapshot"] == f"{download['cache_dir']}/{weights.repo_folder(model.hf_id)}/snapshots/{model.revision}"
    assert p.weights_dir == f"/models/hf/{w['folder']}"  # <weights_dir> is mounted at /models/hf


@pytest.mark.parametrize("settings", [{}, {"mode": "engine"}, {"mode": "engine", "bls": True},
                                      {"frontend": "trtllm-serve"}, {"openai_frontend": False}])
@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (8, 1), (8, 2)])
def test_generated_scripts_are_valid_bash(tmp_path: Path, settings: dict, tp: int, pp: int) -> None:
    import subprocess

    p = plan("70b", tp, pp, **settings)
    scripts = [triton.launch_script(p, lws=True), triton.launch_script(p, ["10.0.0.1", "10.0.0.2"])]
    if p.mode == "engine":
        scripts.append(triton.build_script(p).text)
    for n, text in enumerate(scripts):
        f = tmp_path / f"s{n}.sh"
        f.write_text(text)
        proc = subprocess.run(["bash", "-n", str(f)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr + text


@pytest.mark.parametrize(("hf_id", "family"), [("Qwen/Qwen2.5-7B-Instruct", "qwen"),
                                                ("mistralai/Mistral-7B-Instruct-v0.3", "llama"),
                                                ("google/gemma-2-9b-it", "gemma")])
def test_the_convert_script_is_the_model_familys(hf_id: str, family: str) -> None:
    p = plan("8b", mode="engine", versions={"image_digest": "sha256:" + "5e" * 32},
             tier_over={"model": {"hf_id": hf_id, "revision": "0123abcd" * 5}})
    assert f"/app/examples/models/core/{family}/convert_checkpoint.py --model_dir" in build_script(p).text


def test_a_model_of_no_known_family_needs_model_family() -> None:
    from gridready.errors import InvalidInput

    over = {"model": {"hf_id": "acme/house-model-13b", "revision": "0123abcd" * 5}}
    with pytest.raises(InvalidInput, match=r"triton.model_family: cannot tell"):
        plan("8b", mode="engine", tier_over=over)
    p = plan("8b", mode="engine", tier_over=over, model_family="llama")
    assert p.convert_script == "/app/examples/models/core/llama/convert_checkpoint.py"


@pytest.mark.parametrize("settings", [{}, {"openai_frontend": False}, {"frontend": "trtllm-serve"}])
def test_on_hosts_the_frontends_listen_on_the_leaders_service_address_only(settings: dict) -> None:
    """Triton has no authentication: on hosts every listener binds the leader's node address (the address Ray
    and the clients use), never 0.0.0.0; in a pod (no hosts) it binds the pod's addresses."""
    argv = server_command(plan("8b", **settings), ["10.77.0.11"])
    binds = [a for a in argv if a.startswith(("--http-address=", "--grpc-address=", "--metrics-address="))]
    hosts = [argv[i + 1] for i, a in enumerate(argv) if a == "--host"]
    assert "0.0.0.0" not in " ".join(argv)
    if settings.get("openai_frontend") is False:
        assert binds == ["--http-address=10.77.0.11", "--grpc-address=10.77.0.11", "--metrics-address=10.77.0.11"]
    else:
        assert hosts == ["10.77.0.11"]
    pod = server_command(plan("8b", **settings))
    assert "10.77.0.11" not in " ".join(pod) and "0.0.0.0" in " ".join(pod)


def test_the_role_binds_and_probes_the_service_address(tmp_path: Path) -> None:
    p = plan("8b")
    extra = triton.hosts_extravars(p, triton.write_repository(p, tmp_path / "repo"), ["10.77.0.11", "10.77.0.12"])
    assert extra["gridready_triton_trtllm_bind_address"] == "10.77.0.11"
    role = Path(__file__).resolve().parents[3] / "roles" / "gridready_triton_trtllm"
    unit = (role / "templates" / "gridready-triton.service.j2").read_text()
    # the container shares the node's network: the server binds the address its launch script names
    assert "--network=host" in unit and "0.0.0.0" not in unit
    assert "--http-address=10.77.0.11" in extra["gridready_triton_trtllm_launch_script"] or (
        "--host 10.77.0.11" in extra["gridready_triton_trtllm_launch_script"])
    assert "127.0.0.1' if gridready_triton_trtllm_bind_address in ['0.0.0.0', '']" in (
        role / "vars" / "main.yml").read_text()
