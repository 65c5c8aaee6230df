"""Every gate name the spec may waive or call not applicable: one of each table, an outlier gate, nothing else."""

from __future__ import annotations

import pytest

from gridready.spec.gates import is_known_gate


@pytest.mark.parametrize(("name", "known"), [
    ("xid", True), ("training_goodput", True),        # node gates
    ("hca_rate", True), ("fabric_isolation", True),   # fabric gates
    ("sdc_consensus", True),                          # fleet gate
    ("outlier_hbm_bandwidth", True),
    ("outlier", False), ("Xid", False), ("nccl", False), ("", False), ("hca_rate ", False),
])
def test_is_known_gate(name, known):
    assert is_known_gate(name) is known
