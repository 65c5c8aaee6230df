"""The xid gate's verdicts, reasons and figures per case: Xids before/during the run, recovery read after the load,
SXids fatal and non-fatal, unreadable or partial kernel logs. Lines are in the driver's form (see kernel_log.py);
the two GPUs sit at the h200x2 machine's bus ids."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import xid
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe import kernel_log
from gridready.spec.certification import CertificationSpec

BOOT = "[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)\n"
X79 = "[ 5312.118271] NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
X48 = "[ 5400.000001] NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable DBE\n"
X94_B = "[ 5500.000002] NVRM: Xid (PCI:0000:3b:00): 94, pid=7194, Contained: SM (0x1). RST: No, D-RST: No\n"
X13 = "[ 5600.000003] NVRM: Xid (PCI:0000:19:00): 13, pid=20431, name=python3, Graphics SM Warp Exception\n"
X_UNKNOWN_GPU = "[ 5700.000004] NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', GPU has fallen off the bus.\n"
S_NONFATAL = ("[186965.348898] nvidia-nvswitch2: SXid (PCI:0000:85:00.0): 12028, Non-fatal, Link 61 egress "
              "non-posted PRIV error (First)\n")
S_FATAL = "[186966.000000] nvidia-nvswitch2: SXid (PCI:0000:85:00.0): 24007, Fatal, Link 12 ingress error\n"

BUSES = ["00000000:19:00.0", "00000000:3B:00.0"]
EXPECTED_SOURCE = "spec: allow-list Xid 13, 31, 43, 45; counted over the certification run"


def _exp(**spec: Any) -> Expectations:
    return Expectations(node="n1", sku=catalog.lookup("h200"), gpus=8, spec=CertificationSpec(**spec))  # type: ignore[arg-type]


def _smi(q: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"present": True, "query": [{"index": i, "pci.bus_id": b} for i, b in enumerate(BUSES)],
            "q": {"gpus": q or []}}


def _log(text: str, source: str = "journalctl -k") -> dict[str, Any]:
    return {"source": source, **kernel_log.parse(text)}


def _healthy(bus: str, **over: Any) -> dict[str, Any]:
    remap = {"pending": False, "failure": False, **over.get("remap", {})}
    ecc = {"volatile_dram_ue": 0, "volatile_sram_ue": 0, **over.get("ecc", {})}
    return {"bus_id": bus, "remap": remap, "ecc": ecc}


def _doc(before: str, after: str | None = None, q_after: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"kernel_log": _log(before), "nvidia_smi": _smi()}
    if after is not None:
        doc["after"] = {"kernel_log": _log(after), "nvidia_smi": _smi(q_after)}
    return doc


def _one(doc: dict[str, Any], **spec: Any) -> Any:
    (r,) = xid.xid(doc, _exp(**spec))
    assert r.gate == "xid" and r.node == "n1"
    return r


# -- no evidence ---------------------------------------------------------------------------------------------------

def test_unreadable_kernel_log_is_an_error() -> None:
    r = _one({"kernel_log": {}})
    assert r.status is S.ERROR
    assert r.reason == "kernel log not readable: Xid events unknown"
    assert r.evidence == "kernel_log"


def test_a_log_with_an_xid_list_only_is_judged() -> None:
    r = _one({"kernel_log": {"xid": [], "lines": 3}})
    assert r.status is S.PASS and r.reason == "no Xid/SXid since boot"


def test_empty_kernel_log_is_an_error_naming_its_source() -> None:
    r = _one({"kernel_log": {"source": "journalctl -k", "xid": [], "sxid": [], "lines": 0}})
    assert r.status is S.ERROR
    assert r.reason == "kernel log empty (journalctl -k): Xid events unknown"
    assert r.evidence == "kernel_log"


def test_unreadable_log_after_the_load_is_an_error() -> None:
    doc = {"kernel_log": _log(BOOT), "nvidia_smi": _smi(), "after": {"nvidia_smi": _smi(), "kernel_log": None}}
    r = _one(doc)
    assert r.status is S.ERROR
    assert r.reason == "kernel log not readable after the load: the run's Xid events unknown"
    assert r.evidence == "after.kernel_log"


# -- clean logs ----------------------------------------------------------------------------------------------------

def test_clean_log_without_snapshot_passes() -> None:
    r = _one(_doc(BOOT))
    assert r.status is S.PASS
    assert r.reason == "no Xid/SXid since boot"
    assert r.measured == 0
    assert r.expected.equals == 0 and r.expected.source == EXPECTED_SOURCE
    assert r.evidence == "kernel_log (journalctl -k)"


def test_clean_log_with_snapshot_passes_over_the_run_too() -> None:
    r = _one(_doc(BOOT, BOOT))
    assert r.status is S.PASS
    assert r.reason == "no Xid/SXid since boot and none during the certification run"


def test_allow_listed_xids_are_counted_in_the_pass() -> None:
    r = _one(_doc(BOOT + X13, BOOT + X13 + X13.replace("5600", "5601")))
    assert r.status is S.PASS
    assert r.reason == ("no Xid/SXid since boot and none during the certification run "
                        "(2 allow-listed application Xids)")


def test_empty_allow_list_fails_an_application_xid_and_says_none_is_allowed() -> None:
    r = _one(_doc(BOOT + X13), xid_allow=[])
    assert r.status is S.FAIL
    assert r.expected.source == "spec: allow-list Xid none; counted over the certification run"
    assert r.measured == {13: 1}


def test_allowed_sxid_passes() -> None:
    r = _one(_doc(BOOT + S_FATAL), sxid_allow=[24007])
    assert r.status is S.PASS and r.reason == "no Xid/SXid since boot"


# -- Xids without the after-load snapshot --------------------------------------------------------------------------

def test_xids_since_boot_fail_with_gpu_counts_and_first_message() -> None:
    r = _one(_doc(BOOT + X79 + X48 + X79.replace("5312", "5313")))
    assert r.status is S.FAIL
    assert r.gpu == 0
    assert r.measured == {79: 2, 48: 1}
    assert r.reason == ("GPU 0 (0000:19:00): Xid 48, 79 x2 since boot — first: pid='<unknown>', name=<unknown>, "
                        "GPU has fallen off the bus.")
    assert r.expected.equals == 0 and r.expected.source == EXPECTED_SOURCE
    assert r.evidence == "raw.kernel_log"


def test_each_gpu_gets_its_own_verdict() -> None:
    rs = xid.xid(_doc(BOOT + X79 + X94_B), _exp())
    assert [(r.gpu, r.status, r.measured) for r in rs] == [(0, S.FAIL, {79: 1}), (1, S.FAIL, {94: 1})]
    assert rs[1].reason.startswith("GPU 1 (0000:3b:00): Xid 94 since boot — first: pid=7194")


def test_xid_on_a_gpu_not_in_the_nvidia_smi_rows_names_its_pci_address() -> None:
    r = _one(_doc(BOOT + X_UNKNOWN_GPU))
    assert r.status is S.FAIL and r.gpu is None
    assert r.reason.startswith("GPU at PCI 0000:c1:00: Xid 79 since boot")


def test_mig_lines_name_the_gpu() -> None:
    line = "[ 10.5] NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9).\n"
    r = _one(_doc(BOOT + line))
    assert r.status is S.FAIL and r.gpu == 1
    assert r.reason.startswith("GPU 1 (0000:3b:00): Xid 94 since boot — first: pid=7194, Contained: CE User")


# -- Xids before and during the run -------------------------------------------------------------------------------

def test_xid_during_the_run_fails_naming_it() -> None:
    r = _one(_doc(BOOT, BOOT + X79, [_healthy(BUSES[0])]))
    assert r.status is S.FAIL
    assert r.reason == ("GPU 0 (0000:19:00): Xid 79 during the certification run (Xid 79) — first: "
                        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")


def test_xid_before_the_run_on_a_recovered_gpu_warns() -> None:
    r = _one(_doc(BOOT + X48, BOOT + X48, [_healthy(BUSES[0])]))
    assert r.status is S.WARN
    assert r.gpu == 0 and r.measured == {48: 1}
    assert r.reason == ("GPU 0 (0000:19:00): Xid 48 before the run; the GPU reads recovered (no remap pending or "
                        "failed, no volatile uncorrectable ECC error after the load) and logged none during it — "
                        "first: pid='<unknown>', name=<unknown>, An uncorrectable DBE")


def test_xid_before_and_during_the_run_fails_on_the_new_line() -> None:
    r = _one(_doc(BOOT + X48, BOOT + X48 + X79, [_healthy(BUSES[0])]))
    assert r.status is S.FAIL
    assert r.measured == {48: 1, 79: 1}
    assert "during the certification run (Xid 79)" in r.reason


def test_every_xid_during_the_run_is_named() -> None:
    r = _one(_doc(BOOT, BOOT + X48 + X79, [_healthy(BUSES[0])]))
    assert r.status is S.FAIL
    assert "Xid 48, 79 during the certification run (Xid 48, 79) — " in r.reason


@pytest.mark.parametrize("over", [
    {"remap": {"pending": True}},
    {"remap": {"pending": None}},
    {"remap": {"failure": True}},
    {"ecc": {"volatile_dram_ue": 1}},
    {"ecc": {"volatile_dram_ue": None}},
    {"ecc": {"volatile_sram_ue": 2}},
], ids=["remap-pending", "remap-unread", "remap-failed", "dram-ue", "ecc-unread", "sram-ue"])
def test_xid_before_the_run_on_a_gpu_not_recovered_fails(over: dict[str, Any]) -> None:
    r = _one(_doc(BOOT + X48, BOOT + X48, [_healthy(BUSES[0], **over)]))
    assert r.status is S.FAIL
    assert r.reason.startswith("GPU 0 (0000:19:00): Xid 48 before the run and the GPU does not read recovered — ")


def test_xid_before_the_run_on_a_gpu_not_read_after_it_fails() -> None:
    r = _one(_doc(BOOT + X48, BOOT + X48, [_healthy(BUSES[1])]))
    assert r.status is S.FAIL and "does not read recovered" in r.reason


@pytest.mark.parametrize("g, why", [
    (None, None),
    ({}, None),
    ({"q": {}}, None),
    ({"q": {"remap": {"pending": False, "failure": False}, "ecc": {"volatile_dram_ue": 0, "volatile_sram_ue": 0}}},
     "no remap pending or failed, no volatile uncorrectable ECC error after the load"),
    ({"q": {"remap": {"pending": False}, "ecc": {"volatile_dram_ue": 0}}},
     "no remap pending or failed, no volatile uncorrectable ECC error after the load"),
    ({"q": {"remap": {"pending": False, "failure": True}, "ecc": {"volatile_dram_ue": 0}}}, None),
    ({"q": {"remap": {"pending": True}, "ecc": {"volatile_dram_ue": 0}}}, None),
    ({"q": {"remap": {"pending": False}, "ecc": {"volatile_dram_ue": 0, "volatile_sram_ue": 1}}}, None),
    ({"q": {"remap": {"pending": False}, "ecc": {"volatile_dram_ue": 3}}}, None),
    ({"q": {"remap": {"pending": False}, "ecc": {}}}, None),
    ({"q": {"remap": None, "ecc": {"volatile_dram_ue": 0}}}, None),
    ({"q": {"remap": {"pending": False}, "ecc": None}}, None),
])
def test_recovered_reads_remap_and_volatile_ecc(g: dict[str, Any] | None, why: str | None) -> None:
    assert xid._recovered(g) == why


# -- SXids ---------------------------------------------------------------------------------------------------------

def test_non_fatal_sxid_warns() -> None:
    r = _one(_doc(BOOT + S_NONFATAL))
    assert r.status is S.WARN and r.gpu is None
    assert r.measured == {12028: 1}
    assert r.reason == ("NVSwitch 0000:85:00.0: SXid 12028 non-fatal (DCGM checks non-fatal SXids only when asked: "
                        "check_non_fatal) — Non-fatal, Link 61 egress non-posted PRIV error (First)")
    assert r.expected.source == EXPECTED_SOURCE and r.evidence == "raw.kernel_log"


def test_fatal_sxid_without_snapshot_fails_since_boot() -> None:
    r = _one(_doc(BOOT + S_FATAL + S_NONFATAL))
    assert r.status is S.FAIL
    assert r.measured == {24007: 1, 12028: 1}
    assert r.reason == ("NVSwitch 0000:85:00.0: SXid 12028, 24007 since boot (fatal) — Fatal, Link 12 ingress error")


def test_fatal_sxid_before_the_run_warns() -> None:
    r = _one(_doc(BOOT + S_FATAL, BOOT + S_FATAL))
    assert r.status is S.WARN
    assert r.reason == ("NVSwitch 0000:85:00.0: SXid 24007 fatal, before the run; none during it (the services gate "
                        "judges the fabric state) — Fatal, Link 12 ingress error")


def test_fatal_sxid_during_the_run_fails() -> None:
    r = _one(_doc(BOOT, BOOT + S_FATAL))
    assert r.status is S.FAIL
    assert r.reason.startswith("NVSwitch 0000:85:00.0: SXid 24007 during the certification run — ")


def test_non_fatal_sxid_during_the_run_still_warns() -> None:
    r = _one(_doc(BOOT, BOOT + S_NONFATAL))
    assert r.status is S.WARN and "non-fatal" in r.reason


def test_fabric_manager_sxid_lines_are_judged() -> None:
    line = ("[Dec 01 2026 10:00:00] [ERROR] [tid 123] detected NVSwitch fatal error 24007 on fid 0 on NVSwitch "
            "pci bus id 00000000:85:00.0\n")
    r = _one(_doc(BOOT + line))
    assert r.status is S.FAIL and r.measured == {24007: 1}


@pytest.mark.parametrize("message, non_fatal", [
    ("Non-fatal, Link 61 egress", True),
    ("NON-FATAL link error", True),
    ("Fatal, Link 12 ingress error", False),
    ("", False),
    (None, False),
])
def test_non_fatal_reads_the_message(message: str | None, non_fatal: bool) -> None:
    assert xid._non_fatal({"message": message}) is non_fatal


# -- logs that do not reach back to boot ---------------------------------------------------------------------------

def test_log_not_reaching_boot_is_an_error_when_nothing_fails() -> None:
    doc = _doc("[ 99.1] some line\n")
    assert doc["kernel_log"]["from_boot"] is False
    r = _one(doc)
    assert r.status is S.ERROR
    assert r.reason == ("kernel log (journalctl -k) does not reach back to boot (ring buffer wrapped, no persistent "
                        "journal): Xids before its first line unknown")
    assert r.expected.source == EXPECTED_SOURCE and r.evidence == "kernel_log"


def test_log_not_reaching_boot_with_a_warning_adds_the_error() -> None:
    rs = xid.xid(_doc("[ 99.1] some line\n" + S_NONFATAL), _exp())
    assert [r.status for r in rs] == [S.WARN, S.ERROR]


def test_log_not_reaching_boot_with_a_failure_reports_only_the_failure() -> None:
    rs = xid.xid(_doc("[ 99.1] some line\n" + X79), _exp())
    assert [r.status for r in rs] == [S.FAIL]


def test_log_of_unknown_reach_passes() -> None:
    doc = _doc("[ 99.1] some line\n")
    doc["kernel_log"]["from_boot"] = None
    assert _one(doc).status is S.PASS


# -- follow-on Xids ------------------------------------------------------------------------------------------------

FOLLOW = ("[ 5312.118271] NVRM: Xid (PCI:0000:19:00): 45, pid=20431, name=python3, Ch 00000008, "
          "preemptive cleanup due to Xid 79\n")


def test_follow_on_line_during_the_run_is_judged_as_its_cause() -> None:
    r = _one(_doc(BOOT, BOOT + FOLLOW, [_healthy(BUSES[0])]))
    assert r.status is S.FAIL
    assert r.measured == {79: 1}
    assert r.reason.startswith("GPU 0 (0000:19:00): Xid 79 (named as the cause by follow-on Xid 45 lines (preemptive "
                               "cleanup, due to previous errors)) during the certification run (Xid 79) — ")


def test_judged_keeps_the_follow_on_code() -> None:
    e = {"xid": 45, "message": "Ch 0008, due to Xid 79", "line": "l"}
    assert xid._judged(e) == {"xid": 79, "follow_on": 45, "message": "Ch 0008, due to Xid 79", "line": "l"}
    plain = {"xid": 79, "message": "fallen off the bus", "line": "l"}
    assert xid._judged(plain) == plain and "follow_on" not in xid._judged(plain)


@pytest.mark.parametrize("e, cause", [
    ({"xid": 45, "message": "due to Xid 79"}, 79),
    ({"xid": 45, "message": "due to xid 79"}, 79),
    ({"xid": 45, "message": "(Xid 48)"}, 48),
    ({"xid": 45, "message": "Xid: 62"}, 62),
    ({"xid": 45, "message": "Xid#31"}, 31),
    ({"xid": 45, "message": "Xid 45 cleanup, due to Xid 79"}, 79),
    ({"xid": 45, "message": "Xid 45 cleanup"}, None),
    ({"xid": 45, "message": None}, None),
    ({"xid": 45}, None),
    ({"xid": 79, "message": "due to Xid 48"}, None),
    ({"message": "due to Xid 48"}, None),
    ({"xid": 45, "message": "Taxid 79"}, None),
])
def test_cause_of(e: dict[str, Any], cause: int | None) -> None:
    assert xid.cause_of(e) == cause


LOST_19 = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:19:00.0\n"
           "               NVRM: (PCI ID: 10de:2335) installed in this system has\n"
           "               NVRM: fallen off the bus and is not responding to commands.\n")
INIT_3B = "[  885.242168] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"


@pytest.mark.parametrize(("text", "gpu", "what"), [(LOST_19, 0, "fallen off the bus"),
                                                   (INIT_3B, 1, "failed to initialise (RmInitAdapter)")])
def test_gpu_lost_with_no_xid_line_fails(text: str, gpu: int, what: str) -> None:
    r = _one(_doc(BOOT + text))
    assert (r.status, r.gpu) == (S.FAIL, gpu)
    assert f"GPU {what} (driver notice, no Xid line) since boot" in r.reason


def test_gpu_lost_during_the_run_fails_though_it_reads_recovered() -> None:
    r = _one(_doc(BOOT, BOOT + INIT_3B, [_healthy(b) for b in BUSES]))
    assert r.status is S.FAIL and "during the certification run (GPU failed to initialise" in r.reason


@pytest.mark.parametrize(("action", "status"), [("None", S.WARN), ("GPU Reset", S.FAIL), ("Node Reboot", S.FAIL),
                                                ("Drain P2P", S.FAIL), ("Drain and Reset", S.FAIL)])
def test_recovery_action_decides_whether_an_old_xid_reads_recovered(action: str, status: S) -> None:
    after = [{**_healthy(b), "recovery_action": action} for b in BUSES]
    r = _one(_doc(BOOT + X79, BOOT + X79, after))
    assert r.status is status


def test_an_sxid_report_over_several_lines_takes_the_severity_its_code_states() -> None:
    """The NVSwitch driver prints one SXid as a Data, a Non-fatal and a Severity line (NVIDIA/nvtrust#124): the lines
    that state no severity are the same non-fatal event, not a fatal one."""
    data = ("[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, "
            "0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}\n")
    nonfatal = "[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ\n"
    assert _one(_doc(BOOT + data + nonfatal)).status is S.WARN
    assert _one(_doc(BOOT + data)).status is S.FAIL  # no line states a severity: fail closed
