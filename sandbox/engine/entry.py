"""The real programs' command lines, as the SIMULATED wheels of sandbox/pypi.py install them: `vllm serve ...`
(vLLM's console script) and `python -m sglang.launch_server ...`, turned into this engine's own."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from .cli import main as engine_main

VLLM_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
# The pinned release's own option strings (gridready/data/engine_cli/<engine>-<version>.json, read from the real
# wheel's argument parser by tools/engine_cli_flags.py), shipped in the SIMULATED wheel beside this module
KNOWN_FLAGS = Path(__file__).with_name("engine_cli.json")


def known_flags(path: Path = KNOWN_FLAGS) -> set[str] | None:
    """The real parser's long options, or None where the wheel carries no list (the repository's own tests)."""
    try:
        return set(json.loads(path.read_text())["flags"])
    except (OSError, ValueError, KeyError):
        return None


def unknown_flags(argv: Iterable[str], known: set[str]) -> list[str]:
    """The options the real parser would refuse (argparse: "unrecognized arguments", exit 2); argparse adds --help
    to every parser itself."""
    return [w for w in argv if w.startswith("--") and w.split("=", 1)[0] not in {*known, "--help"}]


def refuse_unknown(prog: str, usage: str, argv: list[str]) -> int | None:
    """Exit code 2 with argparse's line where the real program would refuse an option, else None."""
    known = known_flags()
    bad = unknown_flags(argv, known) if known is not None else []
    if not bad:
        return None
    print(usage, file=sys.stderr)
    print(f"{prog}: error: unrecognized arguments: {' '.join(bad)}", file=sys.stderr)
    return 2


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
    refused = refuse_unknown("vllm", "usage: vllm serve [model_tag] [options]", sys.argv[2:])
    return refused if refused is not None else engine_main(argv)


def sglang_main() -> int:
    """`python -m sglang.launch_server [server arguments]` (docs/advanced_features/server_arguments.md)."""
    refused = refuse_unknown("launch_server.py", "usage: launch_server.py [-h] --model-path MODEL_PATH ...",
                             sys.argv[1:])
    return refused if refused is not None else engine_main([*sys.argv[1:], "--mode", "sglang"])
