"""Follow-on Xids (issue 30, item 3): a window holding only the Xid 45 lines of a fatal event is judged by the
cause they name. The Xid 45 lines below are CONSTRUCTED in the driver's `NVRM: Xid (PCI:...): <code>, <text>` form
(kernel_log.py, open-gpu-kernel-modules) with a cause named in the text; no captured line of that kind is in
/work/shared/fixtures. The Xid 79 line carries NVIDIA's catalog text ("GPU has fallen off the bus")."""

from __future__ import annotations

from gridready import catalog
from gridready.certify import xid
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from gridready.spec.certification import CertificationSpec

BOOT = "[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)\n"
FOLLOW_79 = (BOOT
             + "[ 5312.118271] NVRM: Xid (PCI:0000:19:00): 45, pid=20431, name=python3, Ch 00000008, "
               "preemptive cleanup due to Xid 79\n"
             + "[ 5312.118902] NVRM: Xid (PCI:0000:19:00): 45, pid=20431, name=python3, Ch 00000009, "
               "preemptive cleanup due to Xid 79\n")
APP_45 = BOOT + "[ 5312.118271] NVRM: Xid (PCI:0000:19:00): 45, pid=20431, name=python3, Ch 00000008\n"
APP_CAUSE = (BOOT + "[ 5312.118271] NVRM: Xid (PCI:0000:19:00): 45, pid=20431, name=python3, Ch 00000008, "
             "preemptive cleanup due to Xid 43\n")


def _exp() -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup("h200"), gpus=8, spec=CertificationSpec())  # type: ignore[arg-type]


def test_follow_on_lines_naming_a_fatal_cause_fail_as_that_cause() -> None:
    (r,) = xid.xid(doc_from_outputs({"kernel_log": FOLLOW_79}), _exp())
    assert r.status is S.FAIL
    assert "Xid 79 x2" in r.reason and "follow-on Xid 45" in r.reason and "PCI 0000:19:00" in r.reason
    assert r.measured == {79: 2}


def test_xid45_without_a_named_cause_stays_allow_listed() -> None:
    (r,) = xid.xid(doc_from_outputs({"kernel_log": APP_45}), _exp())
    assert r.status is S.PASS and "1 allow-listed" in r.reason


def test_follow_on_of_an_application_fault_stays_allowed() -> None:
    (r,) = xid.xid(doc_from_outputs({"kernel_log": APP_CAUSE}), _exp())
    assert r.status is S.PASS


def test_cause_of_reads_only_follow_on_codes() -> None:
    assert xid.cause_of({"xid": 45, "message": "pid=1, Ch 0008, due to Xid 79"}) == 79
    assert xid.cause_of({"xid": 45, "message": "pid=1, (Xid 48)"}) == 48
    assert xid.cause_of({"xid": 94, "message": "Contained: SM (0x1), Xid 48"}) is None
    assert xid.cause_of({"xid": 45, "message": "pid=1, Ch 0008"}) is None
