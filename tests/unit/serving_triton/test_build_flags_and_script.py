"""Engine mode's conversion and trtllm-build flags, the engine cache key and the build script
(gridready/serving/triton/build.py) by exact value: bf16, FP8 weights and an FP8 KV cache alone (the two scripts
spell it differently), paged context FMHA only with reuse or chunked context, LoRA's plugin and directories, the
key's fields, which directories' bytes join the key, and the script's conversion and build lines."""

from __future__ import annotations

import json
import shlex

from gridready.serving.triton import build

from .conftest import SITE_DIGEST, plan

IMAGE = f"nvcr.io/nvidia/tritonserver@{SITE_DIGEST}"
W8 = "/models/hf/meta-llama/Llama-3.1-8B-Instruct/0e9e39f2"
LORA = [{"name": "sql", "path": "/adapters/sql"}, {"name": "chat", "path": "org/chat-lora"}]


def test_conversion_args_per_precision() -> None:
    assert build.conversion_args(plan("8b", mode="engine")) == ["--dtype", "bfloat16", "--tp_size", "1",
                                                                "--pp_size", "1"]
    assert build.conversion_args(plan("70b", 8, 2, mode="engine", tier_over={"dtype": "float16"})) == [
        "--dtype", "float16", "--tp_size", "8", "--pp_size", "2"]
    assert build.conversion_args(plan("8b", mode="engine", tier_over={"quantization": "fp8"})) == [
        "--dtype", "bfloat16", "--tp_size", "1", "--pp_size", "1", "--qformat", "fp8", "--kv_cache_dtype", "fp8"]
    assert build.conversion_args(plan("8b", mode="engine", tier_over={"kv_cache_dtype": "fp8_e4m3"})) == [
        "--dtype", "bfloat16", "--tp_size", "1", "--pp_size", "1", "--fp8_kv_cache"]


BASE = ["--gemm_plugin", "auto", "--gpt_attention_plugin", "auto", "--context_fmha", "enable",
        "--remove_input_padding", "enable", "--kv_cache_type", "paged"]


def limits(batch: int = 256, inp: int = 8192, seq: int = 8192, tokens: int = 8192) -> list[str]:
    return ["--max_batch_size", str(batch), "--max_input_len", str(inp), "--max_seq_len", str(seq),
            "--max_num_tokens", str(tokens), "--max_beam_width", "1", "--multiple_profiles", "enable"]


def test_build_flags_with_paged_context_only_where_reuse_or_chunking_needs_it() -> None:
    paged = ["--use_paged_context_fmha", "enable"]
    assert build.build_flags(plan("8b", mode="engine")) == [*BASE, *limits(), *paged]
    off = {"enable_prefix_caching": False, "enable_chunked_prefill": False}
    assert build.build_flags(plan("8b", mode="engine", tier_over=off)) == [*BASE, *limits()]
    assert build.build_flags(plan("8b", mode="engine", tier_over={**off, "enable_prefix_caching": True})) == [
        *BASE, *limits(), *paged]
    assert build.build_flags(plan("8b", mode="engine", tier_over={**off, "enable_chunked_prefill": True})) == [
        *BASE, *limits(), *paged]
    p = plan("8b", mode="engine", max_batch_size=32, max_input_len=1024,
             tier_over={**off, "max_model_len": 4096, "max_num_batched_tokens": 2048, "quantization": "fp8"})
    assert build.build_flags(p) == [*BASE, *limits(32, 1024, 4096, 2048), "--use_fp8_context_fmha", "enable"]


def test_lora_adds_the_plugin_rank_targets_and_every_adapter() -> None:
    p = plan("8b", mode="engine", tier_over={"lora_adapters": LORA, "max_lora_rank": 64,
                                             "enable_prefix_caching": False, "enable_chunked_prefill": False})
    assert build.build_flags(p)[len(BASE) + len(limits()):] == [
        "--lora_plugin", "auto", "--max_lora_rank", "64",
        "--lora_target_modules", "attn_q", "attn_k", "attn_v", "attn_dense",
        "--lora_dir", "/adapters/sql", "org/chat-lora"]


def test_engine_key_fields() -> None:
    p = plan("70b", 8, 2, mode="engine")
    key = build.engine_key(p)
    assert (key.model, key.model_revision, key.tensorrt_llm, key.tensorrt, key.cuda, key.image, key.gpu_model,
            key.tp, key.pp) == ("meta-llama/Llama-3.3-70B-Instruct", "6f6073b4", "1.2.1", "10.14.1.48", "per-image",
                                IMAGE, "H200-SXM-141GB", 8, 2)
    assert key.build_flags == tuple(build.conversion_args(p) + build.build_flags(p))
    assert build.engine_key(plan("70b", 8, 2, mode="engine", versions={"cuda": "12.9"})).cuda == "12.9"


