"""The real programs' command lines, as the SIMULATED wheels of sandbox/pypi.py install them: `vllm serve ...`
(vLLM's console script) and `python -m sglang.launch_server ...`, turned into this engine's own."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from .cli import main as engine_main

VLLM_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def _value(argv: list[str], flag: str) -> str | None:
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def vllm_argv(argv: list[str], env: Mapping[str, str]) -> list[str] | None:
    """`vllm serve <model> [flags]` -> the engine's argv; None for anything but `serve` (the only subcommand the
    simulation has). With --distributed-executor-backend ray the engine joins Ray as vLLM does: ray.init() takes
    RAY_ADDRESS from the environment, else the node's running cluster ("auto"), and a failed join fails the
    engine (vllm/v1/executor/ray_utils.py initialize_ray_cluster)."""
    if not argv or argv[0] != "serve":
        return None
    rest = argv[1:]
    extra = ["--mode", "openai"]
    if _value(rest, "--distributed-executor-backend") == "ray":
        extra += ["--ray-address", env.get("RAY_ADDRESS") or "auto", "--ray-required"]
    return [*rest, *extra]


def vllm_main() -> int:
    argv = vllm_argv(sys.argv[1:], os.environ)
    if argv is None:  # vLLM's argparse subcommands: an unknown one is a usage error, exit 2
        print(VLLM_USAGE, file=sys.stderr)
        word = sys.argv[1] if len(sys.argv) > 1 else ""
        print(f"vllm: error: argument subparser: invalid choice: {word!r} (SIMULATED vllm serves only `serve`)",
              file=sys.stderr)
        return 2
    return engine_main(argv)


def sglang_main() -> int:
    """`python -m sglang.launch_server [server arguments]` (docs/advanced_features/server_arguments.md)."""
    return engine_main([*sys.argv[1:], "--mode", "sglang"])
