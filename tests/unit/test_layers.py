"""The layering of docs/architecture.md, read from the import graph of gridready/ with `ast`.

Every `import gridready...` counts, at module level or inside a function. A part of gridready (a top-level module
or a subpackage) may import only parts on a strictly lower layer; the spec imports nothing above its floor; the
gates import no stage, report or sandbox; and there are no cycles between parts.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from gridready.certify import judge
from gridready.spec import gates

PKG = Path(__file__).resolve().parents[2] / "gridready"

# docs/architecture.md, "Layers": lower numbers are further down; an import must point strictly down.
LAYERS: dict[str, int] = {
    "exitcodes": 0, "safefile": 0, "charset": 0,
    "errors": 1, "catalog": 1, "yamlio": 1, "console": 1, "secretscan": 1,
    "spec": 2,
    "inventory_checks": 2,
    "artifacts": 3, "inventory": 3, "matrix": 3,
    "contracts": 4, "provision_vars": 4, "sample": 4, "vault": 4, "probe": 4, "bastion": 4,
    "ledger": 5, "evidence": 5,
    "certify": 5, "bench": 5, "monitoring": 5, "discovery": 5, "ansible": 5, "usage": 5, "envvars": 5,
    "report": 6, "serving": 6, "health": 6,
    "stacks": 7,
    "pulumi": 8,
    "stages": 9,
    "cli": 10,
    "commands": 11,
    "program": 12,
}
# The spec's floor: the standard library, pydantic, yaml and these parts of gridready.
SPEC_MAY_IMPORT = {"catalog"}
GATES_MUST_NOT_IMPORT = {"stages", "report", "ansible", "pulumi", "cli", "inventory"}


def part_of(module: str) -> str:
    """`gridready.certify.hca` -> certify; `gridready.cli` -> cli."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gridready"


def module_of(path: Path) -> tuple[str, bool]:
    """(dotted module name, is a package __init__) of a file under gridready/."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__"), rel.name == "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every gridready import in a file: absolute, relative (resolved) and names imported from
    `gridready` itself."""
    name, is_pkg = module_of(path)
    package = name.split(".") if is_pkg else name.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("gridready.")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            if base == "gridready":
                found += [(node.lineno, f"gridready.{a.name}") for a in node.names]
            elif base.startswith("gridready."):
                found.append((node.lineno, base))
    return found


def edges() -> list[tuple[str, str, str]]:
    """(importing part, imported part, where) for every import across parts."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        src = part_of(module_of(path)[0])
        for line, module in imports(path):
            dst = part_of(module)
            if dst != src:
                out.append((src, dst, f"{path.relative_to(PKG.parent)}:{line}"))
    return out


def test_every_part_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in PKG.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert parts - set(LAYERS) == set(), "add the new part to docs/architecture.md and LAYERS"


def test_imports_point_strictly_down():
    wrong = [f"{where}: {src} (layer {LAYERS[src]}) imports {dst} (layer {LAYERS[dst]})"
             for src, dst, where in edges() if LAYERS[dst] >= LAYERS[src]]
    assert wrong == []


def test_the_spec_imports_nothing_above_its_floor():
    assert [f"{where}: spec imports {dst}" for src, dst, where in edges()
            if src == "spec" and dst not in SPEC_MAY_IMPORT] == []
    assert [f"{where}: catalog imports {dst}" for src, dst, where in edges() if src == "catalog"] == []


def sandbox_imports(path: Path) -> list[int]:
    """Lines of a file that import the top-level `sandbox` package (absolute imports; the product has no other)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            lines += [node.lineno for a in node.names if a.name == "sandbox" or a.name.startswith("sandbox.")]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                node.module == "sandbox" or node.module.startswith("sandbox.")):
            lines.append(node.lineno)
    return lines


def test_the_product_never_imports_the_sandbox():
    wrong = [f"{p.relative_to(PKG.parent)}:{line}" for p in sorted(PKG.rglob("*.py")) for line in sandbox_imports(p)]
    assert wrong == []
    assert not (PKG / "sandbox").exists(), "the simulated fleet lives in the top-level sandbox/ package"


def test_the_sandbox_check_sees_an_import(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    from sandbox.sim import simcore\n    import sandbox\n")
    assert sandbox_imports(probe) == [2, 3]


def test_gates_import_no_stage_or_report():
    assert [f"{where}: certify imports {dst}" for src, dst, where in edges()
            if src == "certify" and dst in GATES_MUST_NOT_IMPORT] == []


def test_no_cycles_between_parts():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in edges():
        graph[src].add(dst)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend([*trail[trail.index(nxt):], nxt] if nxt in trail else [node, nxt])
                return True
            if nxt not in state and visit(nxt, [*trail, nxt]):
                return True
        state[node] = 2
        return False

    assert not any(visit(n, [n]) for n in sorted(graph) if n not in state), " -> ".join(cycle)


@pytest.mark.parametrize("broken", [
    ("spec", "certify"), ("certify", "stages"), ("certify", "report"), ("serving", "stages"), ("inventory", "certify"),
])
def test_the_rules_catch_the_imports_the_issue_names(broken):
    """The layer table itself rejects the imports that once made cycles (spec -> certify/serving -> spec ...)."""
    src, dst = broken
    assert LAYERS[dst] >= LAYERS[src] or (src == "certify" and dst in GATES_MUST_NOT_IMPORT)


def test_the_gate_names_the_spec_accepts_are_the_gates_judge_runs():
    assert ("probe", *judge.GATE_NAMES) == gates.NODE_GATE_NAMES


# docs/architecture.md, "Inside stages/": a stage is a module of stages/ with a top-level `run` (a package's in its
# __init__, its modules are its steps); the rest of stages/ are the pieces stages compose. Pieces import no stage,
# and a stage imports another only where it composes it.
# provision composes certify: the rolling provision re-certifies each batch before it serves again.
STAGES_COMPOSED = {("plan", "provision"), ("plan", "serve"), ("discover", "certify"), ("provision", "certify")}


def stage_modules() -> dict[str, Path]:
    """The modules of gridready/stages/ by dotted name below it: `bench`, `serve` (the package), `serve.verify`."""
    out = {}
    for path in (PKG / "stages").rglob("*.py"):
        name = module_of(path)[0].removeprefix("gridready.stages")
        if name:
            out[name.removeprefix(".")] = path
    return out


def stage_imports(path: Path) -> set[str]:
    """Dotted names (below gridready.stages) of the modules of gridready/stages/ that a file imports."""
    known = stage_modules()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gridready.stages"):
            base = (node.module or "").removeprefix("gridready.stages").removeprefix(".")
            for a in node.names:
                sub = f"{base}.{a.name}" if base else a.name
                found.add(sub if sub in known else base)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("gridready.stages.") for a in node.names
                      if a.name.startswith("gridready.stages.")}
    return found - {""}


def is_stage(path: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in ast.parse(path.read_text()).body)


def test_stage_pieces_import_no_stage_and_stages_only_those_they_compose():
    files = {name: path for name, path in stage_modules().items() if name != "__init__"}
    stages = {name for name, path in files.items() if "." not in name and is_stage(path)}  # a step's run is a piece
    assert {"provision", "certify", "serve", "bench"} <= stages and "serve.verify" not in stages
    wrong = [f"stages/{name} imports the stage {dst}" for name, path in sorted(files.items())
             for dst in sorted(stage_imports(path) & stages)
             if dst != name and (name not in stages or (name, dst) not in STAGES_COMPOSED)]
    assert wrong == []
