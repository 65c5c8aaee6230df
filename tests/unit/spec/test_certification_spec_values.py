"""certification of cluster.yml at the value level: the DCGM level each profile runs (explicit level first), the
quick profile capped at level 1, each DCGM precision at most once, one minimum per driver branch."""

from __future__ import annotations

import pytest

from gridready.spec.certification import CertificationSpec, MinVersions
from tests.unit.spec.spec_lines import lines


@pytest.mark.parametrize(("data", "level"), [
    ({"profile": "quick"}, 1), ({"profile": "standard"}, 3), ({"profile": "burn-in"}, 4), ({}, 3),
    ({"profile": "burn-in", "dcgm_level": 2}, 2), ({"profile": "standard", "dcgm_level": 1}, 1),
    ({"profile": "quick", "dcgm_level": 1}, 1),
])
def test_effective_dcgm_level(data, level):
    assert CertificationSpec.model_validate(data).effective_dcgm_level() == level


QUICK = "cluster.yml: (top level): profile quick runs DCGM level 1 at most; use profile standard for level 2-3"


@pytest.mark.parametrize(("data", "want"), [
    ({"profile": "quick", "dcgm_level": 2}, [QUICK]),
    ({"profile": "quick", "dcgm_level": 4}, [QUICK]),
    ({"profile": "quick", "dcgm_level": 1}, []),
    ({"profile": "quick"}, []),
    ({"profile": "standard", "dcgm_level": 4}, []),
    ({"profile": "burn-in", "dcgm_level": 2}, []),
])
def test_quick_is_quick(data, want):
    assert lines(CertificationSpec, data) == want


@pytest.mark.parametrize(("precision", "want"), [
    ("h", []), ("hsd", []), ("ds", []),
    ("hh", ["cluster.yml: dcgm_precision: each of h, s, d at most once: 'hh'"]),
    ("hsh", ["cluster.yml: dcgm_precision: each of h, s, d at most once: 'hsh'"]),
])
def test_each_precision_once(precision, want):
    assert lines(CertificationSpec, {"dcgm_precision": precision}) == want


@pytest.mark.parametrize(("driver", "want"), [
    (["570.148.08", "575.57.08", "580.65.06"], []),
    (["580.65.06"], []),
    ([], []),
    (["580.65.06", "580.95.05"], ["cluster.yml: driver: one minimum per driver branch: ['580.65.06', '580.95.05']"]),
    (["570.1", "580.2", "570.3"], ["cluster.yml: driver: one minimum per driver branch: ['570.1', '580.2', '570.3']"]),
    (["5.80", "5.81"], ["cluster.yml: driver: one minimum per driver branch: ['5.80', '5.81']"]),  # branch: before "."
    (["580", "580.1"], ["cluster.yml: driver: one minimum per driver branch: ['580', '580.1']"]),
])
def test_one_minimum_per_driver_branch(driver, want):
    assert lines(MinVersions, {"driver": driver}) == want
