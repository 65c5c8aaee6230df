"""Serve runs downhill (docs/architecture.md, "Serve: steps that run downhill"), read from the code with `ast` as
tests/unit/test_layers.py reads the layers.

gridready/stages/serve/ is the stage's entry (__init__.py), its steps in order, the floor below them (what several
steps share) and the other tasks that compose them. The entry's `run` calls the steps' `run` in order, each with the
result of the one before, and nothing else; a step imports only earlier steps and the floor, and calls no function
of an earlier step's module; the floor imports no step and no task, each floor module only the floor below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.serving.serve_walk import modules, walk

PKG = Path(__file__).resolve().parents[3] / "gridready"
SERVE = PKG / "stages" / "serve"
PREFIX = "gridready.stages.serve"
STEPS = ("plan", "rendering", "deploy", "verify", "redeploy", "rollout", "record")
FLOOR = ("context", "k8s_wait", "k8s_bucket", "k8s_volumes", "canary", "router", "config", "embedding",
         "render_hosts", "k8s_verify")  # from the bottom up
TASKS = ("preview", "down", "drain")  # invoke plan's view, serve --down, the watcher's drain


def package_imports(path: Path, prefix: str) -> dict[str, list[str]]:
    """Modules of the package (short names) a file imports -> the names it imports from each ([] for the module)."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == prefix:
            for a in node.names:
                found.setdefault(a.name, [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{prefix}."):
            found.setdefault(node.module.removeprefix(f"{prefix}.").split(".")[0], []).extend(  # type: ignore[union-attr]
                a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(f"{prefix}."):
                    found.setdefault(a.name.removeprefix(f"{prefix}.").split(".")[0], [])
    return found


def functions_of(path: Path) -> set[str]:
    return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def step_calls_back(path: Path, prefix: str, earlier: dict[str, Path]) -> list[str]:
    """Calls in a step's module of a function of an earlier step's module (`mod.f()` or an imported `f()`)."""
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == prefix:
            aliases.update({a.asname or a.name: a.name for a in node.names if a.name in earlier})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").removeprefix(f"{prefix}.") in earlier:
            step = node.module.removeprefix(f"{prefix}.")  # type: ignore[union-attr]
            names.update({a.asname or a.name: (step, a.name) for a in node.names})
    wrong = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in aliases:
            step = aliases[func.value.id]
            if func.attr in functions_of(earlier[step]):
                wrong.append(f"{path.name}:{node.lineno} calls {step}.{func.attr}")
        elif isinstance(func, ast.Name) and func.id in names:
            step, name = names[func.id]
            if name in functions_of(earlier[step]):
                wrong.append(f"{path.name}:{node.lineno} calls {step}.{name}")
    return wrong


def downhill_problems(root: Path, prefix: str, steps: tuple[str, ...], floor: tuple[str, ...],
                      tasks: tuple[str, ...]) -> list[str]:
    """Every way the package at `root` breaks the step order; [] when it runs downhill."""
    files = {p.stem: p for p in root.glob("*.py") if p.stem != "__init__"}
    problems = [f"{name}.py is neither a step, the floor nor a task" for name in sorted(set(files) - {
        *steps, *floor, *tasks})]
    for i, step in enumerate(steps):
        if step not in files:
            problems.append(f"the step {step} has no module")
            continue
        allowed = {*steps[:i], *floor}
        problems += [f"{step}.py (step {i + 1}) imports {dst}" for dst in sorted(set(package_imports(
            files[step], prefix)) - allowed - {step})]
        if "run" not in functions_of(files[step]):
            problems.append(f"{step}.py has no run()")
        problems += step_calls_back(files[step], prefix, {s: files[s] for s in steps[:i] if s in files})
    for i, low in enumerate(floor):
        if low in files:
            problems += [f"{low}.py (floor) imports {dst}" for dst in sorted(set(package_imports(
                files[low], prefix)) - set(floor[:i]) - {low})]
    for task in tasks:
        if task in files:
            problems += [f"{task}.py (task) imports {dst}" for dst in sorted(set(package_imports(
                files[task], prefix)) - {*steps, *floor} - {task})]
    return problems + entry_problems(root / "__init__.py", steps)


def entry_problems(path: Path, steps: tuple[str, ...]) -> list[str]:
    """The entry's run(inv, ctx): `x = step.run(previous)` for each step in order, then `return last.run(x)`."""
    run = next((n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "run"),
               None)
    if run is None:
        return ["the entry has no run()"]
    called, previous, problems = [], [a.arg for a in run.args.args], []
    for stmt in run.body:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.Return) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name) and value.func.attr == "run"):
            problems.append(f"the entry's run does something else at line {stmt.lineno}")
            continue
        called.append(value.func.value.id)
        if [a.id for a in value.args if isinstance(a, ast.Name)] != previous or value.keywords:
            problems.append(f"{called[-1]}.run does not take the previous step's result (line {stmt.lineno})")
        if isinstance(stmt, ast.Assign):
            previous = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if called != list(steps):
        problems.append(f"the entry calls {called}, not the steps {list(steps)} in order")
    if not isinstance(run.body[-1], ast.Return):
        problems.append("the entry's run does not return the last step's result")
    return problems


