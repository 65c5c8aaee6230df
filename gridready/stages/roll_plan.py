"""The rolling provision's plan, pure: batch sizes, the order of the batches, the failures that stop the roll.

Sizes follow Ansible's `serial` and `max_fail_percentage` (playbooks_strategies, "Setting the batch size with
serial" and "Setting a maximum failure percentage"; ansible-core lib/ansible/utils/helpers.py `pct_to_int`): a
percentage of the nodes rolled, rounded down, at least one node; a count larger than the nodes is one batch; the
roll stops when more nodes failed than the maximum allows (the maximum itself is tolerated).

Nodes that serve nothing go first, all in one batch (nothing drains, and a change that breaks a node shows there
before any serving node is touched); serving nodes follow in batches of `--batch` (default one node or 10% of them,
whichever is larger), cut along replicas: the nodes of a replica that spans several nodes (replicas sharing a node
join into one unit) roll in one batch, so a drained replica is never split over two batches; a unit larger than
the batch size is a batch of its own. The unit holding the router's node (no router host of its own) rolls last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gridready.errors import InvalidInput

DEFAULT_BATCH_PCT = 10
_AMOUNT = re.compile(r"^(?P<n>[0-9]{1,6})(?P<pct>%?)$")


@dataclass(frozen=True)
class Amount:
    """A count of nodes, or a percentage of the nodes rolled."""

    value: int
    percent: bool = False

    def of(self, total: int, *, at_least: int = 1) -> int:
        """The count this amount means among `total` nodes (a percentage rounded down, never below `at_least`)."""
        n = total * self.value // 100 if self.percent else self.value
        return max(at_least, n)

    def __str__(self) -> str:
        return f"{self.value}{'%' if self.percent else ''}"


def parse_amount(raw: str | None, flag: str, *, zero_ok: bool) -> Amount | None:
    """`N` or `N%` from the command line; None when not given; InvalidInput (exit 2, one line) for anything else."""
    if raw is None:
        return None
    found = _AMOUNT.fullmatch(str(raw).strip())
    lowest = 0 if zero_ok else 1
    if found is None:
        raise InvalidInput(f"{flag}: (command line): {raw!r} is not a node count N or a share N% (e.g. 2 or 25%)")
    value, percent = int(found["n"]), bool(found["pct"])
    if value < lowest or (percent and value > 100):
        span = f"{lowest}% to 100%" if percent else f"at least {lowest}"
        raise InvalidInput(f"{flag}: (command line): {raw!r} is out of range ({span})")
    return Amount(value, percent)


def batch_size(serving: int, batch: Amount | None) -> int:
    """Serving nodes per batch: `--batch`, else one node or 10% of them, whichever is larger."""
    return (batch or Amount(DEFAULT_BATCH_PCT, percent=True)).of(serving)


def max_failures(total: int, max_fail: Amount | None) -> int:
    """Failed nodes the roll tolerates before it stops (default none)."""
    return 0 if max_fail is None else max_fail.of(total, at_least=0)


def units_of(nodes: list[str], replicas: Iterable[Iterable[str]]) -> list[list[str]]:
    """`nodes` grouped into the units that roll together: the nodes of a replica, joined with every replica that
    shares a node with it; a node of no replica is a unit of its own. Units in the order of their first node in
    `nodes`, their nodes in that order too."""
    unit: dict[str, set[str]] = {n: {n} for n in nodes}
    for replica in replicas:
        joined: set[str] = set().union(*(unit[n] for n in replica if n in unit))
        for n in joined:
            unit[n] = joined
    out: list[list[str]] = []
    seen: set[str] = set()
    for n in nodes:
        if n not in seen:
            out.append([m for m in nodes if m in unit[n]])
            seen |= unit[n]
    return out


def batches(idle: list[str], serving: list[str], size: int, done: set[str] | frozenset[str] = frozenset(),
            first: list[str] | None = None, *, replicas: Iterable[Iterable[str]] = (),
            last: str | None = None) -> list[list[str]]:
    """The batches still to roll: the idle nodes in one, then the serving nodes, in the order given, leaving out
    the nodes `done` by an earlier run of this roll. `first`: serving nodes that go before the others (those an
    earlier run left drained: they are out of serving already). Serving nodes roll in whole units (`units_of`
    their `replicas`): up to `size` nodes a batch, a larger unit alone; the unit of `last` (the node the router
    runs on) after every other."""
    head = [n for n in (first or []) if n in serving]
    order = head + [n for n in serving if n not in head]
    todo_idle = [n for n in idle if n not in done]
    todo = [n for n in order if n not in done]
    units = units_of(todo, replicas)
    units.sort(key=lambda unit: last in unit)  # stable: the router's unit moves to the end
    out = [todo_idle] if todo_idle else []
    batch: list[str] = []
    for unit in units:
        if batch and len(batch) + len(unit) > size:
            out.append(batch)
            batch = []
        batch = batch + unit
    if batch:
        out.append(batch)
    return out


def should_stop(failed: int, tolerated: int) -> bool:
    """Whether the roll stops before its next batch: more nodes failed than tolerated."""
    return failed > tolerated
