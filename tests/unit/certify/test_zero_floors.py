"""A floor the spec sets to 0 (a check the operator turned into a report: `floors.<name>: 0`) is a floor of 0, not
"no floor" read as some other number: any measured figure passes it, however small, and the verdict says 0."""

from __future__ import annotations

import copy
from typing import Any

from gridready.certify import goodput, transfer
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_gates_public import exp
from tests.unit.certify.test_goodput_values import doc as goodput_doc
from tests.unit.certify.test_goodput_values import exp as goodput_exp
from tests.unit.certify.test_goodput_values import run as goodput_run


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def test_peer_floor_zero_is_no_peer_floor():
    """peer_bandwidth reads a 0 floor as "no peer floor" (n/a): the one gate where 0 switches the check off; the
    reason names the spec's key, not a missing NVLink the board has."""
    doc = _doc()
    for p in doc["torch"]["peer"]:
        p["gbps"] = 0.5
    (r,) = transfer.peer_bandwidth(doc, exp("h200", 2, "passthrough", floors={"peer_gbps": 0}))
    assert (r.status, r.required) == (S.SKIPPED, False)
    assert r.reason == "n/a: certification.floors.peer_gbps is 0 in the spec: no peer floor"


def test_h2d_floor_zero_passes_a_slow_link():
    doc = _doc()
    doc["torch"]["gpus"][0].update(h2d_gbps=0.5, d2h_gbps=0.5)
    r = transfer.h2d_bandwidth(doc, exp("h200", 2, "passthrough", floors={"h2d_gbps": 0}))[0]
    assert (r.status, r.expected.floor) == (S.PASS, 0)


def test_goodput_floor_zero_passes_a_slow_gpu():
    (r,) = goodput.training_goodput(goodput_doc(goodput_run(tf=0.5)), goodput_exp(floor=0))
    assert (r.status, r.expected.floor) == (S.PASS, 0)
