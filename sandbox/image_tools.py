"""The SIMULATED tools inside the sandbox's Triton images (stdlib only; copied into the image by sandbox/images.py
as /opt/tritonserver/lib/gridready-sim/image_tools.py, called by the image's wrappers).

Each takes its real tool's command line and refuses what the real one refuses (unknown options), then runs
gridready's simulated engine (sandbox/engine, in the image beside this file) or writes labelled SIMULATED files:
  tritonserver      options of triton-inference-server/server src/command_line_parser.cc (the 85 long options in
                    tests/fixtures/public/tritonserver/options.txt); getopt_long: `--opt=value` or `--opt value`.
  main.py           the OpenAI frontend, server python/openai/openai_frontend/main.py (argparse).
  trtllm-serve      TensorRT-LLM tensorrt_llm/commands/serve.py (click options of `trtllm-serve serve`).
  trtllm-build      TensorRT-LLM tensorrt_llm/commands/build.py (argparse; the flags gridready passes and the
                    ones it documents beside them).
  convert_checkpoint.py / quantize.py   TensorRT-LLM examples (argparse): a checkpoint dir with config.json.
  trtllm-llmapi-launch  runs its command (the MPI rank wrapper of TensorRT-LLM).
Timing: the host's SIMULATED hardware profile (/etc/gridready-sim/profile.json) may carry
`engine_timing: {triton-trtllm: {itl_ms: ...}}`; the keys become the engine's timing flags.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE = HERE / "engine"
PROFILE = Path(os.environ.get("GRIDREADY_SIM_PROFILE", "/etc/gridready-sim/profile.json"))
TIMING_KEY = "triton-trtllm"
NO_ARGUMENT = {"help", "disable-auto-complete-config"}
OPTIONS_FILE = HERE / "tritonserver-options.txt"


def _note(msg: str) -> None:
    print(f"gridready-sim: SIMULATED {msg}", file=sys.stderr, flush=True)


def _timing_flags() -> list[str]:
    try:
        timing = json.loads(PROFILE.read_text()).get("engine_timing", {}).get(TIMING_KEY, {})
    except (OSError, ValueError):
        return []
    out: list[str] = []
    for key, value in sorted(timing.items()):
        out += ["--" + key.replace("_", "-"), str(value)]
    return out


def _engine(args: list[str]) -> int:
    argv = [sys.executable, str(ENGINE), *args, "--hardware-profile", "auto", *_timing_flags()]
    _note("engine: " + " ".join(argv[2:]))
    os.execv(sys.executable, argv)
    return 0


def _limits(repo: Path) -> list[str]:
    """The engine's batch and context limits, as the real server takes them from the model: the TensorRT engine's
    build config (config.json beside the gpt_model_path of tensorrt_llm) or the LLM-API model.yaml."""
    for cfg in sorted(repo.glob("*/config.pbtxt")):
        text = cfg.read_text()
        m = re.search(r'key:\s*"gpt_model_path"\s*value:?\s*\{\s*string_value:\s*"([^"]+)"', text)
        if m and (Path(m.group(1)) / "config.json").exists():
            build = json.loads((Path(m.group(1)) / "config.json").read_text()).get("build_config", {})
            return ["--max-num-seqs", str(build.get("max_batch_size", 256)),
                    "--max-model-len", str(build.get("max_seq_len", 8192))]
    for y in sorted(repo.glob("*/1/model.yaml")):
        vals = dict(re.findall(r"^(max_batch_size|max_seq_len):\s*(\d+)\s*$", y.read_text(), re.M))
        out = []
        if "max_batch_size" in vals:
            out += ["--max-num-seqs", vals["max_batch_size"]]
        if "max_seq_len" in vals:
            out += ["--max-model-len", vals["max_seq_len"]]
        return out
    return []


def parse_tritonserver(argv: list[str]) -> dict[str, list[str]]:
    known = {line.strip() for line in OPTIONS_FILE.read_text().splitlines() if line.strip() and
             not line.startswith("#")}
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):  # getopt_long permutes, tritonserver then refuses positional arguments
            raise SystemExit(f"tritonserver: unexpected argument: {a}")
        name, eq, value = a[2:].partition("=")
        if name not in known:
            print(f"tritonserver: unrecognized option '--{name}'", file=sys.stderr)
            raise SystemExit(1)
        if name not in NO_ARGUMENT and not eq:
            i += 1
            if i >= len(argv):
                print(f"tritonserver: option '--{name}' requires an argument", file=sys.stderr)
                raise SystemExit(1)
            value = argv[i]
        opts.setdefault(name, []).append(value)
        i += 1
    return opts


def tritonserver(argv: list[str]) -> int:
    opts = parse_tritonserver(argv)
    one = {k: v[-1] for k, v in opts.items()}
    repos = opts.get("model-repository", []) + opts.get("model-store", [])
    if not repos:  # src/command_line_parser.cc: "--model-repository must be specified"
        print("error: --model-repository must be specified", file=sys.stderr)
        return 1
    if one.get("allow-http", "true") == "false" and one.get("allow-grpc", "true") == "false":
        _note(f"tritonserver rank without listeners (models {opts.get('load-model', [])}); waiting")
        while True:
            time.sleep(3600)
    args = ["--mode", "triton", "--model-repository", repos[0], "--host", one.get("http-address", "0.0.0.0"),
            "--port", one.get("http-port", "8000")]
    if one.get("allow-metrics", "true") != "false":
        args += ["--metrics-port", one.get("metrics-port", "8002")]
    return _engine(args + _limits(Path(repos[0])))


def openai_frontend(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="main.py", allow_abbrev=False)
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--tokenizer")
    ap.add_argument("--backend")
    ap.add_argument("--lora-separator")
    ap.add_argument("--tritonserver-log-verbose-level", type=int, default=0)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--openai-port", type=int, default=9000)
    ap.add_argument("--uvicorn-log-level", default="info")
    ap.add_argument("--enable-kserve-frontends", action="store_true")
    ap.add_argument("--kserve-http-port", type=int, default=8000)
    ap.add_argument("--kserve-grpc-port", type=int, default=8001)
    ap.add_argument("--tool-call-parser")
    ap.add_argument("--default-max-tokens", type=int)
    a = ap.parse_args(argv)
    args = ["--mode", "triton", "--model-repository", a.model_repository, "--host", a.host,
            "--port", str(a.kserve_http_port), "--openai-port", str(a.openai_port)]
    if a.default_max_tokens:
        args += ["--default-max-tokens", str(a.default_max_tokens)]
    return _engine(args + _limits(Path(a.model_repository)))


def trtllm_serve(argv: list[str]) -> int:
    args = argv[1:] if argv[:1] == ["serve"] else argv
    ap = argparse.ArgumentParser(prog="trtllm-serve", allow_abbrev=False)
    ap.add_argument("model")
    for flag in ("--backend", "--host", "--tokenizer", "--extra_llm_api_options", "--log_level",
                 "--kv_cache_free_gpu_memory_fraction", "--reasoning_parser", "--served_model_name"):
        ap.add_argument(flag)
    for flag in ("--port", "--tp_size", "--pp_size", "--ep_size", "--max_batch_size", "--max_num_tokens",
                 "--max_seq_len", "--max_beam_width", "--gpus_per_node", "--num_postprocess_workers"):
        ap.add_argument(flag, type=int)
    ap.add_argument("--trust_remote_code", action="store_true")
    a = ap.parse_args(args)
    if a.extra_llm_api_options and not Path(a.extra_llm_api_options).is_file():
        print(f"Error: Invalid value for '--extra_llm_api_options': File '{a.extra_llm_api_options}' does not "
              "exist.", file=sys.stderr)
        return 2
    out = ["--mode", "openai", "--model", a.served_model_name or a.model, "--host", a.host or "localhost",
           "--port", str(a.port or 8000)]
    if a.max_batch_size:
        out += ["--max-num-seqs", str(a.max_batch_size)]
    if a.max_seq_len:
        out += ["--max-model-len", str(a.max_seq_len)]
    return _engine(out)


def llmapi_launch(argv: list[str]) -> int:
    if not argv:
        print("trtllm-llmapi-launch: no command", file=sys.stderr)
        return 2
    os.execvp(argv[0], argv)
    return 0


def _checkpoint_args(prog: str, argv: list[str], quantize: bool) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=prog, allow_abbrev=False)
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--dtype", default="auto", choices=("auto", "float16", "bfloat16", "float32"))
    ap.add_argument("--tp_size", type=int, default=1)
    ap.add_argument("--pp_size", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    if quantize:  # examples/quantization/quantize.py
        ap.add_argument("--qformat", default="full_prec")
        ap.add_argument("--kv_cache_dtype")
        ap.add_argument("--calib_size", type=int)
    else:  # examples/models/core/*/convert_checkpoint.py: an FP8 KV cache is the switch --fp8_kv_cache
        ap.add_argument("--fp8_kv_cache", action="store_true")
        ap.add_argument("--use_weight_only", action="store_true")
    return ap.parse_args(argv)


def convert_checkpoint(argv: list[str], quantize: bool = False) -> int:
    a = _checkpoint_args("quantize.py" if quantize else "convert_checkpoint.py", argv, quantize)
    src = Path(a.model_dir)
    if not (src / "config.json").is_file():  # transformers AutoConfig: "... does not appear to have a file named
        print(f"OSError: {src} does not appear to have a file named config.json.", file=sys.stderr)  # config.json"
        return 1
    out = Path(a.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    world = a.tp_size * a.pp_size
    mapping = {"world_size": world, "tp_size": a.tp_size, "pp_size": a.pp_size}
    cfg = {"SIMULATED": True, "architecture": json.loads((src / "config.json").read_text()).get("architectures",
                                                                                             ["?"])[0],
           "dtype": a.dtype, "mapping": mapping,
           "quantization": {"quant_algo": "FP8" if quantize and a.qformat == "fp8" else None,
                            "kv_cache_quant_algo": "FP8" if (quantize and a.kv_cache_dtype == "fp8") or
                            getattr(a, "fp8_kv_cache", False) else None}}
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    for rank in range(world):
        (out / f"rank{rank}.safetensors").write_text(f"SIMULATED TensorRT-LLM checkpoint, rank {rank}\n")
    _note(f"checkpoint of {src} in {out} ({world} ranks)")
    return 0


def trtllm_build(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="trtllm-build", allow_abbrev=False)
    ap.add_argument("--checkpoint_dir", required=True)
    ap.add_argument("--output_dir", required=True)
    for flag in ("--gemm_plugin", "--gpt_attention_plugin", "--context_fmha", "--remove_input_padding",
                 "--kv_cache_type", "--multiple_profiles", "--use_paged_context_fmha", "--use_fp8_context_fmha",
                 "--lora_plugin", "--input_timing_cache", "--output_timing_cache", "--log_level"):
        ap.add_argument(flag)
    for flag in ("--max_batch_size", "--max_input_len", "--max_seq_len", "--max_num_tokens", "--max_beam_width",
                 "--max_lora_rank", "--workers"):
        ap.add_argument(flag, type=int)
    ap.add_argument("--lora_target_modules", nargs="+")
    ap.add_argument("--lora_dir", nargs="+")
    a = ap.parse_args(argv)
    ckpt = Path(a.checkpoint_dir) / "config.json"
    if not ckpt.is_file():
        print(f"FileNotFoundError: {ckpt}", file=sys.stderr)
        return 1
    pretrained = json.loads(ckpt.read_text())
    out = Path(a.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    build = {k: getattr(a, k) for k in ("max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens",
                                        "max_beam_width") if getattr(a, k) is not None}
    build["plugin_config"] = {k: getattr(a, k) for k in ("gemm_plugin", "gpt_attention_plugin", "context_fmha",
                                                         "remove_input_padding", "use_paged_context_fmha",
                                                         "use_fp8_context_fmha", "lora_plugin") if getattr(a, k)}
    (out / "config.json").write_text(json.dumps({"SIMULATED": True, "pretrained_config": pretrained,
                                                 "build_config": build}, indent=2))
    for rank in range(pretrained["mapping"]["world_size"]):
        (out / f"rank{rank}.engine").write_text(f"SIMULATED TensorRT engine, rank {rank}\n")
    _note(f"trtllm-build: engine in {out}")
    return 0


TOOLS = {"tritonserver": tritonserver, "main.py": openai_frontend, "trtllm-serve": trtllm_serve,
         "trtllm-build": trtllm_build, "trtllm-llmapi-launch": llmapi_launch,
         "convert_checkpoint.py": convert_checkpoint, "quantize.py": lambda a: convert_checkpoint(a, True)}


def main(prog: str, argv: list[str]) -> int:
    return TOOLS[prog](argv)
