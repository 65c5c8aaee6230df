"""Write docs/reference.md: every task of gridready/commands.py with its docstring and flags, read from the invoke
collection the command line itself parses with (tests/unit/test_command_reference.py compares it with `--list`
and each `--help`).

    .venv/bin/python tools/command_reference.py           # rewrite docs/reference.md
    .venv/bin/python tools/command_reference.py --check   # exit 1 when the committed page is stale
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "reference.md"

HEAD = """# Command reference

Generated from the task collection (`gridready/commands.py`) by `tools/command_reference.py`; `--help <task>`
prints the same. Every task runs as `gridready -i <customer> <task>`, from any folder (`GRIDREADY_INVENTORY` names
the inventory when `-i` is not given; there is no default); several tasks on one line run in order
(`gridready -i <customer> provision certify serve`). Exit codes and environment variables: the README's *Exit
codes* and *Environment*; what each stage writes: `docs/architecture.md`.

The program's own flags (before the first task):

| flag | value | what it does |
|---|---|---|
{core}
"""


def _flags(names: tuple[str, ...]) -> str:
    return ", ".join(f"`-{n}`" if len(n) == 1 else f"`--{n}`" for n in sorted(names, key=len))


def _value(arg: Any) -> str:
    if arg.kind is bool:
        return ""
    return {str: "STRING", int: "INT", float: "FLOAT"}.get(arg.kind, getattr(arg.kind, "__name__", "VALUE").upper())


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def task_rows(collection: Any) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(dotted task name, docstring, [(flags, value, help)]) in `--list` order."""
    out = []
    for name in collection.task_names:
        task = collection[name]
        doc = inspect.getdoc(task.body) or ""
        args = sorted(task.get_arguments(), key=lambda a: a.names[0])
        out.append((name, doc, [(_flags(a.names), _value(a), _cell(a.help)) for a in args]))
    return out


def _tasks() -> Any:
    sys.path.insert(0, str(REPO))
    from gridready import commands

    return commands


def task_names() -> list[str]:
    return list(_tasks().ns.task_names)


def render() -> str:
    tasks = _tasks()
    from gridready.program import make_program

    core = make_program().core_args()
    rows = "\n".join(f"| {_flags(a.names)} | {_value(a) if a.name != 'help' else '[TASK]'} | {_cell(a.help)} |"
                     for a in core)
    parts = [HEAD.format(core=rows)]
    for name, doc, rows in task_rows(tasks.ns):
        parts.append(f"\n## `{name}`\n\n{doc}\n")
        if rows:
            parts.append("\n| flag | value | what it does |\n|---|---|---|\n")
            parts += [f"| {f} | {v} | {h} |\n" for f, v, h in rows]
        else:
            parts.append("\nNo flags.\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE.relative_to(REPO)} is stale: run tools/command_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
