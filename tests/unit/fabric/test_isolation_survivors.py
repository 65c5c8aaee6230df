"""Bad-node isolation, the values the older tests left unread: pass 1's pairing across racks of unequal size and of
the rack left over, the leaf check's candidates and its runs, a rack named "" beside unracked nodes, and the wall times
rounded to the millisecond (a fake clock, no sleeps)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gridready.certify import isolation
from gridready.certify.isolation import _leaf_candidates, _pairing, isolate


def runs(r) -> list[tuple[str, str, int, str]]:
    return [(x.a, x.b, x.round, x.phase) for x in r.runs]


def test_pass_one_takes_the_two_fullest_racks_not_the_first_named():
    # r3 holds three nodes: it pairs with r1, then with r2 (two nodes left beat one), and its last node is left over;
    # taking racks by name would pair r1 with r2 and leave r3 to pair inside itself
    rack = {"a": "r1", "b": "r2", "c": "r3", "d": "r3", "e": "r3"}
    assert _pairing(list(rack), rack) == ([("c", "a"), ("d", "b")], ["e"])


@pytest.mark.parametrize(("r2", "pairs", "leftover"), [
    ("bcdef", [("b", "a"), ("c", "d"), ("e", "f")], []),  # r2's rest of four pairs off in order, nobody left over
    ("bcde", [("b", "a"), ("c", "d")], ["e"]),  # a rest of three leaves its last node only
    ("bcd", [("b", "a"), ("c", "d")], []),
])
def test_the_rack_left_over_pairs_consecutively_inside_itself(r2, pairs, leftover):
    rack = {"a": "r1", **dict.fromkeys(r2, "r2")}  # r2's first node meets a; the rest is r2's alone
    assert _pairing(["a", *r2], rack) == (pairs, leftover)


def test_an_empty_rack_name_shares_the_unracked_nodes_rack():
    # the stage leaves unracked hosts out of rack_of; isolate reads a missing rack as "", so in pass 1 a rack named ""
    # is one bucket with the unracked nodes
    assert _pairing(list("abcd"), {"a": "r1", "b": ""}) == ([("b", "a"), ("c", "d")], [])
    assert _pairing(list("abcd"), {"a": "r1"}) == ([("b", "a"), ("c", "d")], [])


def test_a_retest_reads_an_unracked_partner_as_rack_empty():
    nodes = ["u", "a", "s", "b", "c", "d"]  # u has no rack, s (the bad node) a rack named ""

    def run_pair(x, y):
        return "s" not in (x, y)

    r = isolate(nodes, run_pair, rack_of={"a": "r1", "b": "r2", "c": "r1", "d": "r2", "s": ""})
    # s's retest skips u (rack "" as s's own) for a (r1); b's takes u, whose "" is not r2
    assert runs(r) == [("u", "a", 1, "pair"), ("b", "s", 1, "pair"), ("c", "d", 1, "pair"),
                       ("s", "a", 2, "retest"), ("b", "u", 2, "retest")]
    assert (r.bad, r.failed_with) == (["s"], {"s": ["b", "a"], "b": ["s"]})


def test_leaf_candidates_need_two_bad_nodes_of_one_named_rack_failing_only_across():
    rack = {"a": "r1", "b": "r1", "c": "r1", "d": "r2", "e": "r2", "f": "r3"}
    failed = {"a": ["d", "e"], "b": ["e", "f"], "c": ["a", "d"], "f": ["d", "e"]}
    # c failed once inside its own rack: its node, not the uplink; f is the only bad node of r3
    assert _leaf_candidates(["a", "b", "c", "f"], failed, rack) == {"r1": ["a", "b"]}
    # nodes without a rack are never a leaf's, however their failures crossed
    assert _leaf_candidates(["x", "y"], {"x": ["a", "d"], "y": ["b", "e"]}, rack) == {}


def test_two_racks_with_a_leaf_down_each_run_their_own_leaf_check_and_stay_unresolved():
    rack = {"a": "r1", "b": "r1", "c": "r2", "d": "r2", **dict.fromkeys("efghij", "r3")}

    def leaves_down(x, y):  # r1's and r2's uplinks are down: a pair fails when it leaves either rack
        return rack[x] == rack[y] or not ({rack[x], rack[y]} & {"r1", "r2"})

    r = isolate(list(rack), leaves_down, rack_of=rack)
    assert runs(r)[-2:] == [("a", "b", 6, "leaf"), ("c", "d", 7, "leaf")]
    assert (r.good, r.bad, r.unresolved) == (list("efghij"), [], ["a", "b", "c", "d"])
    assert r.leaf_suspect == {"a": "r1", "b": "r1", "c": "r2", "d": "r2"}


def test_wall_times_are_rounded_to_the_millisecond(monkeypatch):
    # isolate reads the clock at its start and end, _call before and after each run: 0 | 10, 11.23456 | 12.71828
    ticks = iter([0.0, 10.0, 11.23456, 12.71828])
    monkeypatch.setattr(isolation, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    r = isolate(["a", "b"], lambda a, b: True)
    assert [x.wall_s for x in r.runs] == [1.235]  # 1.23456 s
    assert r.wall_s == 12.718
