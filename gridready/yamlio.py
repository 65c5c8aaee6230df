"""YAML loading that refuses duplicate keys and reports file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gridready import charset, safefile

VAULT_HEADER = "$ANSIBLE_VAULT;"
MAX_BYTES = 1 << 20  # an inventory file is a few KiB; 1 MiB is far beyond any real one
MAX_NODES = 100_000  # nodes after expanding aliases: stops a "billion laughs" fan-out before it is built
MAX_DEPTH = 64  # nesting of mappings and sequences
MAX_ARTIFACT_BYTES = 256 << 20  # a probe.json or a signed bundle: an 8-GPU probe is a few MiB


class YamlError(Exception):
    """`where` is a key path or `line L column C`; `str()` is the message alone."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


MERGE_TAG = "tag:yaml.org,2002:merge"
MERGE = "<<"  # the merge key: at most once per mapping
# Tags a document may write explicitly: the core schema's own, which make what the plain value would make or say so
# (`!!str 0755` stays a string), Ansible's `!vault` and `!unsafe`, and `!` (a plain string). Any other (`!!binary`,
# `!!set`, `!!omap`, `!!pairs`, `!!timestamp`, `!!python/...`, a local `!tag`) makes a value of a type no key of an
# inventory takes, or none at all: refused with the key and where it is, before anything is built.
YAML_TAG = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset({"!", "!vault", "!unsafe", *(YAML_TAG + t for t in ("str", "int", "float", "bool", "null",
                                                                            "map", "seq"))})


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings fail on a repeated key instead of keeping the last one, and whose scalars that
    resolve to a type but do not convert (a 5,000-digit int past Python's int_max_str_digits, `2020-02-30`,
    `!!float xyz`) fail with their line and column instead of a bare ValueError."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as err:
            kind = node.tag.rsplit(":", 1)[-1]
            raise YamlError(_where(node), f"not a valid {kind}: {str(err).split(';')[0]}") from None


def _where(node: yaml.Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1} column {mark.column + 1}"


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """Keys must be scalars (`a: {{ x }}` unquoted makes the value a mapping whose key is a mapping: YAML's most
    common Ansible typo) and unique among the mapping's own keys. A `<<` merge brings in keys the mapping does not
    set itself (the merge-key spec, yaml.org/type/merge.html: the mapping's own keys win, and of several merged
    mappings the first listed wins); SafeLoader's flatten_mapping puts merged keys first, so the own ones, built
    last, override them."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise YamlError(_where(key_node), "a key must be a plain value, not a list or mapping (an unquoted "
                                              "{{ ... }} template reads as one: quote the whole value)")
        key = MERGE if key_node.tag == MERGE_TAG else loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise YamlError(_where(key_node), f"duplicate key {key!r}")
        seen.add(key)
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
class VaultValue(str):
    """An inline `!vault |` value: reads as the marker `<vault-encrypted>`; `ciphertext` is the vault text, which
    only gridready.vault opens (in memory, at validate)."""

    ciphertext: str = ""


def _vault_value(loader: _StrictLoader, node: yaml.Node) -> VaultValue:
    value = VaultValue("<vault-encrypted>")
    value.ciphertext = loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else ""
    return value


# Ansible's !vault tag on single values: an opaque marker here, never decrypted by the loader.
_StrictLoader.add_constructor("!vault", _vault_value)
# Ansible's !unsafe marks a scalar as never templated: the value itself, as data.
_StrictLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node)
                              if isinstance(node, yaml.ScalarNode) else "<unsafe>")


def read_capped(path: Path, limit: int = MAX_BYTES, root: Path | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (gridready.safefile: beneath `root` when given, a link
    out of it refused unread); a FIFO, device or directory is refused unopened."""
    try:
        return safefile.read_bytes(path, limit, root)
    except safefile.UnsafeFile as err:
        raise YamlError("(file)", str(err)) from None


def is_vault_file(path: Path, root: Path | None = None) -> bool:
    return read_capped(path, root=root)[: len(VAULT_HEADER)].decode(errors="replace") == VAULT_HEADER


