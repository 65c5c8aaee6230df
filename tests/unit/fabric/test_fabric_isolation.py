"""Two-pass isolation against fake fabrics: who is named, and how many pairwise runs it takes."""

from __future__ import annotations

import itertools
import math

import pytest

from gridready.certify.isolation import PairOutcome, isolate

FLOOR = 368.0


def fabric(bad: set[str], log: list | None = None):
    """busbw bounded by the worst participant: 388 healthy, 194 with a half-rate node."""

    def run_pair(a: str, b: str) -> float:
        if log is not None:
            log.append((a, b))
        return 194.0 if a in bad or b in bad else 388.0

    return run_pair


def nodes(n: int) -> list[str]:
    return [f"n{i:02d}" for i in range(n)]


@pytest.mark.parametrize("n", [6, 12])
@pytest.mark.parametrize("k", [0, 1, 2])
def test_names_exactly_the_bad_nodes(n, k):
    for bad in itertools.combinations(nodes(n), k):
        log: list = []
        r = isolate(nodes(n), fabric(set(bad), log), floor=FLOOR)
        assert sorted(r.bad) == sorted(bad) and r.unresolved == []
        assert sorted(r.good) == sorted(set(nodes(n)) - set(bad))
        assert r.run_count == len(log) <= n // 2 + 2 * (2 * k)  # n/2 + at most 2 retests per suspect
        assert len(set(map(frozenset, log))) == len(log)  # never the same pair twice
        for b in bad:  # quarantined only after failing with two different partners
            assert len(set(r.failed_with[b])) == 2


def test_run_counts_are_linear():
    counts = {n: isolate(nodes(n), fabric({"n03"}), floor=FLOOR).run_count for n in (6, 12, 24, 48, 96)}
    assert counts == {n: n // 2 + 2 for n in counts}
    worst = max(isolate(nodes(48), fabric(set(b)), floor=FLOOR).run_count
                for b in itertools.combinations(nodes(48)[:8], 3))
    assert worst <= 48 // 2 + 4 * 3


def test_no_false_quarantine_for_any_three_bad_nodes():
    for n in (6, 7, 12):
        for bad in itertools.combinations(nodes(n), 3):
            r = isolate(nodes(n), fabric(set(bad)), floor=FLOOR)
            assert set(r.bad) <= set(bad)
            assert set(r.bad) | set(r.unresolved) >= set(bad)


def test_odd_fleet_leftover_is_tested():
    r = isolate(nodes(7), fabric({"n06"}), floor=FLOOR)
    assert r.bad == ["n06"] and [p.phase for p in r.partners("n06")] == ["retest", "retest"]
    assert isolate(nodes(7), fabric(set()), floor=FLOOR).run_count == 4


def test_flaky_single_failure_does_not_quarantine():
    seen: set = set()

    def flaky(a, b):  # the first run of n00 fails once, then the fabric is fine
        if "n00" in (a, b) and "n00" not in seen:
            seen.add("n00")
            return PairOutcome(ok=False, busbw_gbps=100.0, reason="transient")
        return PairOutcome(ok=True, busbw_gbps=388.0)

    r = isolate(nodes(6), flaky)
    assert r.bad == [] and sorted(r.good) == nodes(6)


def test_fabric_wide_failure_quarantines_nobody():
    r = isolate(nodes(6), lambda a, b: False)
    assert r.bad == [] and sorted(r.unresolved) == nodes(6) and r.fabric_wide
    assert r.run_count <= 6 // 2 + 2 * 3


def test_two_nodes_cannot_be_told_apart():
    r = isolate(nodes(2), fabric({"n01"}), floor=FLOOR)
    assert r.bad == [] and r.unresolved == ["n00", "n01"] and r.run_count == 1


def test_launcher_exceptions_count_as_failed_runs():
    def boom(a, b):
        if "n04" in (a, b):
            raise RuntimeError("mpirun: ssh failed")
        return True

    r = isolate(nodes(6), boom)
    assert r.bad == ["n04"] and r.partners("n04")[0].outcome.error


def test_parallel_rounds_give_the_same_answer():
    import threading
    import time

    active, peak, calls = [0], [0], [0]
    lock = threading.Lock()
    first_round = threading.Barrier(6, timeout=10)  # the 6 pairs of round 1 must all be running at once

    def slow(a, b):
        with lock:
            active[0] += 1
            calls[0] += 1
            mine = calls[0]
            peak[0] = max(peak[0], active[0])
        if mine <= 6:
            first_round.wait()  # a serial isolate() would break it (BrokenBarrierError) instead of passing
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return 194.0 if "n05" in (a, b) else 388.0

    r = isolate(nodes(12), slow, floor=FLOOR, parallel=True)
    assert r.bad == ["n05"] and r.rounds == 2 and peak[0] == 6
    assert r.wall_s < 0.02 * r.run_count


def test_bandwidth_needs_a_floor():
    r = isolate(nodes(2), lambda a, b: 300.0)
    assert r.runs[0].outcome.error and "floor" in r.runs[0].outcome.reason
    assert math.isclose(isolate(nodes(2), lambda a, b: 370.0, floor=FLOOR).runs[0].outcome.busbw_gbps, 370.0)
