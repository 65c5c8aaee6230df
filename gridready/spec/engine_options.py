"""A tier's `extra_engine_args`, resolved exactly as the pinned engine's own command-line parser resolves them.

gridready renders each extra option after its own flags as `--<key, '_' as '-'>` (serving/vllm.py serve_args,
serving/sglang.py launch_args): true as the bare flag, false as `--no-<key>` (vLLM) or nothing (SGLang), any other
value as the next word. Both engines parse that with argparse at its default `allow_abbrev=True`: vLLM's
FlexibleArgumentParser (vllm/utils/argparse_utils.py: it sets no allow_abbrev, turns '_' into '-' in a `--` word,
and reads `--config <yaml>` into more options) and SGLang's prepare_server_args (python/sglang/srt/server_args.py:
`argparse.ArgumentParser(prog="sglang serve")`, `--config` merged by ConfigArgumentMerger). So an unambiguous
prefix is the option it begins (`trust_remote` is `--trust-remote-code`), every alias and `--no-` negation of an
option is that option, and a prefix of two options is an error that stops the engine.

The options, their aliases, negations, value types, nargs and choices come from the pinned release's own parser
(gridready/data/engine_cli/<engine>-<version>.json, dumped by tools/engine_cli_dump.py). Refused, each as one line
naming the key: an option gridready owns (every option the flags it renders resolve to, with all their spellings,
and those it sets through another channel), one that loads code or files or follows a moving ref (NAMED and
the words of its name), one the parser does not know or finds ambiguous, and a value the option's type, nargs or
choices refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[1] / "data"
LABEL = {"vllm": "vLLM", "sglang": "SGLang"}

# Every flag gridready's renderers write on a tier's command line (serving/vllm.py serve_args and engine_kwargs,
# serving/sglang.py launch_args), with the tier field that sets it. tests/unit/spec/test_engine_options.py renders
# every branch of both and holds this to exactly what they write, both ways; the owned options are the table's
# options these flags resolve to, so their aliases and negations come with them.
RENDERED: dict[str, dict[str, str]] = {
    "vllm": {
        "--served-model-name": "served_name", "--host": "(the leader's service address)", "--port": "port",
        "--distributed-executor-backend": "(ray across nodes, mp inside one)",
        "--tensor-parallel-size": "tensor_parallel", "--pipeline-parallel-size": "pipeline_parallel",
        "--max-model-len": "max_model_len", "--gpu-memory-utilization": "gpu_memory_utilization",
        "--max-num-seqs": "max_num_seqs", "--enable-prefix-caching": "enable_prefix_caching",
        "--enable-chunked-prefill": "enable_chunked_prefill", "--no-enable-prefix-caching": "enable_prefix_caching",
        "--no-enable-chunked-prefill": "enable_chunked_prefill", "--dtype": "dtype",
        "--kv-cache-dtype": "kv_cache_dtype",
        "--revision": "model.revision", "--max-num-batched-tokens": "max_num_batched_tokens",
        "--quantization": "quantization", "--enable-lora": "lora_adapters", "--max-loras": "max_loras",
        "--max-lora-rank": "max_lora_rank", "--trust-remote-code": "trust_remote_code",
        "--lora-modules": "lora_adapters",
    },
    "sglang": {
        "--model-path": "model", "--served-model-name": "served_name", "--host": "(the leader's service address)",
        "--port": "port", "--tp-size": "tensor_parallel", "--pp-size": "pipeline_parallel",
        "--context-length": "max_model_len", "--mem-fraction-static": "gpu_memory_utilization",
        "--max-running-requests": "max_num_seqs", "--dtype": "dtype", "--kv-cache-dtype": "kv_cache_dtype",
        "--schedule-policy": "sglang.schedule_policy", "--page-size": "sglang.page_size",
        "--enable-metrics": "(always on: the benchmark and the monitoring read /metrics)",
        "--revision": "model.revision", "--nnodes": "pipeline_parallel", "--node-rank": "pipeline_parallel",
        "--dist-init-addr": "sglang.dist_init_port", "--quantization": "quantization",
        "--disable-radix-cache": "enable_prefix_caching", "--chunked-prefill-size": "enable_chunked_prefill",
        "--enable-lora": "lora_adapters", "--max-loras-per-batch": "max_loras", "--max-lora-rank": "max_lora_rank",
        "--lora-paths": "lora_adapters", "--trust-remote-code": "trust_remote_code",
    },
}
# Options gridready sets through another channel than these flags: the model (vLLM's positional model_tag, where
# FlexibleArgumentParser moves `--model`), secrets (vLLM reads VLLM_API_KEY; SGLang's key is in the tier's 0600
# `--config` file), replicas (each one its own engine, so no data parallelism inside one), the nodes and GPUs
# placement gives a replica, and the weights (the node's pre-downloaded snapshot).
CHANNELS: dict[str, dict[str, str]] = {
    "vllm": {"--model": "model", "--api-key": "(the vault: VLLM_API_KEY)", "--hf-token": "(the vault)",
             "--download-dir": "(the node's model cache)", "--load-format": "(the node's pre-downloaded snapshot)",
             **dict.fromkeys(("--data-parallel-size", "--data-parallel-size-local", "--data-parallel-rank",
                              "--data-parallel-start-rank", "--data-parallel-backend", "--data-parallel-hybrid-lb",
                              "--data-parallel-external-lb", "--data-parallel-multi-port-external-lb"), "replicas"),
             **dict.fromkeys(("--nnodes", "--node-rank", "--prefill-context-parallel-size"),
                             "(the nodes and GPUs gridready places: tensor_parallel, pipeline_parallel)"),
             "--headless": "(the leader serves the API)"},
    "sglang": {"--api-key": "(the vault, in the tier's 0600 --config file)", "--admin-api-key": "(the vault)",
               "--ssl-keyfile-password": "(the vault)", "--config": "(the tier's 0600 --config file)",
               "--dp-size": "replicas", "--download-dir": "(the node's model cache)",
               "--load-format": "(the node's pre-downloaded snapshot)",
               **dict.fromkeys(("--base-gpu-id", "--gpu-id-step"), "(the GPUs gridready places)")},
}

# Options that load code or files, follow a moving ref, open a listener or reach out: decided per option by the
# words of its name, with the reason the line gives. docs/security.md ("Trust boundaries: engine options").
NAMED = {
    "--config": "loads more options from a file, past these checks",
    "--tokenizer": "loads a tokenizer from another repository or path than the pinned model",
    "--speculative-token-map": "loads a token map from a file the inventory names",
    "--allowed-local-media-path": "lets API clients read the node's files under that path",
    "--root-path": "moves the API under a prefix that gridready's health checks, router and benchmark do not use",
    "--fastapi-root-path": "moves the API under a prefix that gridready's health checks, router and benchmark do "
                           "not use",
    "--trust-request-chat-template": "lets API clients send chat templates for the engine to render",
    "--enable-custom-logit-processor": "lets API clients send serialized logit processors (code) to run",
    "--tool-server": "connects the engine to tool servers at addresses gridready does not know",
    "--default-mm-loras": "loads adapters from paths outside the tier's lora_adapters",
    "--help": "prints the help and exits: the engine would not serve",
}
# Options taken with some values only: (engine, option string) -> (the values allowed, why the others are refused)
_TEMPLATE_FILE = ("reads a file on the node into every prompt (/proc/self/environ would put the engine's keys "
                  "there); the pinned model's own template applies")
SOME_VALUES: dict[tuple[str, str], tuple[Callable[[str], bool], str]] = {
    ("vllm", "--chat-template"): (lambda v: False, _TEMPLATE_FILE),  # a path, or an inline Jinja template
    ("sglang", "--chat-template"): (lambda v: "/" not in v, _TEMPLATE_FILE + "; a built-in template's name "
                                    "(no '/') is taken"),
    ("sglang", "--completion-template"): (lambda v: "/" not in v, _TEMPLATE_FILE + "; a built-in template's "
                                          "name (no '/') is taken"),
    ("vllm", "--generation-config"): (lambda v: v in ("auto", "vllm"), "takes auto or vllm here: a folder path "
                                      "loads the sampling defaults from files the inventory names"),
}
# Names the words below would catch but that load nothing: the API paths not to log, the model's own layers.
ALLOWED = {"--disable-access-log-for-endpoints", "--lora-target-modules"}
# A value that names a file on the node, whatever the option's name says (an absolute or home path, a file URL)
FILE_VALUE = re.compile(r"/|~|file:", re.IGNORECASE | re.ASCII)
_ADDRESS = "sends to, loads from or binds an address the inventory names, which gridready does not place"
LAST_WORD = {
    "config": "takes a configuration object that can name modules to import, models to download or files to read, "
              "which no option table can check",
    "model": "names another model to download or load",
    "revision": "follows a branch or tag of a repository (a moving ref); the node serves the tier's pinned "
                "model.revision from its pre-downloaded snapshot",
    "port": "opens or reaches a port that the tier's firewall and gridready's placement do not know",
    "ports": "opens or reaches ports that the tier's firewall and gridready's placement do not know",
    "loader": "imports code or swaps the engine's own by name",
    **dict.fromkeys(("address", "addr", "ip", "url", "urls", "endpoint", "endpoints"), _ADDRESS),
}
ANY_WORD = {
    **dict.fromkeys(("path", "paths", "file", "dir", "keyfile", "certfile", "certs"), "reads or writes files on the "
                    "node at a path the inventory names"),
    **dict.fromkeys(("plugin", "module", "modules", "cls", "middleware", "processors", "overrides"),
                    "imports code or swaps the engine's own by name"),
}


@dataclass(frozen=True)
class Option:
    """One action of the parser: every string it answers to, and how it takes a value."""

    flags: tuple[str, ...]
    takes_value: bool
    nargs: int | str | None
    type: str | None
    accepts_none: bool
    choices: tuple[Any, ...] | None


@dataclass(frozen=True)
class Table:
    engine: str
    version: str
    options: tuple[Option, ...]
    by_flag: dict[str, Option]
    allow_abbrev: bool = True

    @property
    def label(self) -> str:
        return f"{LABEL.get(self.engine, self.engine)} {self.version}"


HELP = Option(("--help", "-h"), False, 0, None, False, None)  # argparse adds it to every parser


@cache
def table(engine: str, version: str) -> Table | None:
    """The pinned release's parser, or None where gridready has no table for that release."""
    path = DATA / "engine_cli" / f"{engine}-{version}.json"
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    options = tuple(Option(tuple(o["flags"]), bool(o["takes_value"]), o["nargs"], o["type"],
                           bool(o["accepts_none"]), tuple(o["choices"]) if o["choices"] else None)
                    for o in raw["options"])
    by_flag = {flag: opt for opt in (*options, HELP) for flag in opt.flags}
    # Tables dumped before tools/engine_cli_dump.py recorded the parser's own settings: argparse's default, which
    # both engines keep (vllm/utils/argparse_utils.py FlexibleArgumentParser; sglang/srt/server_args.py
    # prepare_server_args)
    abbrev = bool(raw.get("parser", {}).get("allow_abbrev", True))
    return Table(engine, version, options, by_flag, abbrev)


