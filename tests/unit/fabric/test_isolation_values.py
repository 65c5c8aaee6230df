"""Bad-node isolation at the value level: the exact runs (pair, phase, round) of small fleets, the floor at its
boundary, who is good, bad and unresolved, and the evidence kept per node."""

from __future__ import annotations

import threading

import pytest

from gridready.certify.isolation import PairOutcome, isolate

FLOOR = 368.0


def bounded(bad: set[str], healthy: float = 388.0, broken: float = 194.0):
    return lambda a, b: broken if a in bad or b in bad else healthy


def runs(r) -> list[tuple[str, str, int, str]]:
    return [(x.a, x.b, x.round, x.phase) for x in r.runs]


@pytest.mark.parametrize(("busbw", "ok"), [(FLOOR, True), (FLOOR - 0.01, False), (FLOOR + 0.01, True)])
def test_the_pair_floor_boundary(busbw, ok):
    r = isolate(["a", "b"], lambda a, b: busbw, floor=FLOOR)
    out = r.runs[0].outcome
    assert (out.ok, out.busbw_gbps, out.error) == (ok, busbw, False)
    assert out.reason == f"{busbw:g} GB/s vs floor {FLOOR:g}"


def test_one_bad_node_of_six_runs_and_evidence():
    r = isolate(["a", "b", "c", "d", "e", "f"], bounded({"d"}), floor=FLOOR)
    assert runs(r) == [("a", "b", 1, "pair"), ("c", "d", 1, "pair"), ("e", "f", 1, "pair"),
                       ("c", "a", 2, "retest"), ("d", "b", 2, "retest")]
    assert (r.good, r.bad, r.unresolved) == (["a", "b", "c", "e", "f"], ["d"], [])
    assert r.failed_with == {"c": ["d"], "d": ["c", "b"]}  # two different partners: quarantined
    assert (r.run_count, r.rounds, r.fabric_wide) == (5, 2, False)


def test_odd_fleet_leftover_retested_against_a_known_good_node():
    r = isolate(["a", "b", "c"], bounded(set()), floor=FLOOR)
    assert runs(r) == [("a", "b", 1, "pair"), ("c", "a", 2, "retest")]
    assert r.good == ["a", "b", "c"] and r.failed_with == {}


def test_every_pair_failing_cross_pairs_then_gives_up_unquarantined():
    r = isolate(["a", "b", "c", "d"], lambda a, b: False, max_cross_rounds=1)
    assert runs(r) == [("a", "b", 1, "pair"), ("c", "d", 1, "pair"), ("a", "c", 2, "cross"), ("b", "d", 2, "cross")]
    assert (r.good, r.bad, r.unresolved, r.fabric_wide) == ([], [], ["a", "b", "c", "d"], True)
    assert r.failed_with == {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}  # cross runs are not evidence


def test_a_cross_pass_finds_known_good_nodes_and_the_retest_names_the_bad_one():
    bad = {"a"}
    r = isolate(["a", "b", "c", "d"], lambda x, y: not ({x, y} & bad) and {x, y} != {"c", "d"})
    assert runs(r) == [("a", "b", 1, "pair"), ("c", "d", 1, "pair"), ("a", "c", 2, "cross"), ("b", "d", 2, "cross"),
                       ("a", "d", 3, "retest"), ("c", "b", 3, "retest")]
    assert (r.good, r.bad, r.unresolved) == (["b", "c", "d"], ["a"], [])
    assert r.failed_with == {"a": ["b", "d"], "b": ["a"], "c": ["d"], "d": ["c"]}  # the failed cross run a-c is not


def test_errors_and_exceptions_fail_the_pair_with_their_reason():
    def pair(a, b):
        if "b" in (a, b):
            raise RuntimeError("ssh: connect refused")
        return None

    r = isolate(["a", "b"], pair)
    assert [(x.outcome.ok, x.outcome.error, x.outcome.reason) for x in r.runs] == [
        (False, True, "RuntimeError: ssh: connect refused")]
    r = isolate(["a", "c"], pair)
    assert (r.runs[0].outcome.error, r.runs[0].outcome.reason) == (True, "no result")


