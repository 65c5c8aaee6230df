"""YAML loading that refuses duplicate keys and reports file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

VAULT_HEADER = "$ANSIBLE_VAULT;"


class YamlError(Exception):
    """`where` is a key path or `line L column C`; `str()` is the message alone."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings fail on a repeated key instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise YamlError(
                f"line {mark.line + 1} column {mark.column + 1}", f"duplicate key {key!r}"
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# Ansible's !vault tag on single values: keep the node as an opaque marker, never decrypt here.
_StrictLoader.add_constructor("!vault", lambda loader, node: "<vault-encrypted>")


def is_vault_file(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(len(VAULT_HEADER)).decode(errors="replace") == VAULT_HEADER


def load_yaml(path: Path) -> Any:
    """Parse one YAML document; raises YamlError with a line/column on syntax errors."""
    try:
        text = path.read_text()
    except OSError as err:
        raise YamlError("file", f"cannot read: {err.strerror}") from err
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "yaml"
        raise YamlError(where, f"YAML syntax error: {err.problem or err.context}") from err