@cache
def sglang_pin() -> str:
    """gridready/data/sglang_versions.yml's release (serving.sglang_versions reads the same file)."""
    return str(yaml.safe_load((DATA / "sglang_versions.yml").read_text())["sglang"]["version"])


def flag_of(key: str) -> str:
    """The word gridready renders for an extra option's key."""
    return "--" + key.replace("_", "-")


@dataclass(frozen=True)
class Resolution:
    """What argparse makes of one option word: the option and the string it matched, or the ambiguous matches."""

    word: str
    option: Option | None = None
    flag: str | None = None
    matches: tuple[str, ...] = ()


def resolve(tbl: Table, word: str) -> Resolution:
    """argparse's ArgumentParser._parse_optional for a `--` word with allow_abbrev: the exact string, then the
    part before '=', then every option string the word begins; more than one is "ambiguous option" (Python 3.11 and
    3.12 say so even when they are strings of one action, so this does too), none is "unrecognized arguments"."""
    if word in tbl.by_flag:
        return Resolution(word, tbl.by_flag[word], word)
    head = word.split("=", 1)[0]
    if head in tbl.by_flag:
        return Resolution(word, tbl.by_flag[head], head)
    prefixes = word.startswith("--") and tbl.allow_abbrev
    hits = tuple(sorted(f for f in tbl.by_flag if f.startswith(head))) if prefixes else ()
    if len(hits) == 1:
        return Resolution(word, tbl.by_flag[hits[0]], hits[0])
    return Resolution(word, matches=hits)


