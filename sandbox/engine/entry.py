"""The real programs' command lines, as the SIMULATED wheels of sandbox/pypi.py install them: `vllm serve ...`
(vLLM's console script) and `python -m sglang.launch_server ...`, turned into this engine's own."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

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


def known_options(path: Path = KNOWN_FLAGS) -> list[dict[str, Any]] | None:
    """The real parser's options with their value types and choices (tools/engine_cli_dump.py), where recorded."""
    try:
        return json.loads(path.read_text())["options"]
    except (OSError, ValueError, KeyError):
        return None


def _converter(kind: str | None, accepts_none: bool) -> Callable[[str], Any] | None:
    base = {"int": int, "float": float, "str": str}.get(kind or "")
    if base is None or not accepts_none:
        return base

    def none_or(value: str) -> Any:  # vLLM's optional_type: the string None means None
        return None if value == "None" else base(value)

    none_or.__name__ = base.__name__  # argparse names the type in its "invalid int value" message
    return none_or


def option_parser(prog: str, options: list[dict[str, Any]],
                  positionals: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """An argparse parser with the real one's options, value types and choices: argparse itself then refuses what
    the real parser refuses, with its own message and exit status 2."""
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=False, epilog="SIMULATED by gridready's sandbox: the "
                                     "pinned release's options and their values; the engine behind them is simulated")
    for name in positionals:
        parser.add_argument(name, nargs="?")
    for opt in options:
        flags = [f for f in opt["flags"] if f not in ("-h", "--help")]
        if not flags:
            continue
        if not opt["takes_value"]:
            parser.add_argument(*flags, action="store_true")
            continue
        kw: dict[str, Any] = {"type": _converter(opt.get("type"), bool(opt.get("accepts_none")))}
        if opt.get("nargs") is not None:
            kw["nargs"] = opt["nargs"]
        if opt.get("choices"):
            kw["choices"] = opt["choices"]
        parser.add_argument(*flags, **kw)
    return parser


def refuse_unknown(prog: str, usage: str, argv: list[str], positionals: tuple[str, ...] = ()) -> int | None:
    """Exit code 2 with argparse's line where the real program would refuse an option or its value, else None."""
    options = known_options()
    if options is not None:
        try:
            option_parser(prog, options, positionals).parse_args(argv)
        except SystemExit as e:  # argparse printed its usage and error line (2), or the help (0)
            return int(e.code or 0)
        return None
    known = known_flags()
    bad = unknown_flags(argv, known) if known is not None else []
    if not bad:
        return None
    print(usage, file=sys.stderr)
    print(f"{prog}: error: unrecognized arguments: {' '.join(bad)}", file=sys.stderr)
    return 2


def refuse_config(argv: list[str], path: Path = KNOWN_FLAGS) -> int | None:
    """Exit code 1 with the engine's error where its config model refuses a value its parser took as any string
    (vLLM: CacheConfig's kv_cache_dtype validator raises when the engine starts), else None."""
    try:
        checks = json.loads(path.read_text()).get("config_checks") or {}
    except (OSError, ValueError):
        return None
    for flag, check in checks.items():
        value = _value(argv, flag)
        if value is not None and value not in check["values"]:
            print("ValueError: " + check["message"].format(value=value, values=check["values"]), file=sys.stderr)
            return 1
    return None


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
    refused = refuse_unknown("vllm serve", "usage: vllm serve [model_tag] [options]", sys.argv[2:], ("model_tag",))
    if refused is None:
        refused = refuse_config(sys.argv[2:])
    return refused if refused is not None else engine_main(argv)


def sglang_main() -> int:
    """`python -m sglang.launch_server [server arguments]` (docs/advanced_features/server_arguments.md)."""
    refused = refuse_unknown("launch_server.py", "usage: launch_server.py [-h] --model-path MODEL_PATH ...",
                             sys.argv[1:])
    return refused if refused is not None else engine_main([*sys.argv[1:], "--mode", "sglang"])
