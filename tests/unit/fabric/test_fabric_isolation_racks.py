"""Issue 34, finding 6: pairs cross racks (a spine or leaf-uplink fault shows in the pairs), and a rack whose leaf
uplink is degraded gets its nodes named as a leaf suspect, not quarantined as bad. The old isolation paired nodes in
inventory order, inside a rack, and had no notion of racks."""

from __future__ import annotations

from gridready.certify.isolation import isolate

FLOOR = 340.0


def _racks(per_rack: int, racks: str) -> dict[str, str]:
    return {f"{r}{i}": r for r in racks for i in range(per_rack)}  # inventory order: rack by rack


def test_pass_one_pairs_cross_racks() -> None:
    rack_of = _racks(4, "ab")
    log: list[tuple[str, str]] = []

    def run_pair(a: str, b: str) -> float:
        log.append((a, b))
        return 388.0

    r = isolate(list(rack_of), run_pair, floor=FLOOR, rack_of=rack_of)
    assert len(r.good) == 8 and r.run_count == 4
    assert all(rack_of[a] != rack_of[b] for a, b in log)


def test_degraded_leaf_uplink_names_the_rack_not_its_nodes() -> None:
    rack_of = _racks(3, "abc")

    def run_pair(a: str, b: str) -> float:  # rack b's uplink runs at half rate: only traffic leaving b suffers
        return 194.0 if (rack_of[a] == "b") != (rack_of[b] == "b") else 388.0

    r = isolate(list(rack_of), run_pair, floor=FLOOR, rack_of=rack_of)
    assert r.bad == []
    assert r.leaf_suspect == {"b0": "b", "b1": "b", "b2": "b"} and sorted(r.unresolved) == ["b0", "b1", "b2"]
    assert sorted(r.good) == ["a0", "a1", "a2", "c0", "c1", "c2"]
    assert any(run.phase == "leaf" and run.outcome.ok for run in r.runs)


def test_a_bad_node_is_still_named_with_racks() -> None:
    rack_of = _racks(3, "abc")

    def run_pair(a: str, b: str) -> float:
        return 194.0 if "b1" in (a, b) else 388.0

    r = isolate(list(rack_of), run_pair, floor=FLOOR, rack_of=rack_of)
    assert r.bad == ["b1"] and r.leaf_suspect == {} and len(r.good) == 8
