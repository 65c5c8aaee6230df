"""Sort the surviving mutants of a mutmut work directory by the one syntax node each changes (docs/mutation.md).

    python docs/examples/mutation/classify_survivors.py /tmp/gridready-mutation

Needs the mutated sources (`mutants/gridready/**/*.py` beside their `.meta`), i.e. the whole `state.tar.gz` of
benchmarks/mutation_device_run.sh, not only results-meta.tar.gz. Rough: the first differing AST node decides.
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

Diff = tuple[object, object, object]
CONDITION = (ast.cmpop, ast.boolop, ast.unaryop, ast.UnaryOp)


def diff(a: object, b: object, parent: object = None) -> list[Diff]:
    """The smallest differing (original, mutant, parent) nodes of two trees."""
    if type(a) is not type(b):
        return [(a, b, parent)]
    if not isinstance(a, ast.AST):
        return [] if a == b else [(a, b, parent)]
    out: list[Diff] = []
    for name in a._fields:
        va, vb = getattr(a, name, None), getattr(b, name, None)
        if isinstance(va, list) and isinstance(vb, list):
            if len(va) != len(vb):
                return [*out, (a, b, parent)]
            for x, y in zip(va, vb, strict=True):
                out += diff(x, y, a)
        else:
            out += diff(va, vb, a)
    return out


def text_kind(value: str) -> str:
    return "text of a message" if " " in value.strip() else "key or name string"


def kind(d: Diff) -> str:
    a, b, parent = d
    if isinstance(a, str) and isinstance(b, str):
        return text_kind(a) if isinstance(parent, ast.Constant) else "other"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return "number/constant"
    if (isinstance(a, ast.Constant) and a.value is None) or (isinstance(b, ast.Constant) and b.value is None):
        return "value -> None"
    if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
        return "number/constant"
    if isinstance(a, CONDITION) or isinstance(b, CONDITION) or isinstance(parent, (ast.Compare, ast.BoolOp)):
        return "condition (comparison/and/or/not)"
    if isinstance(a, (ast.operator, ast.AugAssign, ast.Assign)) or isinstance(parent, (ast.BinOp, ast.AugAssign)):
        return "arithmetic/assignment operator"
    if isinstance(a, (ast.Call, ast.keyword)) or isinstance(parent, ast.Call):
        return "call argument dropped/changed"
    return "other"


def main(work: Path) -> None:
    total: Counter[str] = Counter()
    per_pkg: dict[str, Counter[str]] = defaultdict(Counter)
    for meta in sorted(work.glob("mutants/gridready/**/*.py.meta")):
        survived = [k for k, v in json.loads(meta.read_text())["exit_code_by_key"].items() if v == 0]
        if not survived:
            continue
        tree = ast.parse(meta.with_suffix("").read_text())
        funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        pkg = meta.relative_to(work / "mutants" / "gridready").parts[0]
        for key in survived:
            name = key.rsplit(".", 1)[1]
            orig = funcs[name.split("__mutmut_")[0] + "__mutmut_orig"]
            mutant = funcs[name]
            found = diff(ast.Module(body=orig.body, type_ignores=[]), ast.Module(body=mutant.body, type_ignores=[]))
            c = kind(found[0]) if len(found) == 1 else ("other" if found else "identical?")
            total[c] += 1
            per_pkg[pkg][c] += 1
    print(sum(total.values()), total.most_common())
    for pkg, c in per_pkg.items():
        print(pkg, sum(c.values()), c.most_common())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
