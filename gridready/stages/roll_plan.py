"""The rolling provision's plan, pure: batch sizes, the order of the batches, the failures that stop the roll.

Sizes follow Ansible's `serial` and `max_fail_percentage` (playbooks_strategies, "Setting the batch size with
serial" and "Setting a maximum failure percentage"; ansible-core lib/ansible/utils/helpers.py `pct_to_int`): a
percentage of the nodes rolled, rounded down, at least one node; a count larger than the nodes is one batch; the
roll stops when more nodes failed than the maximum allows (the maximum itself is tolerated).

Nodes that serve nothing go first, all in one batch (nothing drains, and a change that breaks a node shows there
before any serving node is touched); serving nodes follow in batches of `--batch` (default one node or 10% of them,
whichever is larger).
"""

from __future__ import annotations

import re
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


def batches(idle: list[str], serving: list[str], size: int, done: set[str] | frozenset[str] = frozenset(),
            first: list[str] | None = None) -> list[list[str]]:
    """The batches still to roll: the idle nodes in one, then the serving nodes `size` at a time, in the order
    given, leaving out the nodes `done` by an earlier run of this roll. `first`: serving nodes that go before the
    others (those an earlier run left drained: they are out of serving already)."""
    head = [n for n in (first or []) if n in serving]
    order = head + [n for n in serving if n not in head]
    todo_idle = [n for n in idle if n not in done]
    todo = [n for n in order if n not in done]
    out = [todo_idle] if todo_idle else []
    out += [todo[i:i + size] for i in range(0, len(todo), size)]
    return out


def should_stop(failed: int, tolerated: int) -> bool:
    """Whether the roll stops before its next batch: more nodes failed than tolerated."""
    return failed > tolerated