def test_outcomes_pass_through_and_bools_name_their_word():
    rec = PairOutcome(ok=True, busbw_gbps=1.0, reason="mine")
    assert isolate(["a", "b"], lambda a, b: rec).runs[0].outcome is rec
    assert isolate(["a", "b"], lambda a, b: True).runs[0].outcome.reason == "pass"
    assert isolate(["a", "b"], lambda a, b: False).runs[0].outcome.reason == "fail"


def test_racks_pair_across_first_and_retest_across():
    rack = {"a": "r1", "b": "r1", "c": "r2", "d": "r2", "e": "r3"}
    r = isolate(list(rack), bounded({"b"}), floor=FLOOR, rack_of=rack)
    assert runs(r)[:2] == [("a", "c", 1, "pair"), ("b", "d", 1, "pair")]
    assert r.bad == ["b"] and r.good == ["a", "c", "d", "e"]
    assert all(rack[x.a] != rack[x.b] for x in r.runs)  # every pair crossed racks


def test_a_rack_whose_nodes_fail_only_across_is_the_leaf_uplink():
    rack = {"a": "r1", "b": "r1", "c": "r2", "d": "r2", "e": "r2", "f": "r2"}

    def leaf_down(x, y):  # r1's uplink is down: any pair between r1 and another rack fails
        return (rack[x] == "r1") == (rack[y] == "r1")

    r = isolate(list(rack), leaf_down, rack_of=rack)
    assert r.bad == [] and sorted(r.unresolved) == ["a", "b"]
    assert r.leaf_suspect == {"a": "r1", "b": "r1"}
    assert runs(r)[-1][3] == "leaf"


def test_a_run_without_result_fails_the_pair():
    out = isolate(["a", "b"], lambda a, b: None).runs[0].outcome
    assert (out.ok, out.error, out.reason) == (False, True, "no result")


def test_wall_time_is_the_runs_own():
    r = isolate(["a", "b"], lambda a, b: True)
    assert 0 <= r.runs[0].wall_s < 5 and 0 <= r.wall_s < 5


def test_serial_by_default_and_one_pair_never_needs_a_pool():
    def where(log):
        def run_pair(a, b):
            log.append(threading.current_thread() is threading.main_thread())
            return True
        return run_pair

    serial: list[bool] = []
    isolate([f"n{i}" for i in range(6)], where(serial))
    assert serial == [True] * 3
    one: list[bool] = []
    isolate(["a", "b"], where(one), parallel=True)
    assert one == [True]
    two: list[bool] = []
    isolate(["a", "b", "c", "d"], where(two), parallel=True)
    assert two == [False, False]


def test_a_parallel_round_runs_every_pair_at_once_however_many():
    """40 pairs in one round: all 40 at once (a pool of the default size, at most 32 threads, would break the
    barrier and fail every pair)."""
    barrier = threading.Barrier(40, timeout=5)

    def run_pair(a, b):
        barrier.wait()
        return True

    r = isolate([f"n{i:02d}" for i in range(80)], run_pair, parallel=True)
    assert len(r.good) == 80 and r.run_count == 40


def test_two_cross_rounds_by_default():
    r = isolate([f"n{i}" for i in range(8)], lambda a, b: False)
    assert [x.phase for x in r.runs].count("cross") == 8 and r.rounds == 3  # 4 pairs, 2 cross rounds of 4


def test_a_bandwidth_without_a_floor_names_the_mistake():
    out = isolate(["a", "b"], lambda a, b: 300.0).runs[0].outcome
    assert (out.ok, out.error, out.reason) == (
        False, True, "ValueError: run_pair returned a bandwidth: pass floor= to judge it")


def test_suspects_and_partners_in_the_inventorys_order_not_by_name():
    r = isolate(["f", "e", "d", "c", "b", "a"], bounded({"c", "a"}), floor=FLOOR)
    assert runs(r) == [("f", "e", 1, "pair"), ("d", "c", 1, "pair"), ("b", "a", 1, "pair"), ("d", "f", 2, "retest"),
                       ("c", "e", 2, "retest"), ("b", "f", 3, "retest"), ("a", "e", 3, "retest")]
    assert (r.bad, r.good) == (["c", "a"], ["f", "e", "d", "b"])
