"""gridready.probe.profiles.sweep_sizes by value: the all-reduce sizes the probe sweeps (collect.Probe's nccl step),
each list worked out here from its definition: min_bytes times factor**k up to max_bytes, every power-of-two
multiple of floor_from up to max_bytes (the gated range), and max_bytes itself. Every call runs under a line
budget, so a sweep that stops growing towards its end fails at once instead of hanging the suite."""

from __future__ import annotations

import pytest

from gridready.probe import profiles
from gridready.probe.profiles import PROFILES, GiB, MiB
from tests.unit.probe.line_budget import line_budget


def sweep(min_bytes: int, max_bytes: int, factor: int, floor_from: int) -> list[int]:
    """sweep_sizes under a budget of 1,000 lines: the longest sweep here (1 MiB to 8 GiB doubling, 14 sizes in
    each loop) runs about a hundred."""
    with line_budget(profiles, 1000):
        return profiles.sweep_sizes(min_bytes, max_bytes, factor, floor_from)


def test_quick_profile_sweep_from_1_mib_to_8_gib():
    prof = PROFILES["quick"]
    geometric = [MiB * 4**k for k in range(7)]  # 1 MiB .. 4 GiB; 16 GiB is past the end
    gated = [GiB, 2 * GiB, 4 * GiB, 8 * GiB]
    assert sweep(prof["ar_min_bytes"], 8 * GiB, prof["ar_factor"], GiB) == sorted({*geometric, *gated})
    assert sweep(MiB, 8 * GiB, 4, GiB) == [MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB, 2 * GiB, 4 * GiB,
                                           8 * GiB]


def test_standard_profile_doubles_every_size():
    assert PROFILES["standard"]["ar_factor"] == PROFILES["burn-in"]["ar_factor"] == 2
    assert sweep(MiB, 8 * GiB, 2, GiB) == [MiB << k for k in range(14)]  # 1 MiB .. 8 GiB, 14 sizes


@pytest.mark.parametrize(("start", "factor"), [(MiB, 4), (MiB, 2), (3 * MiB, 5), (1000, 10)])
def test_geometric_sizes_with_the_gated_range(start, factor):
    end = 8 * GiB
    geometric = []
    size = start
    while size <= end:
        geometric.append(size)
        size = size * factor
    assert sweep(start, end, factor, GiB) == sorted({*geometric, GiB, 2 * GiB, 4 * GiB, 8 * GiB})


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


def test_the_budget_stops_a_sweep_that_never_ends():
    with pytest.raises(AssertionError, match="a loop does not reach its end"):
        sweep(0, 8, 2, 16)  # 0 times any factor stays 0: this input never ends