def test_content_inputs_are_local_weights_and_local_adapters() -> None:
    assert build.content_inputs(plan("8b", mode="engine")) == []
    assert build.content_inputs(plan("8b", mode="engine", tier_over={"lora_adapters": LORA})) == ["/adapters/sql"]
    local = plan("8b", mode="engine", tier_over={"model": {"local_path": "/data/llama"}, "lora_adapters": LORA})
    assert build.content_inputs(local) == ["/data/llama", "/adapters/sql"]


def test_build_script_lines() -> None:
    p = plan("70b", 8, 2, mode="engine")
    s = build.build_script(p, cache_dir="/cache")
    key = build.engine_key(p)
    assert (s.key, s.entry) == (key, f"/cache/{key.dirname}")
    lines = s.text.splitlines()
    tmp = f"/cache/.{key.dirname}.partial"
    want = shlex.quote(json.dumps({"digest": key.digest, "key": key.as_dict()}, sort_keys=True))
    assert lines[:4] == ["#!/bin/bash", f"# gridready engine build, tier trt-70b, image {IMAGE}",
                         "set -euo pipefail", f"if python3 - /cache/{key.dirname} {want} <<'PY'"]
    conv = shlex.join(["python3", "/app/examples/models/core/llama/convert_checkpoint.py", "--model_dir",
                       "/models/hf/meta-llama/Llama-3.3-70B-Instruct/6f6073b4", "--output_dir", f"{tmp}/checkpoint",
                       *build.conversion_args(p)])
    trt = shlex.join(["trtllm-build", "--checkpoint_dir", f"{tmp}/checkpoint", "--output_dir", f"{tmp}/engine",
                      *build.build_flags(p), "--workers", "16", "--input_timing_cache", "/engines/timing.cache",
                      "--output_timing_cache", "/engines/timing.cache"])
    i = lines.index(f"then echo 'GRIDREADY_ENGINE cached {key.digest}'; exit 0; fi")
    assert lines[i + 1:i + 5] == [f"rm -rf {tmp} && mkdir -p {tmp}", conv, trt, f"rm -rf {tmp}/checkpoint"]
    assert lines[-3:] == ["PY", f"rm -rf /cache/{key.dirname} && mv {tmp} /cache/{key.dirname}",
                          f"echo 'GRIDREADY_ENGINE built {key.digest}'"]
    assert s.text.endswith("\n")
    assert "GRIDREADY_INPUTS_SHA256=$(" not in s.text
    # the completeness check is a heredoc ending at its own "PY" line, reading the cache's marker file
    check = lines[4:i]
    assert check[0] == "import json, os, sys" and check[-2:] == ["sys.exit(0 if ok else 1)", "PY"]
    assert '    m = json.load(open(os.path.join(entry, "gridready-engine.json")))' in check
    mark = lines[lines.index(f"python3 - {tmp} {want} <<'PY'") + 1:-2]
    assert mark[0] == "import json, os, sys, time" and mark[-1] == "PY"
    assert mark[-2] == ('json.dump(marker, open(os.path.join(d, "gridready-engine.json"), "w"), indent=2, '
                        'sort_keys=True)')
    assert '         for r, _, fs in os.walk(d) for f in fs if f != "gridready-engine.json"}' in mark


def test_build_script_quantizes_fp8_sets_workers_and_hashes_local_inputs() -> None:
    p = plan("8b", mode="engine", build_workers=3, tier_over={"quantization": "fp8",
                                                                "model": {"local_path": "/data/my model"},
                                                                "lora_adapters": LORA})
    s = build.build_script(p)
    lines = s.text.splitlines()
    assert lines[3] == ("GRIDREADY_INPUTS_SHA256=$(python3 - /engines/.inputs-sha256.json '/data/my model' "
                        "/adapters/sql <<'PY'")
    end = lines.index(")")
    assert lines[4] == "import hashlib, json, os, sys" and lines[end - 2:end + 2] == [
        "print(total.hexdigest())", "PY", ")", "export GRIDREADY_INPUTS_SHA256"]
    assert any(line.startswith("python3 /app/examples/quantization/quantize.py --model_dir '/data/my model' ")
               for line in lines)
    assert any(line.startswith("trtllm-build ") and " --workers 3 " in line for line in lines)
    assert s.entry.startswith("/engines/")
