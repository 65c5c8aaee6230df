#!/usr/bin/env python3
"""Dump an installed engine's own command-line parser as JSON: run with the interpreter of a throwaway environment
where the pinned vLLM or SGLang release is installed (tools/engine_cli_flags.py --env does that and merges the
result into gridready/data/engine_cli/<engine>-<version>.json).

    <venv>/bin/python tools/engine_cli_dump.py vllm     # the `vllm serve` subparser (vllm.entrypoints.cli.serve)
    <venv>/bin/python tools/engine_cli_dump.py sglang   # sglang.srt.server_args.ServerArgs.add_cli_args

Per option: its option strings, whether it takes a value (nargs), the value's base type where the parser converts
with int, float or str (also through a None-accepting wrapper such as vLLM's optional_type), and its choices.
Only the standard library and the engine are imported here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

BASE = {int: "int", float: "float", str: "str"}


def _base_type(fn: Any) -> tuple[str | None, bool]:
    """(int|float|str|None, accepts the string None): a plain type, or a wrapper closing over one."""
    if fn is None:
        return "str", False
    if fn in BASE:
        return BASE[fn], False
    for cell in getattr(fn, "__closure__", None) or ():
        inner = cell.cell_contents
        if inner in BASE:
            return BASE[inner], True
    return None, False


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def dump(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    # Every option string the parser answers to, hidden ones included (vLLM's EnableDisableAction keeps
    # `--no-enable-x` registered but out of the action's visible strings): argparse's own lookup table.
    strings: dict[int, list[str]] = {}
    for option, action in parser._option_string_actions.items():  # no public accessor
        strings.setdefault(id(action), []).append(option)
    out = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        base, none_ok = _base_type(action.type)
        takes = action.nargs != 0
        out.append({
            "flags": sorted(strings.get(id(action), action.option_strings)),
            "nargs": action.nargs if action.nargs is None or isinstance(action.nargs, int | str) else str(action.nargs),
            "takes_value": takes,
            "type": base if takes else None,
            "accepts_none": none_ok,
            "choices": sorted({_jsonable(c) for c in action.choices}, key=str) if action.choices else None,
        })
    return out


def vllm_parser() -> argparse.ArgumentParser:
    """The parser of `vllm serve`, as vLLM's console script builds it (vllm/entrypoints/cli/main.py). Its config
    defaults need a platform: without a GPU, the CPU one (VLLM_TARGET_DEVICE=cpu); the options, their types and
    choices do not depend on it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    return ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))


def vllm_config_checks() -> dict[str, dict[str, Any]]:
    """Values the parser takes as any string but vLLM's config model refuses when the engine starts."""
    from vllm.config import cache

    return {"--kv-cache-dtype": {"values": sorted(cache.KV_CACHE_DTYPES),
                                 "source": "vllm/config/cache.py CacheConfig._validate_cache_dtype (KV_CACHE_DTYPES)",
                                 "message": "Invalid kv_cache_dtype: {value!r}. Valid values are: {values}"}}


def sglang_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def main() -> int:
    engine = sys.argv[1] if len(sys.argv) > 1 else ""
    build = {"vllm": vllm_parser, "sglang": sglang_parser}.get(engine)
    if build is None:
        print("usage: engine_cli_dump.py vllm|sglang", file=sys.stderr)
        return 2
    if engine == "vllm":
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # before vLLM reads its environment
    checks = vllm_config_checks() if engine == "vllm" else {}
    parser = build()
    # how the parser reads a word: with allow_abbrev a prefix is the option it begins (spec/engine_options.py)
    facts = {"allow_abbrev": parser.allow_abbrev, "prefix_chars": parser.prefix_chars}
    json.dump({"options": dump(parser), "config_checks": checks, "parser": facts}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
