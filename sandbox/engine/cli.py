"""Command line of the simulated engine (what the sandbox's vllm-<tier> / triton units run)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import fields
from pathlib import Path

from . import app, auth, fixed_model, hardware, hub, rendezvous
from .core import Engine
from .prefix_cache import PrefixCache
from .profile import Profile
from .raylink import RayLink

log = logging.getLogger("gridready.sim")

PROFILE_FLAGS = {  # flag -> Profile field
    "--ttft-ms": "ttft_ms", "--prefill-us-per-token": "prefill_us_per_token", "--itl-ms": "itl_ms",
    "--batch-slowdown": "batch_slowdown", "--max-num-seqs": "max_num_seqs", "--max-model-len": "max_model_len",
    "--jitter": "jitter", "--seed": "seed", "--load-seconds": "load_s", "--default-max-tokens": "default_max_tokens",
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python3 -m sandbox.engine", allow_abbrev=False,
        description="gridready's SIMULATED LLM engine: OpenAI (vLLM) or Triton HTTP endpoints with "
                    "profile-driven token timing. Unknown flags (vLLM's) are accepted and ignored.")
    ap.add_argument("--model", "--model-path", dest="model_opt",
                    help="model name or path (also accepted as the first argument; --model-path: SGLang's)")
    ap.add_argument("--revision", help="Hub revision of the model (vLLM's and SGLang's --revision); a Hub model "
                    "loads from the huggingface_hub cache only (hub.py)")
    ap.add_argument("--mode", choices=("openai", "triton", "sglang"), default="openai",
                    help="openai: vLLM's server; triton: Triton's HTTP endpoints; sglang: SGLang's launch_server")
    ap.add_argument("--served-model-name", nargs="+",
                    help="openai/sglang mode: names clients use (default: the model)")
    ap.add_argument("--model-repository", type=Path,
                    help="triton mode (required): serve the models of this Triton model repository by their names")
    # fixed-cost models (ONNX Runtime / TensorRT plans, fixed_model.py): one batch execution takes
    # fixed-cost-ms + per-item-us x items; defaults measured for a bge-small-shaped encoder at seq 128 on one H200
    # (flat ~2.5 ms up to batch 64, ~30 us per item above: docs/examples/h200x1/embedding-cost/)
    ap.add_argument("--fixed-cost-ms", type=float, default=2.5,
                    help="triton mode: milliseconds of one batch execution of an ONNX Runtime/TensorRT model")
    ap.add_argument("--per-item-us", type=float, default=30.0,
                    help="triton mode: microseconds added per batch item of an ONNX Runtime/TensorRT model")
    # prefix caching (prefix_cache.py): vLLM's --[no-]enable-prefix-caching/--block-size, SGLang's
    # --disable-radix-cache/--page-size
    ap.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--block-size", type=int, default=16, help="vLLM KV block size (default 16 on CUDA)")
    # vLLM's engine argument: "If specified, ignore GPU profiling result and use this number of GPU blocks"
    # (docs.vllm.ai, engine args); the KV pool the prefix cache evicts from is that many blocks
    ap.add_argument("--num-gpu-blocks-override", type=int, default=None)
    ap.add_argument("--disable-radix-cache", action="store_true")
    ap.add_argument("--page-size", type=int, default=1, help="SGLang tokens per KV page (default 1)")
    # SGLang's launcher (server_arguments.md): metrics only with --enable-metrics; multi-node start
    ap.add_argument("--enable-metrics", action="store_true")
    ap.add_argument("--context-length", type=int, help="SGLang: profile max_model_len")
    ap.add_argument("--max-running-requests", type=int, help="SGLang: profile max_num_seqs")
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--dist-init-addr", help="host:port of node rank 0")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8000, help="HTTP port (0 = any free port)")
    ap.add_argument("--metrics-port", type=int, default=None, help="triton mode: metrics port (default 8002)")
    ap.add_argument("--openai-port", type=int, default=None, help="triton mode: also serve /v1 on this port")
    ap.add_argument("--api-key", nargs="+", default=None,
                    help="openai mode: keys clients must send as Bearer tokens (default: $VLLM_API_KEY, as vLLM); "
                         "sglang mode: the one key (overrides --config's api-key)")
    ap.add_argument("--config", help="sglang mode: SGLang's --config YAML file of server arguments (its api-key)")
    ap.add_argument("--port-file", type=Path, help="write the bound ports as one JSON line here")
    ap.add_argument("--profile", type=Path, help="JSON file of timing keys (flags below override it)")
    defaults = Profile()
    for flag, name in PROFILE_FLAGS.items():
        kind = type(getattr(defaults, name))
        ap.add_argument(flag, type=kind, default=None, help=f"profile {name} (default {getattr(defaults, name)})")
    ap.add_argument("--hardware-profile", default="auto",
                    help="scale timing by the simulated host hardware: a profile.json, 'auto' "
                         "($GRIDREADY_SIM_PROFILE or /etc/gridready-sim/profile.json if present) or 'none'")
    # vLLM's parallelism flags (vllm/engine/arg_utils.py); with the ray backend every rank's node imports the engine
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--pipeline-parallel-size", type=int, default=1)
    ap.add_argument("--distributed-executor-backend", choices=("ray", "mp", "uni", "external_launcher"))
    ap.add_argument("--ray-address", help="join this Ray cluster (host:port or 'auto'); standalone if not given")
    ap.add_argument("--ray-python", help="interpreter with Ray (default: this one, /opt/ray/venv, /opt/rayvenv)")
    ap.add_argument("--ray-timeout", type=float, default=60.0, help="seconds to wait for the Ray join")
    ap.add_argument("--ray-required", action="store_true", help="exit 1 if the Ray join fails (no fallback)")
    ap.add_argument("--log-level", default="INFO")
    return ap


def repository_models(repo: Path) -> list[str]:
    """Triton knows a model only by its directory in the repository (a directory holding config.pbtxt); clients
    address exactly those names (Triton docs, Model Repository: "The name of the model directory ... must match
    the name of the model specified in the model configuration",
    https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/model_repository.html)."""
    names = sorted(d.name for d in repo.iterdir() if (d / "config.pbtxt").is_file()) if repo.is_dir() else []
    if not names:
        raise SystemExit(f"error: no model in the model repository {repo} (SIMULATED Triton, as tritonserver "
                         "fails to start on an empty or missing repository)")
    return names


def build_profile(args: argparse.Namespace) -> Profile:
    overrides = {name: getattr(args, name_flag(flag)) for flag, name in PROFILE_FLAGS.items()}
    if args.mode == "sglang":
        overrides["max_model_len"] = args.context_length or overrides["max_model_len"]
        overrides["max_num_seqs"] = args.max_running_requests or overrides["max_num_seqs"]
    if args.profile:
        return Profile.from_file(args.profile, **overrides)
    known = {f.name for f in fields(Profile)}
    return Profile(**{k: v for k, v in overrides.items() if v is not None and k in known})


def name_flag(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


async def run(args: argparse.Namespace, ignored: list[str]) -> int:
    if args.mode == "sglang" and args.node_rank >= 1:
        return await run_follower(args)
    if args.mode == "triton":
        names = repository_models(args.model_repository)
        model = str(args.model_repository)
    else:
        model = args.model_opt or "gridready-sim-model"
        names = args.served_model_name or [model]
    hw_path = hardware.resolve_path(args.hardware_profile)
    profile, hw = hardware.apply(build_profile(args), hw_path)
    fixed: dict[str, fixed_model.FixedCostModel] = {}
    if args.mode == "triton":
        timing = fixed_model.Timing(args.fixed_cost_ms, args.per_item_us, float(hw.get("throttle_factor", 1.0)))
        fixed, errors = fixed_model.load_repository(args.model_repository, names, fixed_model.gpu_count(hw_path),
                                                    timing)
        if errors:  # tritonserver's default --exit-on-error=true: main.cc FAIL_IF_ERR(..., "creating server")
            for err in errors:
                print(err.line(), file=sys.stderr)
            print("error: creating server: Internal - failed to load all models", file=sys.stderr, flush=True)
            return 1
    engine = Engine(profile, [n for n in names if n not in fixed], args.mode, prefix_cache(args))
    engine.fixed = dict(fixed)
    for m in fixed.values():
        m.attach(fixed_model.engine_metrics(engine))
    engine.info = {"model": model, "ignored_args": ignored, **hw}
    if args.mode == "sglang" and args.nnodes > 1:
        rdv = rendezvous.Rendezvous(args.nnodes)
        port = args.dist_init_addr.rpartition(":")[2]
        await rdv.listen(args.host, int(port))
        engine.peers_missing = lambda: rdv.missing
        engine.info["dist_init_addr"] = args.dist_init_addr
    if args.mode == "sglang":  # SGLang: one key, from --api-key or the --config file (CLI flags override it)
        keys = args.api_key[:1] if args.api_key else [auth.sglang_config_key(args.config) if args.config else ""]
    else:  # vLLM: the --api-key keys take precedence over VLLM_API_KEY (api_server.py build_app)
        keys = args.api_key or [os.environ.get("VLLM_API_KEY", "")]
    started = await app.start(engine, args.host, args.port, args.metrics_port, args.openai_port,
                              enable_metrics=args.enable_metrics or args.mode != "sglang", api_keys=keys)
    line = app.ports_json(started["ports"])
    print(line, flush=True)
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(line + "\n")
        tmp.replace(args.port_file)
    log.info("SIMULATED %s engine serving %s on %s:%s", args.mode, names, args.host, started["ports"])
    if hw.get("sku"):
        log.info("timing scaled for SIMULATED %s: ITL x%.2f, throttle x%.1f %s", hw["sku"], hw["decode_factor"],
                 hw["throttle_factor"], hw["throttle_faults"])

    link = RayLink()
    if args.ray_address:
        name = f"gridready-sim-{names[0].replace('/', '-')}-{started['ports']['http']}"
        ranks = args.tensor_parallel_size * args.pipeline_parallel_size
        world = ranks if args.mode == "openai" and args.distributed_executor_backend == "ray" else 0
        ok = await link.join(args.ray_address, name, {"models": names, "mode": args.mode, "simulated": True},
                             args.ray_python, args.ray_timeout, world)
        log.info("ray: %s", link.status)
        if not ok and args.ray_required:
            log.error("ray join required and failed: %s", link.status.get("reason"))
            return 1
    engine.info["ray"] = link.status

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    for srv in started["servers"]:
        srv.close()
    await link.close()
    return 0


def prefix_cache(args: argparse.Namespace) -> PrefixCache:
    if args.mode == "sglang":
        return PrefixCache(granularity=args.page_size, enabled=not args.disable_radix_cache)
    blocks = args.num_gpu_blocks_override
    capacity = {"capacity_tokens": blocks * args.block_size} if blocks else {}
    return PrefixCache(granularity=args.block_size, enabled=args.mode == "openai" and args.enable_prefix_caching,
                       **capacity)


async def run_follower(args: argparse.Namespace) -> int:
    """SGLang node rank >= 1: no HTTP server; joins rank 0 at --dist-init-addr and waits (rendezvous.py)."""
    log.info("SIMULATED sglang node rank %d of %d: no HTTP server; joining %s", args.node_rank, args.nnodes,
             args.dist_init_addr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await rendezvous.join(args.dist_init_addr, args.node_rank, stop)
    return 0


def check_sglang(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """SIMULATOR LIMITS (not claimed to be SGLang's own checks): the rendezvous model needs a rank inside
    --nnodes and an explicit --dist-init-addr; gridready always renders both for multi-node replicas."""
    if args.mode != "sglang":
        return
    if not 0 <= args.node_rank < args.nnodes:
        ap.error(f"simulator: --node-rank {args.node_rank} must be in 0..{args.nnodes - 1} (--nnodes {args.nnodes})")
    if args.nnodes > 1 and not args.dist_init_addr:
        ap.error("simulator: --nnodes > 1 needs --dist-init-addr (node rank 0's host:port)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":  # `... engine serve <model>` reads like `vllm serve <model>`
        argv.pop(0)
    if argv and not argv[0].startswith("-"):  # a leading positional is the model
        argv = ["--model", argv[0], *argv[1:]]
    ap = parser()
    args, ignored = ap.parse_known_args(argv)
    check_sglang(ap, args)
    if args.mode == "triton" and (args.served_model_name or args.model_opt or not args.model_repository):
        # tritonserver has no --served-model-name/--model; names come from the repository only
        ap.error("triton mode takes --model-repository and no --model/--served-model-name (SIMULATED tritonserver)")
    if args.openai_port is not None and args.metrics_port is not None:  # openai_frontend/main.py has no such flag
        ap.error("--metrics-port with --openai-port: Triton's OpenAI frontend serves /metrics on its own port")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s gridready-sim %(levelname)s %(message)s")
    if ignored:
        log.info("ignoring flags the simulator does not model: %s", " ".join(ignored))
    if args.mode != "triton" and args.model_opt and hub.is_hub_id(args.model_opt):
        try:  # the engine loads the weights before it serves: a Hub model absent from the cache stops it
            log.info("loading %s from %s", args.model_opt,
                     hub.require_cached(args.model_opt, args.revision, dict(os.environ)))
        except hub.HubError as err:
            print(err.line(), file=sys.stderr, flush=True)
            return 1
    try:
        return asyncio.run(run(args, ignored))
    except OSError as err:  # port in use and the like
        log.error("%s", err)
        return 1
