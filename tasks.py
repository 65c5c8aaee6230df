"""The plain `invoke` form in this folder (`GRIDREADY_INVENTORY=<c> invoke ...`): the package's tasks
(gridready/commands.py), which `gridready -i <c> ...` runs from any folder."""

from gridready.commands import ns

__all__ = ["ns"]
