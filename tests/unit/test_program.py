"""`gridready -i <customer> ...` (issues 33 and 49): one flag for the whole command line, above GRIDREADY_INVENTORY; no
default inventory; only flags that do something, one meaning per letter, Ansible's letters kept; usage errors exit
2 with the usage line; the tasks ship with the package, so the line works from any folder; and nothing outside the
package configures invoke itself (issue 41, class 1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USAGE = "usage: gridready -i <inventory> <task>"


def _run(*args: str, cwd: Path = REPO, stdin: int | None = subprocess.DEVNULL, **env: str
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GRIDREADY_INVENTORY", "INVOKE_"))}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "gridready.program", *args], cwd=cwd, capture_output=True,
                          text=True, env={**base, **env}, timeout=120, check=False, stdin=stdin)


def test_the_flag_chooses_the_inventory_for_the_whole_line() -> None:
    run = _run("-i", "acme-h200", "validate")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("inventory acme-h200: valid")  # progress lines: stderr
    by_path = _run("--inventory", "inventories/acme-h200-k8s", "validate")
    assert by_path.returncode == 0 and "inventory acme-h200-k8s: valid" in by_path.stderr


def test_the_flag_wins_over_the_environment() -> None:
    run = _run("-i", "acme-h200", "validate", GRIDREADY_INVENTORY="acme-h200-k8s")
    assert run.returncode == 0 and "inventory acme-h200: valid" in run.stderr, run.stdout + run.stderr
    plain = _run("validate", GRIDREADY_INVENTORY="acme-h200")  # without the flag, the variable's choice
    assert "inventory acme-h200: valid" in plain.stderr


@pytest.mark.parametrize("argv", [["validate"], ["provision"], ["serve", "--render"], ["plan", "--offline"],
                                  ["status"], ["discover", "--host", "node1"], ["watch", "--once"]])
def test_without_an_inventory_nothing_runs_and_the_inventories_are_listed(argv: list[str]) -> None:
    """Issue 49, point 2: the sandbox was the default, so a stage without -i booted root containers."""
    run = _run(*argv)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: -i/--inventory: (command line): name the inventory")
    assert "acme-h200, acme-h200-k8s" in run.stderr and "sandbox" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_an_unknown_inventory_lists_the_inventories_there_are() -> None:
    run = _run("-i", "nosuch", "validate")
    assert run.returncode == 2
    assert "inventories/nosuch: (inventory): no such inventory directory" in run.stderr
    assert "acme-h200, acme-h200-k8s" in run.stderr


@pytest.mark.parametrize("argv", [
    ["-i", "acme-h200", "--dry", "validate"],  # invoke's "echo instead of running" that still ran
    ["-i", "acme-h200", "-R", "validate"],
    ["-i", "acme-h200", "-e", "validate"],
    ["-i", "acme-h200", "-d", "validate"],  # debug before a task, down after serve
    ["-i", "acme-h200", "-l", "node1", "provision"],  # invoke's list before a task, Ansible's limit after
    ["-i", "acme-h200", "-c", "other", "validate"],  # invoke's collection; Ansible's connection
    ["-i", "acme-h200", "-f", "x.yaml", "validate"],  # invoke's config file; Ansible's forks
    ["-i", "acme-h200", "--complete"],
    ["-i", "acme-h200", "serve", "-d"],  # invoke's automatic short flag of --down
    ["-i", "acme-h200", "provision", "-f"],  # of --force (Ansible's forks)
    ["-i", "acme-h200", "provision", "-c"],  # of --check (Ansible's connection)
    ["-i", "acme-h200", "validatee"],
    ["--help", "validatee"],
    ["-i", "acme-h200", "serve", "--weight"],  # a value missing
])
def test_flags_that_lie_or_clash_are_usage_errors_with_the_usage_line(argv: list[str]) -> None:
    run = _run(*argv)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[0].startswith("error: (command line): ") and lines[-1].startswith(USAGE), run.stderr
    assert "Traceback" not in run.stderr


def test_a_flag_without_its_value_is_named() -> None:
    for argv, flag in ((["-i"], "--inventory"), (["-i", "acme-h200", "serve", "--weight"], "--weight")):
        run = _run(*argv)
        assert run.returncode == 2 and run.stderr.startswith(f"error: (command line): {flag}: needs a value\n")


def test_the_short_flags_are_ansibles() -> None:
    text = _run("--help", "provision").stdout
    assert "-l STRING, --limit=STRING" in text and "-C, --check" in text and "-t STRING, --tags=STRING" in text
    assert "-f, --force" not in text and "--force" in text
    before = _run("-i", "acme-h200", "-l", "gpu01", "provision")
    assert before.returncode == 2 and "(-l is a task's --limit: give it after the task)" in before.stderr
    after = _run("-i", "acme-h200", "provision", "-l", "nosuch")  # refused before anything runs: proves -l = --limit
    assert after.returncode == 2
    assert "--limit: (command line): the pattern 'nosuch' matches no host of inventories/acme-h200/hosts.yml" in (
        after.stderr)
    core = _run("--help").stdout.split("Subcommands:")[0]
    for gone in ("--dry", "--echo", "--complete", "--config", "--collection", "--debug", "--list-depth"):
        assert gone not in core


def test_serve_down_asks_and_refuses_without_a_terminal_or_yes(tmp_path: Path) -> None:
    """Issue 49, point 1: `serve -d` took serving down without a word. Now --down only, confirmed."""
    run = _run("-i", "acme-h200", "serve", "--down", GRIDREADY_ARTIFACTS=str(tmp_path))
    assert run.returncode == 2
    assert "--yes: (command line): take the serving tiers of acme-h200 down? there is no terminal" in run.stderr
    assert not list(tmp_path.rglob("serve*"))
    yes_alone = _run("-i", "acme-h200", "serve", "--yes", GRIDREADY_ARTIFACTS=str(tmp_path))
    assert yes_alone.returncode == 2 and "--yes: (command line): confirms --down only" in yes_alone.stderr


def test_it_runs_from_any_folder_on_an_inventory_anywhere(tmp_path: Path) -> None:
    """Issue 49, point 3: "Can't find any collection named 'tasks'!" outside the repository root."""
    shutil.copytree(REPO / "inventories/acme-h200", tmp_path / "acme-h200")
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    run = _run("-i", str(tmp_path / "acme-h200"), "validate", cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    assert "inventory acme-h200: valid" in run.stderr
    below = _run("-i", "acme-h200", "validate", cwd=REPO / "docs")  # a name, from a folder below the project
    assert below.returncode == 0, below.stderr


def test_nothing_outside_the_package_configures_invoke(tmp_path: Path) -> None:
    """Issue 41, class 1: invoke imports the module `tasks.executor_class` names. An inventory's invoke.yaml is
    data with gridready settings only; a tasks.py or invoke.yaml in the current folder, INVOKE_* variables and
    invoke's -f are never read."""
    inv = tmp_path / "acme-h200"
    shutil.copytree(REPO / "inventories/acme-h200", inv)
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (inv / "invoke.yaml").write_text("gridready:\n  inventory: acme-h200\ntasks:\n  executor_class: evil.Executor\n")
    run = _run("-i", str(inv), "validate", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == "error: acme-h200/invoke.yaml: tasks: an invoke setting: an inventory file may set " \
                                 "gridready's own settings only (name the inventory with gridready -i <customer>)"
    (inv / "invoke.yaml").unlink()
    (tmp_path / "invoke.yaml").write_text("tasks:\n  executor_class: evil.Executor\n")
    (tmp_path / "tasks.py").write_text("import evil\n")
    ok = _run("-i", str(inv), "validate", cwd=tmp_path, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    assert ok.returncode == 0, ok.stderr
    env = _run("-i", str(inv), "validate", cwd=tmp_path, INVOKE_TASKS_EXECUTOR_CLASS="evil.Executor")
    assert env.returncode == 2 and env.stderr.startswith("error: INVOKE_TASKS_EXECUTOR_CLASS: (environment)")
    check = _run("-i", str(inv), "validate", cwd=tmp_path, INVOKE_GRIDREADY_CHECK="1")  # never silently ignored
    assert check.returncode == 2 and "INVOKE_GRIDREADY_CHECK: (environment): an invoke setting, which gridready " \
                                     "does not read (unset it; use the task's flag (--check, --json))" in check.stderr
    assert not marker.exists()


def test_the_task_list_names_the_inventory() -> None:
    run = _run("-i", "acme-h200", "--list")
    assert run.returncode == 0 and run.stdout.startswith("Inventory: acme-h200")
    assert "provision" in run.stdout and "certify" in run.stdout


def test_the_program_is_installed_as_gridready() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"gridready": "gridready.program:main"}


OWN_FLAGS = {"-i", "--inventory", "--list", "-h", "--help", "-V", "--version"}


def _foreign_flags(text: str, tasks: set[str]) -> list[str]:
    """The flags a `gridready ...` command of `text` gives before its first task that the program does not have."""
    import re
    import shlex

    bad = []
    for m in re.finditer(r"(?:^|[\s`(])(?:\S*/)?gridready((?:[ \t]+[^\s`&;|)#]+)+)", text, re.M):
        try:
            words = shlex.split(m.group(1))
        except ValueError:  # prose after the command (an apostrophe)
            words = m.group(1).split()
        for w in words:
            if w in tasks:
                break
            if w.startswith("-") and w.split("=", 1)[0] not in OWN_FLAGS:
                bad.append(w)
    return bad


def test_the_docs_give_gridready_only_the_flags_it_has() -> None:
    """Every `gridready ...` command of the user docs uses the program's own flags before its first task."""
    from tests.unit.test_command_reference import command_reference
    from tests.unit.test_user_docs import USER_DOCS

    tasks = set(command_reference.task_names())
    assert _foreign_flags("run `gridready -f x.yaml -i acme validate` and `.venv/bin/gridready --dry serve`",
                          tasks) == ["-f", "--dry"]
    assert _foreign_flags("`gridready -i acme provision -l gpu01 --check`", tasks) == []
    bad = {doc: _foreign_flags((REPO / doc).read_text(), tasks) for doc in USER_DOCS if doc != "CHANGELOG.md"}
    assert {doc: flags for doc, flags in bad.items() if flags} == {}


def test_serve_down_on_a_terminal_asks_and_a_no_does_nothing(tmp_path: Path) -> None:
    import pty
    import select

    leader, follower = pty.openpty()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GRIDREADY_INVENTORY", "INVOKE_"))}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "gridready.program", "-i", "acme-h200", "serve", "--down"],
                            cwd=REPO, stdin=follower, stdout=subprocess.PIPE, stderr=follower, text=True,
                            env={**base, "GRIDREADY_ARTIFACTS": str(tmp_path)})
    os.close(follower)
    seen = b""
    while b"type 'yes' to go on" not in seen:
        ready, _, _ = select.select([leader], [], [], 60)
        assert ready, seen  # the prompt never came
        seen += os.read(leader, 4096)
    os.write(leader, b"no\n")
    assert proc.wait(timeout=60) == 2
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:  # the terminal closed with the process
        pass
    os.close(leader)
    text = seen.decode(errors="replace")
    assert "take the serving tiers of acme-h200 down? type 'yes' to go on:" in text
    assert "--down: (command line): not confirmed; nothing was done" in text
    assert not list(tmp_path.rglob("serve*"))


