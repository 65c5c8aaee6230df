"""`gridready`: the command line. invoke's Program over the package's own tasks (gridready/commands.py), so it runs
from any folder, with the inventory chosen once for the whole line.

    gridready -i acme-h200 provision certify serve     # inventories/acme-h200
    gridready -i /srv/inventories/acme validate        # an inventory folder anywhere
    gridready -i acme-h200 --list                      # the tasks, under the inventory they would run on

Only flags that do something: `-i/--inventory`, `-h/--help`, `-V/--version`, `--list`. invoke's own core flags
(`--dry` that still runs, `-e`, `-c` collection, `-f` config file, `-l` list, `-d` debug, `--complete`...) are gone,
and no configuration reaches invoke from outside the package: no config file (system, user, project, `-f`), no
INVOKE_* variable, no tasks.py found from the current folder. Usage errors exit 2 with the usage line. invoke lets
a program choose its core arguments, namespace and config class
(https://docs.pyinvoke.org/en/stable/concepts/library.html).
"""

from __future__ import annotations

import copy
import os
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from invoke import Argument, Config, Program
from invoke.exceptions import Exit, ParseError

from gridready.exitcodes import ExitCode

USAGE = "usage: gridready -i <inventory> <task> [--flags] [<task> [--flags]]... (gridready --help; gridready --list)"
# invoke's Program reads these core arguments; the parser no longer offers them, their values are invoke's defaults
UNOFFERED = {"command-timeout": None, "complete": False, "config": None, "debug": False, "dry": False,
             "echo": False, "hide": None, "list-depth": None, "list-format": "flat", "print-completion-script": "",
             "prompt-for-sudo-password": False, "pty": False, "warn-only": False, "write-pyc": False}


class SealedConfig(Config):  # type: ignore[misc]  # invoke's Config is untyped
    """invoke's configuration from the package's defaults and the command line only: the system and user files,
    a project file beside the tasks, a runtime file and INVOKE_* variables would let anything outside the package
    set invoke's own settings (`tasks.executor_class` imports any module it names)."""

    SEALED = True  # gridready.usage refuses every INVOKE_* variable rather than ignore it

    def _load_file(self, prefix: str, absolute: bool = False, merge: bool = True) -> None:
        if merge:
            self.merge()

    def load_shell_env(self) -> None:
        self.merge()


class GridreadyProgram(Program):
    def core_args(self) -> list[Argument]:
        return [
            Argument(names=("inventory", "i"),
                     help="the customer's inventory: a folder under inventories/ or a path (else GRIDREADY_INVENTORY; "
                          "no default)"),
            Argument(names=("help", "h"), optional=True, help="show this help, or a task's help (--help <task>)"),
            Argument(names=("list",), kind=bool, default=False, help="list the tasks"),
            Argument(names=("version", "V"), kind=bool, default=False, help="show the version"),
        ]

    def parse_core_args(self) -> None:
        try:
            super().parse_core_args()
        except ParseError as err:
            raise usage_error(err) from None
        for name, default in UNOFFERED.items():
            self.args[name] = Argument(names=(name,), default=default)

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as err:
            raise usage_error(err) from None
        except Exit as err:  # gridready.usage's one line for a bad flag value: add the usage line
            if err.code == int(ExitCode.INVALID) and err.message:
                raise Exit(f"{_hint(err.message)}\n{USAGE}", code=err.code) from None
            raise

    def parse_cleanup(self) -> None:
        try:
            super().parse_cleanup()
        except ParseError as err:  # --help <no such task>
            raise usage_error(err) from None

    def _chosen(self) -> str | None:
        value = self.args.inventory.value
        return value if isinstance(value, str) and value else None

    def update_config(self, merge: bool = True) -> None:
        """The flag joins the overrides level, above the collection's default. invoke's own update_config
        replaces that level with its flags, so this adds to what it left (Config._overrides)."""
        super().update_config(merge=False)
        chosen = self._chosen()
        if chosen is not None:
            data = copy.deepcopy(self.config._overrides)
            data.setdefault("gridready", {})["inventory"] = chosen
            self.config.load_overrides(data, merge=False)
        if merge:
            self.config.merge()

    def list_tasks(self) -> None:
        name = self._chosen() or os.environ.get("GRIDREADY_INVENTORY")
        print(f"Inventory: {name}\n" if name else "Inventory: none named (gridready -i <customer> ...)\n")
        super().list_tasks()


def usage_error(err: Any) -> Exit:
    """A usage error: one line naming what was wrong, the usage line, exit 2 (invoke's own exit 1 is README's
    internal fault)."""
    from gridready import secretscan

    return Exit(f"error: (command line): {_hint(secretscan.redact(str(err)))}\n{USAGE}", code=int(ExitCode.INVALID))


def _hint(line: str) -> str:
    """invoke's words for a flag without its value name the flag as the user wrote it; an Ansible letter given
    before the task (`gridready -l host provision`) says where it goes."""
    from gridready.commands import SHORT_FLAGS

    line = re.sub(r"Flag <Argument: ([\w-]+)(?: \(\w\))?> needed value and was not given one!",
                  r"--\1: needs a value", line)
    flag = line.split("'")[1] if "No idea what '" in line else ""
    long = {f"-{short}": name for name, short in SHORT_FLAGS.items()}.get(flag)
    return f"{line} ({flag} is a task's --{long}: give it after the task)" if long else line


def program_version() -> str:
    """The installed distribution's version; a source checkout run through PYTHONPATH (docs/device.md: a GPU
    machine without a package index) has no distribution metadata, so the package's own version stands in."""
    try:
        return version("gridready")
    except PackageNotFoundError:
        import gridready

        return gridready.__version__


def make_program() -> GridreadyProgram:
    from gridready.commands import ns

    return GridreadyProgram(name="gridready", binary="gridready", version=program_version(), namespace=ns,
                            config_class=SealedConfig)


MIN_PYTHON = (3, 11)  # pyproject's requires-python; Ubuntu 22.04's python3 is 3.10


def main() -> None:
    if sys.version_info < MIN_PYTHON:
        sys.stderr.write(f"error: (controller): gridready needs Python >= {'.'.join(map(str, MIN_PYTHON))}, this is "
                         f"{sys.version.split()[0]} (docs/getting-started.md)\n")
        raise SystemExit(int(ExitCode.INVALID))
    make_program().run(sys.argv)


if __name__ == "__main__":
    main()
