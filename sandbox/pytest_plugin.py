"""pytest fixtures for the sandbox fleet: `fleet` (3 hosts, per session), `make_fleet` (N hosts, profiles) and
`make_module_fleet` (the same, torn down at the end of the module).

    def test_something(fleet):                      # node1..node3 as in inventories/sandbox (node3 faulted)
        r = fleet.ssh("node1", "systemctl is-system-running")

    def test_fabric(make_fleet):
        f = make_fleet(n=6, healthy=True, profiles={"node5": {"faults": [{"kind": "hca_down", "hca": "mlx5_2"}]}})
        f.ansible_playbook("playbooks/certify.yml")

Both skip with the reason when the machine cannot run the fleet (not root, no netns/overlayfs/nspawn).
Fleets are torn down at the end of the session (and reaped by the next bring-up if the session dies);
GRIDREADY_SANDBOX_KEEP=1 keeps them for debugging (`python -m sandbox down <inventory>` later).
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandbox import alloc, preflight
from sandbox.testfleet import Fleet, start_fleet

__all__ = ["Fleet", "fleet", "make_fleet", "make_module_fleet", "start_fleet"]


def _skip_reason() -> str | None:
    found = preflight.problems()
    return ("sandbox fleet unavailable: " + "; ".join(found)) if found else None


@pytest.fixture(scope="session")
def make_fleet() -> Iterator[Callable[..., Fleet]]:
    """Factory: `make_fleet(n=3, profiles=None, healthy=False) -> Fleet`; every fleet is removed at session end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    made: list[Fleet] = []

    def cleanup() -> None:
        if os.environ.get("GRIDREADY_SANDBOX_KEEP"):  # debugging: leave the fleets up, say where they are
            for f in made:
                with alloc.locked() as table:  # no owner any more: not reaped when this session ends
                    table["fleets"].get(f.name, {})["owner_pid"] = None
                print(f"\nsandbox fleet kept: {f.inventory} (ssh -F {f.ssh_config} node1; "
                      f"python -m sandbox down {f.inventory})")
            made.clear()
            return
        while made:
            f = made.pop()
            with contextlib.suppress(Exception):  # tear down the others even if one fails
                f.down()

    atexit.register(cleanup)  # also on an interrupted session

    def factory(n: int = 3, profiles: dict[str, dict[str, Any]] | None = None, *,
                healthy: bool = False) -> Fleet:
        f = start_fleet(n, profiles, healthy=healthy)
        made.append(f)
        return f

    yield factory
    cleanup()
    atexit.unregister(cleanup)


@pytest.fixture(scope="module")
def make_module_fleet(make_fleet: Callable[..., Fleet]) -> Iterator[Callable[..., Fleet]]:
    """`make_fleet` for one test module: its fleets go down when the module ends, so their engines and Ray clusters
    do not take CPU from the modules after it (two cores in CI)."""
    mine: list[Fleet] = []

    def factory(*args: Any, **kwargs: Any) -> Fleet:
        f = make_fleet(*args, **kwargs)
        mine.append(f)
        return f

    yield factory
    while mine:
        f = mine.pop()
        with contextlib.suppress(Exception):  # the session's cleanup tries again
            f.down()


@pytest.fixture(scope="session")
def fleet(make_fleet: Callable[..., Fleet]) -> Fleet:
    """Three hosts with the default sandbox profiles (node3: PCIe down-trained on GPU 3), for the session."""
    return make_fleet(3)