def _check_shape(root: yaml.Node) -> None:
    """Refuse nesting deeper than MAX_DEPTH and documents that expand to more than MAX_NODES nodes.

    Aliases share nodes, so sizes are memoised per node: the check costs one visit per distinct node. The depth
    check here catches an alias inside its own anchor (`&a [*a]`), which the event stream cannot show."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            mark = node.start_mark
            raise YamlError(f"line {mark.line + 1} column {mark.column + 1}",
                            f"nested deeper than {MAX_DEPTH} levels")
        if id(node) in sizes:
            return sizes[id(node)]
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        if total > MAX_NODES:
            raise YamlError("(file)", f"expands to more than {MAX_NODES} nodes (aliases fanning out)")
        sizes[id(node)] = total
        return total

    size(root, 0)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(YAML_TAG) if tag.startswith(YAML_TAG) else tag


class _KeyPath:
    """The key path of each node as the event stream goes by (`serving.tiers[0].name`)."""

    def __init__(self) -> None:
        self.frames: list[list[Any]] = []  # [path, is_mapping, expecting_a_key, last key or next index]

    def enter(self, event: yaml.NodeEvent) -> str:
        """The path of the node `event` starts (a key's own path ends in `(key)`)."""
        if not self.frames:
            return "(top level)"
        frame = self.frames[-1]
        path, mapping = frame[0], frame[1]
        if not mapping:
            frame[3] += 1
            return f"{path}[{frame[3] - 1}]"
        if frame[2]:
            frame[2] = False
            frame[3] = event.value if isinstance(event, yaml.ScalarEvent) else "?"
            return f"{path + '.' if path else ''}{charset.visible(str(frame[3]))} (key)"
        frame[2] = True
        return f"{path + '.' if path else ''}{charset.visible(str(frame[3]))}"

    def push(self, path: str, mapping: bool) -> None:
        self.frames.append(["" if path == "(top level)" else path, mapping, True, 0])

    def pop(self) -> None:
        self.frames.pop()


def _check_events(text: str) -> None:
    """From the event stream, before anything recursive sees the document: refuse nesting deeper than MAX_DEPTH and
    any explicit tag outside ALLOWED_TAGS (named by line, column and key path).

    PyYAML's parser is a state machine, but its composer and constructor recurse once per level: a 20,000-deep
    `[[[...]]]` would hit the interpreter's recursion limit inside them, where objects finalised during the unwind
    raise again (unraisable errors), instead of failing here with a line and column."""
    depth = -1  # the top-level collection is depth 0, as in _check_shape
    keys = _KeyPath()
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.NodeEvent):
            path = keys.enter(event)
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in ALLOWED_TAGS:  # None: no tag written
                mark = event.start_mark
                raise YamlError(f"line {mark.line + 1} column {mark.column + 1}",
                                f"{path}: the tag {charset.visible(_short_tag(tag))} is not allowed here: a value is "
                                "a plain string, number, boolean, list or mapping (tags allowed: !!str, !!int, "
                                "!!float, !!bool, !!null, !!map, !!seq, !vault, !unsafe)")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise YamlError(f"line {mark.line + 1} column {mark.column + 1}",
                                f"nested deeper than {MAX_DEPTH} levels")
            keys.push(path, isinstance(event, yaml.MappingStartEvent))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            keys.pop()



def _control_chars(text: str) -> int | None:
    """Line (1-based) of the first control character other than tab, newline and carriage return."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if any((ord(c) < 32 and c not in "\t\r") or ord(c) == 127 for c in line):
            return lineno
    return None


def load_yaml(path: Path, root: Path | None = None) -> Any:
    """Parse one YAML document (read beneath `root` when given); raises YamlError (never anything else) on any
    unreadable or hostile input."""
    data = read_capped(path, root=root)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlError("(file)", f"not UTF-8 (byte {err.start})") from None
    bad_line = _control_chars(text)
    if bad_line is not None:
        raise YamlError(f"line {bad_line}", "control character in the text")
    loader = _StrictLoader(text)
    try:
        _check_events(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "yaml"
        raise YamlError(where, f"YAML syntax error: {err.problem or err.context}") from err
    except yaml.YAMLError as err:
        raise YamlError("yaml", f"YAML error: {type(err).__name__}") from None
    except RecursionError:
        raise YamlError("(file)", f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