def owned(tbl: Table) -> dict[Option, str]:
    """The options gridready sets, each with the tier field (or the channel) that sets it."""
    out: dict[Option, str] = {}
    for flag, field in {**RENDERED.get(tbl.engine, {}), **CHANNELS.get(tbl.engine, {})}.items():
        hit = resolve(tbl, flag)
        if hit.option is not None:
            out.setdefault(hit.option, field)
    return out


def refused_by_policy(option: Option) -> str | None:
    """Why an option is refused whatever its value (NAMED, then the words of its names); None when it is not."""
    if ALLOWED.intersection(option.flags):
        return None
    for flag in option.flags:
        if flag in NAMED:
            return NAMED[flag]
    for flag in option.flags:
        words = flag.lstrip("-").split("-")
        if words[-1] in LAST_WORD:
            return LAST_WORD[words[-1]]
        for word in words:
            if word in ANY_WORD:
                return ANY_WORD[word]
    return None


def _owner_text(field: str) -> str:
    return f"which gridready owns {field}" if field.startswith("(") else \
        f"which gridready owns (set the tier's {field})"


def _convert(option: Option, text: str) -> Any:
    """The value as the option's type converts it (argparse calls the type on the string); ValueError if it can't."""
    if option.accepts_none and text == "None":
        return None
    if option.type == "int":
        return int(text)
    if option.type == "float":
        return float(text)
    return text


