"""certification.fabric at the value level: the floor per algorithm (absolute first, else the algorithm's fraction,
else ring's, else 85%), and each bound of the fabric settings at its edge (equal accepted, just beyond refused)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gridready.spec.fabric import DEFAULT_COUNTER_LIMITS, FabricSettings


@pytest.mark.parametrize(("settings", "algo", "want"), [
    ({}, "ring", (340.0, "85% of 400 GB/s per-node NIC bandwidth")),
    ({"floor_gbps": {"tree": 0.0}}, "tree", (0.0, "spec fabric.floor_gbps.tree")),  # an explicit 0 is a floor
    ({"floor_gbps": {"tree": 300.0}}, "ring", (340.0, "85% of 400 GB/s per-node NIC bandwidth")),
    ({"floor_fraction": {"ring": 0.9}}, "nvls", (360.0, "90% of 400 GB/s per-node NIC bandwidth")),  # ring's
    ({"floor_fraction": {"tree": 0.9}}, "nvls", (340.0, "85% of 400 GB/s per-node NIC bandwidth")),  # neither
    ({"floor_fraction": {"nvls": 1.2}}, "nvls", (480.0, "120% of 400 GB/s per-node NIC bandwidth")),
])
def test_floor_for(settings, algo, want):
    assert FabricSettings(**settings).floor_for(algo, 400) == want


def test_floor_for_scales_with_the_nic_sum_and_rounds():
    assert FabricSettings().floor_for("ring", 250) == (212.5, "85% of 250 GB/s per-node NIC bandwidth")
    assert FabricSettings(floor_fraction={"ring": 0.333}).floor_for("ring", 100)[0] == 33.3


@pytest.mark.parametrize(("key", "ok", "bad"), [
    ("floor_fraction", {"ring": 1.2}, {"ring": 1.21}),
    ("floor_fraction", {"ring": 0.01}, {"ring": 0.0}),
    ("pair_floor_fraction", 1.2, 1.21),
    ("hca_bw_fraction", 1.0, 1.01),
    ("check_iters", 100, 101),
    ("check_iters", 1, 0),
    ("min_bytes", 1, 0),
])
def test_bounds_at_their_edge(key, ok, bad):
    assert getattr(FabricSettings(**{key: ok}), key) == ok
    with pytest.raises(ValidationError):
        FabricSettings(**{key: bad})


def test_strict_types_and_unknown_keys_refused():
    with pytest.raises(ValidationError):
        FabricSettings(hca_bw_fraction="0.9")
    with pytest.raises(ValidationError):
        FabricSettings(floor_pct=85)


def test_defaults():
    s = FabricSettings()
    assert s.collectives == ["all_reduce"] and s.algo == "ring" and s.pair_floor_fraction == 0.625
    assert s.counter_limits == DEFAULT_COUNTER_LIMITS and s.counter_limits is not DEFAULT_COUNTER_LIMITS
    assert DEFAULT_COUNTER_LIMITS["link_downed"] == 0 and s.min_bytes == 1 << 30 and s.max_bytes == 8 << 30
