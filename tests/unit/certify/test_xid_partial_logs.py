"""The xid gate on kernel-log records that carry only some of the parser's lists: a record with its source but no
event lists (an older probe, an offline capture), one with Xid events but no SXid list, a snapshot after the load
without SXid or lost-GPU lists. Each list missing reads as empty, never as an unreadable log or a crash (the
mutation record's "defaults the parser always fills" survivors: these inputs tell them apart)."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify import xid
from gridready.certify.result import GateStatus as S
from tests.unit.certify.test_xid_gate_values import (
    BOOT,
    BUSES,
    INIT_3B,
    LOST_19,
    X48,
    X79,
    _doc,
    _exp,
    _healthy,
    _smi,
)

LINE79 = {"xid": 79, "pci": "0000:19:00", "message": "GPU has fallen off the bus.", "line": X79.strip()}
LINE48 = {"xid": 48, "pci": "0000:19:00", "message": "An uncorrectable DBE", "line": X48.strip()}


def _run(doc: dict[str, Any]) -> list[Any]:
    return xid.xid({"nvidia_smi": _smi(), **doc}, _exp())


def test_a_log_with_its_source_and_no_event_lists_passes():
    (r,) = _run({"kernel_log": {"source": "journalctl -k", "lines": 120}})
    assert (r.status, r.reason, r.evidence) == (S.PASS, "no Xid/SXid since boot", "kernel_log (journalctl -k)")


def test_xid_events_without_an_sxid_list_are_judged():
    (r,) = _run({"kernel_log": {"source": "dmesg", "lines": 5, "xid": [LINE79]}})
    assert (r.status, r.gpu) == (S.FAIL, 0)
    assert r.reason.startswith(f"GPU 0 ({LINE79['pci']}): Xid 79 since boot")
    assert r.measured == {79: 1}


def test_xid_events_without_a_source_are_judged():
    (r,) = _run({"kernel_log": {"lines": 5, "xid": [LINE79]}})
    assert r.status is S.FAIL and r.gpu == 0


def test_snapshot_without_sxid_or_lost_lists_still_judges_the_run():
    doc = {"kernel_log": {"source": "dmesg", "lines": 5, "xid": [LINE79], "sxid": []},
           "after": {"kernel_log": {"source": "dmesg", "lines": 6, "xid": [LINE79, LINE48]},
                     "nvidia_smi": _smi([{"bus_id": BUSES[0]}])}}
    (r,) = _run(doc)
    assert r.status is S.FAIL
    assert "during the certification run (Xid 48)" in r.reason
    assert r.measured == {79: 1, 48: 1}


def test_snapshot_with_only_a_source_adds_nothing():
    doc = {"kernel_log": {"source": "dmesg", "lines": 5},
           "after": {"kernel_log": {"source": "dmesg", "lines": 6}, "nvidia_smi": _smi()}}
    (r,) = _run(doc)
    assert (r.status, r.reason) == (S.PASS, "no Xid/SXid since boot and none during the certification run")


def test_a_lost_gpu_without_an_address_is_named_unknown():
    lost = {"what": "fallen off the bus", "pci": None, "line": "NVRM: GPU has fallen off the bus."}
    (r,) = _run({"kernel_log": {"source": "dmesg", "lines": 5, "gpu_lost": [lost]}})
    assert r.status is S.FAIL and r.gpu is None
    assert r.reason.startswith("GPU at PCI unknown: GPU fallen off the bus (driver notice, no Xid line) since boot")


# -- recovery read after the load: repair fields and the recovery action's wording ---------------------------------

def _before_and_after(*after_rows: dict[str, Any]) -> dict[str, Any]:
    return _doc(BOOT + X48, BOOT + X48, list(after_rows))


@pytest.mark.parametrize("repair", [{"channel_pending": True}, {"tpc_pending": True}, {"unrepairable": True}])
def test_a_repair_pending_or_unrepairable_memory_is_not_recovered(repair):
    (r,) = _run(_before_and_after({**_healthy(BUSES[0]), "repair": {"channel_pending": False, **repair}}))
    assert r.status is S.FAIL and "does not read recovered" in r.reason


def test_no_repair_pending_reads_recovered_and_names_the_recovery_action():
    row = {**_healthy(BUSES[0]), "repair": {"channel_pending": False, "tpc_pending": False, "unrepairable": False},
           "recovery_action": "None"}
    (r,) = _run(_before_and_after(row))
    assert r.status is S.WARN
    assert ("the GPU reads recovered (no remap pending or failed, no volatile uncorrectable ECC error after the "
            "load, recovery action None)") in r.reason


def test_two_notices_of_one_lost_gpu_are_counted():
    (r,) = _run(_doc(BOOT + INIT_3B + INIT_3B.replace("885.242168", "886.000001")))
    assert r.status is S.FAIL and r.gpu == 1
    assert "GPU failed to initialise (RmInitAdapter) (driver notice x2, no Xid line) since boot" in r.reason


def test_an_xid_and_a_lost_notice_of_one_gpu_are_listed_together():
    (r,) = _run(_doc(BOOT + X48 + LOST_19))
    assert r.status is S.FAIL and r.gpu == 0
    assert "Xid 48; GPU fallen off the bus (driver notice, no Xid line) since boot" in r.reason
