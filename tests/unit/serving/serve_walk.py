"""Follow the serve stage's control through its own modules, statically (`ast`), and count how often it climbs
back up and returns (docs/architecture.md, "Serve: steps that run downhill").

The rooms are the modules of gridready/stages/ (the stage's package and the stage pieces it uses); the layers below
(serving, bench, ledger, ...) are libraries and are not followed. From the entry function, every call that names a
function of a room is followed depth first in source order: `f()` of the same module, `f()` imported from a room,
`mod.f()` through a room imported as `mod`; calls inside nested functions (callbacks) count where they are written.
A function is explored once; calling it again still counts the move.

The stage's list is its entry and its steps, in order; every other room is below the list (the helpers its steps
share, gridready/stages/common.py ...), as the layers under stages/ are.

- a move: a call from a function of one room into a function of another;
- a climb: a move into a room of the list that comes earlier than the room it is made from (a room below the list
  comes after all of it): calling back up the list;
- a return: a move into a room of the list that the walk had already entered and left before;
- a revisit: a move into a room below the list that the walk had already entered and left before (counted, not
  limited: going down to a shared helper again is what the layers are for).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Walk:
    rooms: list[str] = field(default_factory=list)  # in the order first entered
    moves: list[tuple[str, str]] = field(default_factory=list)
    climbs: list[tuple[str, str]] = field(default_factory=list)
    returns: list[tuple[str, str]] = field(default_factory=list)
    revisits: list[tuple[str, str]] = field(default_factory=list)


def modules(root: Path, prefix: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module under `root` (a package: its __init__ is `prefix` itself)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").parts
        name = ".".join([prefix, *(p for p in rel if p != "__init__")])
        out[name] = path
    return out


class Module:
    """A room: its top-level functions and how its names resolve to rooms."""

    def __init__(self, name: str, path: Path, rooms: dict[str, Path]) -> None:
        self.name = name
        self.tree = ast.parse(path.read_text(), str(path))
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)}
        self.module_alias: dict[str, str] = {}  # local name -> room
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (room, name there)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
                for a in node.names:
                    local = a.asname or a.name
                    if f"{base}.{a.name}" in rooms:
                        self.module_alias[local] = f"{base}.{a.name}"
                    elif base in rooms:
                        self.imported[local] = (base, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in rooms and a.asname:
                        self.module_alias[a.asname] = a.name

    def calls(self, function: str) -> list[tuple[str, str]]:
        """(room, function) of every call in `function` that names a room's function, in source order."""
        found = []
        for node in ast.walk(self.functions[function]):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in self.functions:
                found.append((node.lineno, node.col_offset, (self.name, func.id)))
            elif isinstance(func, ast.Name) and func.id in self.imported:
                found.append((node.lineno, node.col_offset, self.imported[func.id]))
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id in self.module_alias:
                found.append((node.lineno, node.col_offset, (self.module_alias[func.value.id], func.attr)))
        return [target for *_, target in sorted(found)]


def walk(root: Path, prefix: str, entry: tuple[str, str], order: list[str]) -> Walk:
    """Follow `entry` (room, function) through the rooms under `root` (named from `prefix`); `order` is the stage's
    list, from its entry down (a room not named is below it)."""
    paths = modules(root, prefix)
    loaded: dict[str, Module] = {}

    def room(name: str) -> Module:
        if name not in loaded:
            loaded[name] = Module(name, paths[name], paths)
        return loaded[name]

    def rank(name: str) -> int:
        return order.index(name) if name in order else len(order)

    out = Walk(rooms=[entry[0]])
    explored: set[tuple[str, str]] = set()
    left: set[str] = set()

    def visit(target: tuple[str, str], stack: list[str]) -> None:
        explored.add(target)
        here = target[0]
        for callee in room(here).calls(target[1]):
            there = callee[0]
            if callee[1] not in room(there).functions:
                continue  # a class, a constant or a name the module re-exports
            if there != here:
                out.moves.append((here, there))
                if rank(there) < rank(here):
                    out.climbs.append((here, there))
                if there in left and there not in stack:
                    (out.returns if there in order else out.revisits).append((here, there))
                if there not in out.rooms:
                    out.rooms.append(there)
            if callee not in explored:
                visit(callee, [*stack, there])
            if there != here:
                left.add(there)

    visit(entry, [entry[0]])
    return out
