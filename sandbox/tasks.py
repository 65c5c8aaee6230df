"""The rehearsal fleet's own tasks (`gridready -i sandbox sandbox.up` ...) and the hook that brings a sandbox
inventory's fleet up before a stage. gridready's command line finds both through this distribution's entry points
(sandbox/pyproject.toml: gridready.collections, gridready.before_stage); the product never imports them."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection, Context

from gridready import cli
from gridready.commands import task
from sandbox import fleet


def before_stage(inventory_dir: Path) -> None:
    """A sandbox inventory (it has sandbox.yml) gets its fleet up before a stage that reaches hosts."""
    fleet.ensure_for(inventory_dir)


def _inventory_dir(c: Context) -> Path:
    return cli.inventory(cli.chosen_inventory(c.config.gridready.inventory)).path


@task(help={"hosts": "number of hosts (default 0: as in the inventory's sandbox.yml)"})
@cli.guarded
def up(c: Context, hosts: int = 0) -> None:
    """Start the simulated fleet of the current inventory (root; systemd-nspawn)."""
    cli.console.info(fleet.format_status(fleet.up(_inventory_dir(c), hosts or None)))


@task
@cli.guarded
def down(c: Context) -> None:
    """Stop the simulated fleet and remove everything it created."""
    fleet.down(_inventory_dir(c))


@task
@cli.guarded
def status(c: Context) -> None:
    """List the simulated hosts, their addresses and hardware profiles."""
    cli.console.info(fleet.format_status(fleet.status(_inventory_dir(c))))


ns = Collection("sandbox", up, down, status)