def _choices_text(choices: tuple[Any, ...]) -> str:
    shown = sorted(choices, key=lambda c: (not isinstance(c, int | float), c if isinstance(c, int | float) else
                                           str(c)))
    return ", ".join("None" if c is None else str(c) for c in shown)


def check_value(tbl: Table, option: Option, flag: str, value: str | int | float | bool) -> str | None:
    """Why the rendered value would be refused by the option (its nargs, type, choices), else None."""
    where = f"{flag} ({tbl.label})"
    if not option.takes_value:
        if isinstance(value, bool):
            return None
        return f"{where} is a switch without a value: give true or false, not {value!r}"
    if isinstance(value, bool):
        if option.nargs == "?":
            return None
        return f"{where} takes a value ({option.type or 'a string'}), not {str(value).lower()}"
    text = str(value)
    try:
        converted = _convert(option, text)
    except ValueError:
        return f"{where} takes {'an' if option.type == 'int' else 'a'} {option.type}, not {text!r}"
    if option.choices is not None and converted not in option.choices and text not in option.choices:
        return f"{text} is not a value {where} accepts: one of {_choices_text(option.choices)}"
    return None


def problems(engine: str, version: str, key: str, value: str | int | float | bool) -> str | None:
    """The one-line reason an extra option is refused, or None where the pinned parser takes it for an option that
    is the operator's to set."""
    tbl = table(engine, version)
    if tbl is None:
        return (f"gridready has no option table for {LABEL.get(engine, engine)} {version} "
                f"(gridready/data/engine_cli/{engine}-{version}.json) to resolve extra_engine_args against")
    word = flag_of(key)
    hit = resolve(tbl, word)
    if hit.option is None:
        if hit.matches:
            shown = ", ".join(hit.matches[:6]) + (", ..." if len(hit.matches) > 6 else "")
            return f"{word} is ambiguous to {tbl.label}'s parser (it could match {shown}); write the option in full"
        return f"{word} is not an option of {tbl.label}: the engine would refuse to start"
    if owner := owner_problem(engine, version, key):
        return owner
    if engine == "vllm" and value is False:  # rendered as --no-<key>: that word must resolve too
        negation = resolve(tbl, "--no-" + word[2:])
        if negation.option is None or negation.option is not hit.option:
            return (f"false renders --no-{word[2:]}, which {tbl.label} does not have for {hit.flag}; "
                    "leave the key out for the engine's default")
    for flag in hit.option.flags:
        allowed, why = SOME_VALUES.get((engine, flag), (None, ""))
        if allowed is not None and not allowed(str(value)):
            return f"resolves to {hit.flag}, which {why}"
    reason = refused_by_policy(hit.option)
    if reason is not None and not any((engine, f) in SOME_VALUES for f in hit.option.flags):
        return f"resolves to {hit.flag}, which {reason}"
    if isinstance(value, str) and FILE_VALUE.match(value) and not ALLOWED.intersection(hit.option.flags):
        return (f"resolves to {hit.flag}, given a path on the node: gridready passes the engine no file the "
                "inventory names")
    return check_value(tbl, hit.option, hit.flag or word, value)


