"""Engine mode: checkpoint conversion and `trtllm-build` flags implied by the tier, and the engine cache key.

Flags (serving-anchors.md 2.5; trtllm-build of the pinned 1.2 line): TP/PP are fixed at conversion; paged KV
cache, fused context attention and removed input padding are the in-flight batching prerequisites; paged
context FMHA is required for KV-cache reuse and chunked context; FP8 quantizes weights and KV cache at
conversion and adds FP8 context FMHA on Hopper; LoRA adds the plugin and the adapters' directories.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from gridready.serving.engine_cache import MARKER, EngineKey
from gridready.serving.triton.plan import ENGINES_DIR, TritonPlan

CHECKPOINT_SUBDIR = "checkpoint"  # conversion output inside the build's scratch dir, not cached
ENGINE_SUBDIR = "engine"  # what the cache keeps: <entry>/engine/{config.json, rank*.engine}


def conversion_args(plan: TritonPlan) -> list[str]:
    """The flags of convert_checkpoint.py (bf16/fp16) or quantize.py (fp8) that change the engine.

    The two scripts spell an FP8 KV cache differently: quantize.py `--kv_cache_dtype fp8` (beside `--qformat
    fp8`), convert_checkpoint.py the switch `--fp8_kv_cache` (it has no --kv_cache_dtype and argparse refuses
    it); TensorRT-LLM examples/quantization/quantize.py and examples/models/core/*/convert_checkpoint.py."""
    args = ["--dtype", plan.dtype, "--tp_size", str(plan.tp), "--pp_size", str(plan.pp)]
    if plan.fp8:
        args += ["--qformat", "fp8", "--kv_cache_dtype", "fp8"]
    elif plan.fp8_kv:
        args += ["--fp8_kv_cache"]
    return args


def build_flags(plan: TritonPlan) -> list[str]:
    """trtllm-build flags that change the engine (paths, workers and timing caches excluded)."""
    tier = plan.tier
    flags = [
        "--gemm_plugin", "auto",
        "--gpt_attention_plugin", "auto",
        "--context_fmha", "enable",
        "--remove_input_padding", "enable",
        "--kv_cache_type", "paged",
        "--max_batch_size", str(plan.max_batch_size),
        "--max_input_len", str(plan.max_input_len),
        "--max_seq_len", str(plan.max_seq_len),
        "--max_num_tokens", str(plan.max_num_tokens),
        "--max_beam_width", "1",
        "--multiple_profiles", "enable",
    ]
    if plan.kv_reuse or plan.chunked_context:
        flags += ["--use_paged_context_fmha", "enable"]
    if plan.fp8:
        flags += ["--use_fp8_context_fmha", "enable"]
    if tier.lora_adapters:
        flags += ["--lora_plugin", "auto", "--max_lora_rank", str(tier.max_lora_rank)]
        flags += ["--lora_target_modules", "attn_q", "attn_k", "attn_v", "attn_dense"]
        flags += ["--lora_dir", *[a.path for a in tier.lora_adapters]]
    return flags


def engine_key(plan: TritonPlan) -> EngineKey:
    r = plan.release
    return EngineKey(
        model=plan.model_id,
        model_revision=plan.revision,
        tensorrt_llm=r.tensorrt_llm,
        tensorrt=r.tensorrt,
        cuda=r.cuda or "per-image",  # unknown CUDA is pinned through `image` (the digest) instead
        image=r.image_ref,
        gpu_model=plan.sku.name,
        tp=plan.tp,
        pp=plan.pp,
        build_flags=tuple(conversion_args(plan) + build_flags(plan)),
    )


def content_inputs(plan: TritonPlan) -> list[str]:
    """Directories whose bytes the engine is built from but whose name does not pin them: a local_path model and
    the LoRA adapter directories. A Hub model is pinned by its revision (a commit) and stays out."""
    dirs = [plan.weights_dir] if plan.tier.model.local_path else []
    return dirs + [a.path for a in plan.tier.lora_adapters if a.path.startswith("/")]


# Runs where the build runs: one sha256 over every file of the input directories (relative path and the file's
# own sha256). A file is re-read only when its size, mtime or inode changed since the last build (the stamps file
# in the cache), so an unchanged 140 GB checkpoint costs a stat per file. A missing or empty directory fails.
_CONTENT = """import hashlib, json, os, sys
stamps_path, roots = sys.argv[1], sys.argv[2:]
try:
    stamps = json.load(open(stamps_path))
except Exception:
    stamps = {}
total = hashlib.sha256()
for root in roots:
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs)
    if not files:
        sys.exit(f"gridready: engine input {root}: missing or empty")
    total.update(root.encode() + b"\\0")
    for path in files:
        st = os.stat(path)
        sig = [st.st_size, st.st_mtime_ns, st.st_ino]
        old = stamps.get(path)
        if old and old[:3] == sig:
            digest = old[3]
        else:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    h.update(chunk)
            digest = h.hexdigest()
            stamps[path] = [*sig, digest]
        total.update(os.path.relpath(path, root).encode() + b"\\0" + digest.encode() + b"\\n")
tmp = stamps_path + ".tmp"
json.dump(stamps, open(tmp, "w"))
os.replace(tmp, stamps_path)
print(total.hexdigest())
"""

# Runs inside the serving image: reuse a complete entry or build, then write the same completion marker as
# gridready.serving.engine_cache.mark_complete. Prints one line `GRIDREADY_ENGINE <built|cached> <digest>`.
# With content inputs, GRIDREADY_INPUTS_SHA256 joins the key (and the entry's name): changed bytes, new engine.
_CHECK = """import json, os, sys
entry, want = sys.argv[1], json.loads(sys.argv[2])
if os.environ.get("GRIDREADY_INPUTS_SHA256"):
    want["key"]["inputs_sha256"] = os.environ["GRIDREADY_INPUTS_SHA256"]
try:
    m = json.load(open(os.path.join(entry, "{marker}")))
    ok = m["digest"] == want["digest"] and m["key"] == want["key"] and m["files"] and all(
        os.path.getsize(os.path.join(entry, f)) == n for f, n in m["files"].items())
except Exception:
    ok = False
sys.exit(0 if ok else 1)
"""
_MARK = """import json, os, sys, time
d, want = sys.argv[1], json.loads(sys.argv[2])
if os.environ.get("GRIDREADY_INPUTS_SHA256"):
    want["key"]["inputs_sha256"] = os.environ["GRIDREADY_INPUTS_SHA256"]
files = {{os.path.relpath(os.path.join(r, f), d): os.path.getsize(os.path.join(r, f))
         for r, _, fs in os.walk(d) for f in fs if f != "{marker}"}}
try:
    import tensorrt, tensorrt_llm, torch
    found = {{"tensorrt_llm": tensorrt_llm.__version__, "tensorrt": tensorrt.__version__,
             "cuda": torch.version.cuda or ""}}
except Exception as err:
    found = {{"error": str(err)}}
marker = dict(schema=1, digest=want["digest"], key=want["key"], files=files, versions_found=found,
              completed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
json.dump(marker, open(os.path.join(d, "{marker}"), "w"), indent=2, sort_keys=True)
"""


@dataclass(frozen=True)
class BuildScript:
    """The build as one bash script, run in the serving image with the engine cache mounted at ENGINES_DIR."""

    key: EngineKey
    entry: str  # the cache entry inside the container
    text: str


def build_script(plan: TritonPlan, *, cache_dir: str = ENGINES_DIR) -> BuildScript:
    """`cache_dir`: where the cache is mounted in the image (ENGINES_DIR).

    With content inputs (content_inputs) their sha256, computed when the script runs, is part of the key the
    entry's marker must name: changed weights or adapters rebuild the entry, unchanged ones reuse it. The entry
    keeps its name, which the model repository's gpt_model_path points at."""
    key = engine_key(plan)
    inputs = content_inputs(plan)
    q = shlex.quote
    entry, tmp = f"{cache_dir}/{key.dirname}", f"{cache_dir}/.{key.dirname}.partial"
    head = []
    if inputs:
        head = [
            f"GRIDREADY_INPUTS_SHA256=$(python3 - {q(cache_dir + '/.inputs-sha256.json')} "
            f"{' '.join(q(d) for d in inputs)} <<'PY'",
            _CONTENT.rstrip(),
            "PY",
            ")",
            "export GRIDREADY_INPUTS_SHA256",
        ]
    qe, qt = q(entry), q(tmp)
    r = plan.release
    script = (r.quantize_script if plan.fp8 else plan.convert_script) or ""
    conv = ["python3", script, "--model_dir", plan.weights_dir, "--output_dir", f"{tmp}/{CHECKPOINT_SUBDIR}"]
    conv += conversion_args(plan)
    build = ["trtllm-build", "--checkpoint_dir", f"{tmp}/{CHECKPOINT_SUBDIR}", "--output_dir", f"{tmp}/{ENGINE_SUBDIR}"]
    build += build_flags(plan)
    build += ["--workers", str(plan.settings.build_workers or plan.world_size)]
    build += ["--input_timing_cache", f"{ENGINES_DIR}/timing.cache"]
    build += ["--output_timing_cache", f"{ENGINES_DIR}/timing.cache"]
    want = q(json.dumps({"digest": key.digest, "key": key.as_dict()}, sort_keys=True))
    steps = [shlex.join(conv), shlex.join(build)]
    text = "\n".join(
        [
            "#!/bin/bash",
            f"# gridready engine build, tier {plan.name}, image {r.image_ref}",
            "set -euo pipefail",
            *head,
            f"if python3 - {qe} {want} <<'PY'",
            _CHECK.format(marker=MARKER).rstrip(),
            "PY",
            f"then echo 'GRIDREADY_ENGINE cached {key.digest}'; exit 0; fi",
            f"rm -rf {qt} && mkdir -p {qt}",
            *steps,
            f"rm -rf {q(tmp + '/' + CHECKPOINT_SUBDIR)}",
            f"python3 - {qt} {want} <<'PY'",
            _MARK.format(marker=MARKER).rstrip(),
            "PY",
            f"rm -rf {qe} && mv {qt} {qe}",
            f"echo 'GRIDREADY_ENGINE built {key.digest}'",
            "",
        ]
    )
    return BuildScript(key, entry, text)