def test_serve_runs_downhill() -> None:
    assert downhill_problems(SERVE, PREFIX, STEPS, FLOOR, TASKS) == []


def test_no_serve_or_triton_flat_prefixes_remain() -> None:
    flat = [str(p.relative_to(PKG)) for p in [*(PKG / "stages").glob("serve_*.py"),
                                             *(PKG / "serving").glob("triton_*.py"),
                                             *(PKG / "serving").glob("sglang_*.py")]]
    assert flat == []
    assert {p.name for p in (PKG / "serving").iterdir() if (p / "__init__.py").exists()} >= {
        "vllm", "sglang", "triton"}


def test_the_walk_climbs_back_and_returns_at_most_the_issue_allows() -> None:
    """Issue 42's measure (tests/unit/serving/serve_walk.py): at most 4 climbs and 8 returns. Before the steps
    (stages/serve.py with serve_config, serve_deploy, serve_verify, serve_canary) it climbed 8 times and returned
    12 times; now neither."""
    found = walk(PKG / "stages", "gridready.stages", (PREFIX, "run"), [PREFIX, *(f"{PREFIX}.{s}" for s in STEPS)])
    assert len(found.climbs) <= 4 and len(found.returns) <= 8
    assert (found.climbs, found.returns) == ([], [])
    assert {f"{PREFIX}.{s}" for s in STEPS} <= set(found.rooms)  # the walk reaches every step


# ---- the checks themselves catch what they are for, on small packages written here --------------------------

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    for name, text in files.items():
        (root / f"{name}.py").write_text(text)
    return root


GOOD = {
    "__init__": "from pkg import a, b\n\ndef run(inv, ctx):\n    x = a.run(inv, ctx)\n    return b.run(x)\n",
    "low": "def helper():\n    return 1\n",
    "a": "from pkg import low\n\ndef run(inv, ctx):\n    return low.helper()\n",
    "b": "from pkg import a\nfrom pkg.a import run as first\n\ndef run(x):\n    return x\n",
}


def test_a_downhill_package_passes(tmp_path: Path) -> None:
    assert downhill_problems(_package(tmp_path, GOOD), "pkg", ("a", "b"), ("low",), ()) == []


@pytest.mark.parametrize(("change", "expected"), [
    ({"a": "from pkg import b\n\ndef run(inv, ctx):\n    return b.run(1)\n"}, "a.py (step 1) imports b"),
    ({"b": "from pkg import a\n\ndef run(x):\n    return a.run(x)\n"}, "b.py:4 calls a.run"),
    ({"b": "from pkg.a import run as first\n\ndef run(x):\n    return first(x)\n"}, "b.py:4 calls a.run"),
    ({"low": "from pkg import a\n\ndef helper():\n    return 1\n"}, "low.py (floor) imports a"),
    ({"extra": "X = 1\n"}, "extra.py is neither a step, the floor nor a task"),
    ({"__init__": "from pkg import a, b\n\ndef run(inv, ctx):\n    x = b.run(inv, ctx)\n    return a.run(x)\n"},
     "the entry calls ['b', 'a'], not the steps ['a', 'b'] in order"),
    ({"__init__": "from pkg import a, b\n\ndef run(inv, ctx):\n    x = a.run(inv, ctx)\n    print(x)\n"
                  "    return b.run(x)\n"}, "the entry's run does something else at line 5"),
    ({"__init__": "from pkg import a, b\n\ndef run(inv, ctx):\n    x = a.run(inv, ctx)\n    return b.run(inv)\n"},
     "b.run does not take the previous step's result (line 5)"),
])
def test_the_step_rules_catch(tmp_path: Path, change: dict[str, str], expected: str) -> None:
    problems = downhill_problems(_package(tmp_path, GOOD | change), "pkg", ("a", "b"), ("low",), ())
    assert any(expected in p for p in problems), problems


def test_the_walk_counts_a_climb_and_a_return(tmp_path: Path) -> None:
    """The old shape: the entry calls config, then deploy, which calls config again (up the list)."""
    root = _package(tmp_path, {
        "__init__": "from pkg import config, deploy\n\ndef run():\n    config.plan()\n    deploy.hosts()\n",
        "config": "def plan():\n    return 1\n\ndef extravars():\n    return 2\n",
        "deploy": "from pkg import config\nfrom pkg import low\n\ndef hosts():\n    low.f()\n    config.extravars()\n"
                  "    low.f()\n",
        "low": "def f():\n    return 3\n",
    })
    assert set(modules(root, "pkg")) == {"pkg", "pkg.config", "pkg.deploy", "pkg.low"}
    found = walk(root, "pkg", ("pkg", "run"), ["pkg", "pkg.config", "pkg.deploy"])
    assert found.climbs == [("pkg.deploy", "pkg.config")]
    assert found.returns == [("pkg.deploy", "pkg.config")]
    assert found.revisits == [("pkg.deploy", "pkg.low")]
