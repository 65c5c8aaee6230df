"""How the xid gate reads its events: an SXid report's severity word in any letter case (a code whose one line states
NON-FATAL makes its other lines, Data and Severity, non-fatal too; FATAL stays fatal: xid._fatal_sxids,
NVIDIA/nvtrust#124's three lines), and a lost-GPU notice quoted to its first 240 characters."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify import xid


def _ev(sxid: int, message: str) -> dict[str, Any]:
    return {"sxid": sxid, "pci": "0000:04:00.0", "message": message}


@pytest.mark.parametrize(("severity", "fatal_lines"), [
    ("Non-fatal", 0), ("NON-FATAL", 0), ("non-fatal", 0),
    ("Fatal", 2), ("FATAL", 2),
])
def test_the_severity_word_decides_the_code_whatever_its_case(severity: str, fatal_lines: int) -> None:
    events = [_ev(22013, "Data {0x0000002b, 0x0000002b, 0x00000000}"), _ev(22013, f"{severity}, Link 44 Minion")]
    assert len(xid._fatal_sxids(events)) == fatal_lines


def test_a_code_that_states_no_severity_is_fatal_beside_a_non_fatal_code() -> None:
    events = [_ev(22013, "NON-FATAL, Link 44"), _ev(24007, "Data {0x1}"), _ev(22013, "Severity 0 Engine instance 44")]
    assert [e["sxid"] for e in xid._fatal_sxids(events)] == [24007]


def test_a_lost_gpu_notice_is_quoted_to_its_first_240_characters() -> None:
    line = "  NVRM: GPU at PCI:0000:19:00: GPU has fallen off the bus. " + "detail " * 40
    lost = {"what": "fallen off the bus", "pci": "0000:19:00", "line": line}
    assert xid._lost_events({"gpu_lost": [lost]}) == [
        {"xid": None, "lost": "fallen off the bus", "pci": "0000:19:00", "message": line.strip()[:240], "line": line}]
    assert len(xid._lost_events({"gpu_lost": [lost]})[0]["message"]) == 240


def test_a_lost_gpu_notice_logged_before_the_run_is_not_counted_again_during_it() -> None:
    """The same notice in the log before the run and in the log after the load happened before the run."""
    from tests.unit.certify.test_xid_gate_values import BOOT, LOST_19, _doc, _exp

    (r,) = xid.xid(_doc(BOOT + LOST_19, BOOT + LOST_19), _exp())
    assert r.status is xid.F
    assert r.reason.startswith("GPU 0 (0000:19:00): GPU fallen off the bus (driver notice, no Xid line) before the run")


def test_the_codes_during_the_run_are_named_once_each_after_the_total_count() -> None:
    from tests.unit.certify.test_xid_gate_values import BOOT, X79, _doc, _exp

    again = X79.replace("[ 5312.118271]", "[ 5999.000001]")
    (r,) = xid.xid(_doc(BOOT, BOOT + X79 + again), _exp())
    assert r.reason.startswith("GPU 0 (0000:19:00): Xid 79 x2 during the certification run (Xid 79) — first: ")