def test_a_source_checkout_without_distribution_metadata_runs() -> None:
    """docs/device.md runs `python3 -m gridready.program` from a checkout on PYTHONPATH, where no gridready
    distribution is installed: importlib.metadata raises PackageNotFoundError there, and the program must still
    run (it crashed with a traceback before any task)."""
    hide = ("import importlib.metadata as m, runpy, sys\n"
            "real = m.Distribution.from_name\n"
            "def from_name(name):\n"
            "    if name == 'gridready':\n"
            "        raise m.PackageNotFoundError(name)\n"
            "    return real(name)\n"
            "m.Distribution.from_name = staticmethod(from_name)\n"
            "sys.argv = ['gridready', *sys.argv[1:]]\n"
            "runpy.run_module('gridready.program', run_name='__main__')\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GRIDREADY_INVENTORY", "INVOKE_"))}
    base["PYTHONPATH"] = str(REPO)
    for argv, expect in ((["--version"], "0."), (["-i", "acme-h200", "validate"], "")):
        run = subprocess.run([sys.executable, "-c", hide, *argv], cwd=REPO, capture_output=True, text=True,
                             env=base, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr and expect in run.stdout + run.stderr
    from gridready import __version__

    with (REPO / "pyproject.toml").open("rb") as f:
        assert tomllib.load(f)["project"]["version"] == __version__  # the stand-in says what the package is
