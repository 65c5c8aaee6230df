"""gridready.probe.profiles.sweep_sizes by value: the all-reduce sizes the probe sweeps (collect.Probe's nccl step),
each list worked out here from its definition: min_bytes times factor**k up to max_bytes, every power-of-two
multiple of floor_from up to max_bytes (the gated range), and max_bytes itself."""

from __future__ import annotations

import math

import pytest

from gridready.probe.profiles import PROFILES, GiB, MiB, sweep_sizes


class _End(int):
    """max_bytes that counts the loop tests against it (`s <= max_bytes` asks int subclasses first, as the
    reflected `__ge__`: Python reference, "Rich comparison methods") and fails past `budget` of them: a sweep that
    stopped growing towards the end would loop forever."""

    budget = 0

    def __ge__(self, other: object) -> bool:
        type(self).budget -= 1
        if type(self).budget < 0:
            raise AssertionError("the sweep does not reach its end")
        return int(self) >= other  # type: ignore[operator]


def sweep(min_bytes: int, max_bytes: int, factor: int, floor_from: int) -> list[int]:
    """sweep_sizes with its end counting the loop tests: at most 100, far more than any sweep here needs (the
    longest, 1 MiB to 8 GiB doubling, makes 15 in each loop), so a sweep that stopped growing fails at once
    instead of hanging."""
    _End.budget = 100
    return sweep_sizes(min_bytes, _End(max_bytes), factor, floor_from)


def test_quick_profile_sweep_from_1_mib_to_8_gib():
    prof = PROFILES["quick"]
    geometric = [MiB * 4**k for k in range(7)]  # 1 MiB .. 4 GiB; 16 GiB is past the end
    gated = [GiB, 2 * GiB, 4 * GiB, 8 * GiB]
    assert sweep(prof["ar_min_bytes"], 8 * GiB, prof["ar_factor"], GiB) == sorted({*geometric, *gated})
    assert sweep(MiB, 8 * GiB, 4, GiB) == [MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB, 2 * GiB, 4 * GiB,
                                           8 * GiB]


def test_standard_profile_doubles_every_size():
    assert sweep(MiB, 8 * GiB, 2, GiB) == [MiB << k for k in range(14)]  # 1 MiB .. 8 GiB, 14 sizes


def test_end_on_neither_sweep_is_added_and_gated_sizes_double():
    # geometric 1000, 3000, 9000; gated 4096, 8192; the end 10000
    assert sweep(1000, 10000, 3, 4096) == [1000, 3000, 4096, 8192, 9000, 10000]


def test_sizes_equal_to_the_end_are_kept_once():
    assert sweep(8, 64, 2, 16) == [8, 16, 32, 64]
    assert sweep(64, 64, 2, 64) == [64]


def test_gated_range_beyond_the_end_adds_nothing():
    assert sweep(MiB, 64 * MiB, 2, GiB) == [MiB << k for k in range(7)]


def test_start_beyond_the_end_is_the_end_alone():
    assert sweep(10, 5, 2, 100) == [5]


@pytest.mark.parametrize(("start", "factor"), [(MiB, 4), (MiB, 2), (3 * MiB, 5)])
def test_each_sweep_ends_after_one_test_per_size(monkeypatch, start, factor):
    end = 8 * GiB
    steps = math.floor(math.log(end / start, factor)) + 1 + 1  # geometric sizes, then the failing test
    gated = 4 + 1  # 1, 2, 4, 8 GiB, then the failing test
    monkeypatch.setattr(_End, "budget", steps + gated)
    sizes = sweep_sizes(start, _End(end), factor, GiB)
    assert _End.budget == 0
    assert sizes[-1] == end and all(type(s) is int for s in sizes[:-1])
