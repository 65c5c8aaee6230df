"""The isolation plan stays linear at fleet scale: the work per retest round does not grow with the fleet times the
suspects (it once sorted every known-good node by list position for each suspect: cubic, 10.7 s at 1,000 nodes).
Counted in node-name comparisons, not timed (benchmarks/certify_fleet.py has the times)."""

from __future__ import annotations

from gridready.certify.isolation import isolate


class Name(str):
    """A node name that counts equality tests (list.index and `in` on lists pay one per element)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Name.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_retests_cost_linear_comparisons_and_find_every_bad_node() -> None:
    n = 300
    nodes = [Name(f"n{i:04d}") for i in range(n)]
    bad = {nodes[i] for i in range(7, n, 25)}
    Name.compared = 0
    res = isolate(nodes, lambda a, b: not ({a, b} & bad))
    assert sorted(res.bad) == sorted(bad) and res.rounds == 2
    assert res.run_count == n // 2 + 2 * len(bad)  # pass 1, then two retests per bad node (each pair has one)
    assert Name.compared < 20 * n, Name.compared
