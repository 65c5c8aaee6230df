"""config.pbtxt: written from plain dicts, then parsed with tritonclient's model_config_pb2.

Every config gridready writes goes through `render()`: the dict is printed as protobuf text, parsed back into
`inference.ModelConfig` (so a misspelt field or enum fails here, with line and column), checked for leftover
`${...}` placeholders and unknown `parameters` keys, and re-printed canonically by `text_format`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridready.errors import InvalidInput

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2

PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
# Map fields of ModelConfig (and of ensemble steps): written as repeated {key value} entries.
_STRING_VALUE_MAPS = {"parameters"}  # value is ModelParameter {string_value}
_PLAIN_MAPS = {"input_map", "output_map"}


class RepositoryError(InvalidInput):
    """A generated model repository is wrong; nothing was written (exit 2, one line per problem)."""


@dataclass(frozen=True)
class Enum:
    """A protobuf enum value (printed bare, e.g. TYPE_INT32, KIND_CPU)."""

    name: str


def _scalar(value: Any) -> str:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot print {value!r} as protobuf text")


def _lines(msg: Mapping[str, Any], indent: int) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    for key, value in msg.items():
        if value is None:
            continue
        if key in _STRING_VALUE_MAPS or key in _PLAIN_MAPS:
            for k, v in value.items():
                inner = {"string_value": v} if key in _STRING_VALUE_MAPS else None
                if inner is None:
                    out.append(f"{pad}{key} {{ key: {_scalar(k)} value: {_scalar(v)} }}")
                else:
                    out.append(f"{pad}{key} {{")
                    out.append(f"{pad}  key: {_scalar(k)}")
                    out.append(f"{pad}  value {{ string_value: {_scalar(v)} }}")
                    out.append(f"{pad}}}")
        elif isinstance(value, Mapping):
            out.append(f"{pad}{key} {{")
            out.extend(_lines(value, indent + 1))
            out.append(f"{pad}}}")
        elif isinstance(value, Sequence) and not isinstance(value, str):
            if value and all(isinstance(v, Mapping) for v in value):
                for item in value:
                    out.append(f"{pad}{key} {{")
                    out.extend(_lines(item, indent + 1))
                    out.append(f"{pad}}}")
            else:
                out.append(f"{pad}{key}: [ {', '.join(_scalar(v) for v in value)} ]")
        else:
            out.append(f"{pad}{key}: {_scalar(value)}")
    return out


def dumps(msg: Mapping[str, Any]) -> str:
    """The dict as protobuf text (not yet validated)."""
    return "\n".join(_lines(msg, 0)) + "\n"


def parse(text: str, source: str) -> model_config_pb2.ModelConfig:
    """Parse config.pbtxt text; a bad field, enum or syntax raises RepositoryError `source:line:col: ...`."""
    # imported on use: the Triton package is imported wherever its pins are read (a GPU machine's test run among
    # them), which needs neither protobuf nor tritonclient
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    cfg = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as err:
        line, col = err.GetLine(), err.GetColumn()
        detail = str(err).split(" : ", 1)[-1]
        where = f"{source}:{line}:{col}" if line is not None else source
        raise RepositoryError(f"{where}: {detail}") from err
    return cfg


def check_placeholders(text: str, source: str) -> None:
    problems = []
    for n, line in enumerate(text.splitlines(), start=1):
        for m in PLACEHOLDER.finditer(line):
            problems.append(f"{source}:{n}:{m.start() + 1}: unfilled template placeholder {m.group(0)}")
    if problems:
        raise RepositoryError(problems)


def check_parameters(cfg: model_config_pb2.ModelConfig, known: frozenset[str], source: str) -> None:
    """Every `parameters` key must be one the model reads; a typo gets a suggestion."""
    problems = []
    for key in sorted(cfg.parameters):
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{source}: parameters: unknown key {key!r} for model {cfg.name!r}{hint}")
        elif PLACEHOLDER.search(cfg.parameters[key].string_value) or not cfg.parameters[key].string_value:
            problems.append(f"{source}: parameters: {key!r} has no value")
    if problems:
        raise RepositoryError(problems)


def render(msg: Mapping[str, Any], source: str, known_parameters: frozenset[str]) -> tuple[str, Any]:
    """Validate a config dict end to end; returns (canonical text, parsed ModelConfig)."""
    text = dumps(msg)
    check_placeholders(text, source)
    cfg = parse(text, source)
    check_parameters(cfg, known_parameters, source)
    from google.protobuf import text_format

    canonical = text_format.MessageToString(cfg)
    parse(canonical, source)  # the round trip must hold
    return canonical, cfg