def owned_option(engine: str, version: str, key: str) -> tuple[str, str] | None:
    """(the option string the key resolves to, the tier field or channel that sets it) where gridready owns it."""
    tbl = table(engine, version)
    if tbl is None:
        return None
    hit = resolve(tbl, flag_of(key))
    field = owned(tbl).get(hit.option) if hit.option is not None else None
    return (hit.flag or "", field) if field is not None else None


def owner_problem(engine: str, version: str, key: str) -> str | None:
    """The line for an extra option that resolves to one gridready owns, else None."""
    found = owned_option(engine, version, key)
    if found is None:
        return None
    flag, field = found
    if flag == flag_of(key):  # the option's own spelling
        return f"gridready sets this argument itself {field}" if field.startswith("(") else \
            f"gridready sets this argument itself; use the tier's {field}"
    return f"resolves to {flag}, {_owner_text(field)}"


FIELD = re.compile(r"[a-z_]+(\.[a-z_]+)?")
LORA_FIELDS = {"max_loras", "max_lora_rank"}  # rendered only with lora_adapters


def _field(tier: Any, path: str) -> Any:
    value = tier
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


def rendered_values(engine: str, version: str, tier: Any) -> Iterator[tuple[str, str]]:
    """(tier field, reason) for each value gridready renders from a tier field that the pinned option's type or
    choices refuse (vLLM 0.33's --max-lora-rank takes 1, 8, 16, ... 512 only: a rank of 4 stops the engine)."""
    tbl = table(engine, version)
    if tbl is None:
        return
    for flag, path in RENDERED.get(engine, {}).items():
        if not FIELD.fullmatch(path) or (path in LORA_FIELDS and not tier.lora_adapters):
            continue
        value = _field(tier, path)
        hit = resolve(tbl, flag)
        if hit.option is None or value is None or isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        if value == "derive":
            continue
        if reason := check_value(tbl, hit.option, flag, value):
            yield path, reason


def canonical_key(engine: str, version: str, key: str) -> str:
    """The key spelled as the option it resolves to (an abbreviation in full), for engines that take keyword
    arguments rather than a command line (Ray Serve LLM's engine_kwargs)."""
    tbl = table(engine, version)
    hit = resolve(tbl, flag_of(key)) if tbl is not None else None
    if hit is None or hit.flag is None or not hit.flag.startswith("--"):
        return key
    return hit.flag[2:].replace("-", "_")
