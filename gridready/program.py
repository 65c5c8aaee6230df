"""`gridready`: the same tasks as `invoke` (tasks.py), with the inventory chosen once for the whole command line.

    gridready -i acme-h200 provision certify serve     # inventories/acme-h200
    gridready -i ./somewhere/else validate             # an inventory folder anywhere
    gridready --list                                   # the tasks, under the inventory they would run on

`-i/--inventory` names a folder under inventories/ or a path; without it the inventory is the plain `invoke` form's
(GRIDREADY_INVENTORY, gridready.inventory of an `-f` config file, else tasks.py's default). invoke lets a program
add core arguments (invoke.Program.core_args, https://docs.pyinvoke.org/en/stable/concepts/library.html).
"""

from __future__ import annotations

import copy
import sys
from importlib.metadata import version

from invoke import Argument, Program


class GridreadyProgram(Program):
    def core_args(self) -> list[Argument]:
        return [*super().core_args(), Argument(
            names=("inventory", "i"),
            help="the customer's inventory: a folder under inventories/ or a path (default: GRIDREADY_INVENTORY, "
                 "else gridready.inventory of -f, else the task collection's default)")]

    def _chosen(self) -> str | None:
        value = self.args.inventory.value
        return value if isinstance(value, str) and value else None

    def update_config(self, merge: bool = True) -> None:
        """The flag joins the overrides level, above every config file and the collection's default. invoke's own
        update_config replaces that level with its flags, so this adds to what it left (Config._overrides)."""
        super().update_config(merge=False)
        chosen = self._chosen()
        if chosen is not None:
            data = copy.deepcopy(self.config._overrides)
            data.setdefault("gridready", {})["inventory"] = chosen
            self.config.load_overrides(data, merge=False)
        if merge:
            self.config.merge()

    def list_tasks(self) -> None:
        configured = (self.collection.configuration() if self.collection else {}).get("gridready", {})
        name = self._chosen() or self.config.get("gridready", {}).get("inventory") or configured.get("inventory")
        print(f"Inventory: {name} (change it with -i <customer>)\n")
        super().list_tasks()


program = GridreadyProgram(name="gridready", binary="gridready", version=version("gridready"))


def main() -> None:
    program.run(sys.argv)


if __name__ == "__main__":
    main()
