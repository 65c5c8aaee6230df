"""kernel_log.parse read value by value: every Xid, SXid and PCIe 'limited by' record of the real kernel logs
(tests/fixtures/public/dmesg, fabricmanager; the h200x2 machine's NVRM lines), line counts, from_boot, and what
lines that almost match yield."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.probe import kernel_log
from tests.unit.certify.fixtures_io import probe_quick, pub

BOOT = "[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)"
CMDLINE = "[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-6.8.0-49-generic root=/dev/sda1 ro"


def _lines(tool: str, key: str) -> list[str]:
    return pub(tool, key).splitlines()


def test_imbue_fleet_lines_every_record() -> None:
    text = pub("dmesg", "FAIL-xid94-xid64-sxid12028-pcie-limited")
    l94, l64, lim, sx = text.splitlines()
    assert kernel_log.parse(text) == {
        "xid": [
            {"xid": 94, "pci": "0000:0f:00", "message": "pid=2503421, name=python3, Ch 00000008",
             "gpu_instance": None, "line": l94},
            {"xid": 64, "pci": "0000:0f:00",
             "message": "pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000002eebc4100) - All reserved "
                        "rows for bank are remapped",
             "gpu_instance": None, "line": l64},
        ],
        "sxid": [{"sxid": 12028, "pci": "0000:85:00.0",
                  "message": "Non-fatal, Link 61 egress non-posted PRIV error (First)", "line": sx}],
        "gpu_lost": [],
        "pcie_limited": [{"driver": "mlx5_core", "pci": "0000:9c:00.0", "limited_by": "32.0 GT/s PCIe x8",
                          "at": "0000:97:01.0", "gbps": 252.056, "capable_gbps": 504.112,
                          "capable_of": "32.0 GT/s PCIe x16", "line": lim}],
        "lines": 4,
        "from_boot": False,
    }


def test_mig_partition_xids() -> None:
    text = pub("dmesg", "MIG-GPU-I-Xid94-and-Xid95")
    l94, l95 = text.splitlines()
    p = kernel_log.parse(text)
    assert p["xid"] == [
        {"xid": 94, "pci": "0000:01:00", "message": "pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
         "gpu_instance": 5, "line": l94},
        {"xid": 95, "pci": "0000:01:00", "message": "pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No",
         "gpu_instance": None, "line": l95},
    ]
    assert (p["sxid"], p["pcie_limited"], p["lines"], p["from_boot"]) == ([], [], 2, False)


@pytest.mark.parametrize(("inside", "instance"), [
    (" GPU-I:05", 5), (" GPU-I:01 GPU-CI:02", 1), (" GPU-CI:02 GPU-I:07", 7), (" GPU-CI:03", None), ("", None),
])
def test_mig_instance_inside_the_parenthesis(inside: str, instance: int | None) -> None:
    line = f"NVRM: Xid (PCI:0000:01:00{inside}): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
    (x,) = kernel_log.parse(line)["xid"]
    assert (x["xid"], x["pci"], x["gpu_instance"]) == (94, "0000:01:00", instance)
    assert x["message"] == "pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"


def test_gpud_dmesg_xids_in_order_and_noise_counted() -> None:
    text = pub("dmesg", "FAIL-xid48-63-94-dbe-rowremap")
    p = kernel_log.parse(text)
    assert [x["xid"] for x in p["xid"]] == [48, 63, 94, 94, 94, 94, 94, 94, 94, 94, 94]
    assert all(x["pci"] == "0000:19:00" and x["gpu_instance"] is None for x in p["xid"])
    first, second, third, fourth = p["xid"][:4]
    assert first["message"] == ("pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been "
                                "detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, "
                                "subpartition 1.")
    assert first["line"] == text.splitlines()[10]
    assert second["message"] == ("pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000012bac1c3e0) marked "
                                 "for remapping, reset gpu to activate.")
    assert third["message"] == "pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"
    assert fourth["message"] == "pid=1248209, name=python3.10, Ch 00000008"
    assert p["xid"][-1]["message"] == "pid=1248209, name=python3.10, Ch 0000000f"
    assert (p["sxid"], p["pcie_limited"], p["lines"], p["from_boot"]) == ([], [], 41, False)


@pytest.mark.parametrize(("tool", "key", "lines"), [
    ("dmesg", "kmsg__FAIL-nvidia-peermem-invalid-context", 8),
    ("dmesg", "syslog__FAIL-ib6-link-flap-6x", 14),
])
def test_noise_only_logs(tool: str, key: str, lines: int) -> None:
    assert kernel_log.parse(pub(tool, key)) == {"xid": [], "sxid": [], "gpu_lost": [], "pcie_limited": [],
                                                "lines": lines, "from_boot": False}


def test_h200x2_nvrm_lines_have_no_event() -> None:
    assert kernel_log.parse(probe_quick()["raw"]["kernel_log"]) == {
        "xid": [], "sxid": [], "gpu_lost": [], "pcie_limited": [], "lines": 4, "from_boot": False}


def test_fabric_manager_log_sxid() -> None:
    text = pub("fabricmanager", "multicast-teams-plus-FAIL-nvswitch-nonfatal-SXid12028")
    p = kernel_log.parse(text)
    assert p["sxid"] == [{"sxid": 12028, "pci": "00000000:86:00.0", "message": "non-fatal (fabric manager)",
                          "line": next(ln for ln in text.splitlines() if "NVSwitch non-fatal" in ln)}]
    assert p["xid"] == [] and p["pcie_limited"] == []
    assert p["lines"] == len([ln for ln in text.splitlines() if ln.strip()])
    assert p["lines"] == 77 and p["from_boot"] is False


def test_fabric_manager_fatal_and_case() -> None:
    line = ("[Feb 27 2025 15:10:02] [ERROR] [tid 12727] Detected NVSwitch FATAL error 24007 on fid 0 on NVSwitch "
            "PCI Bus ID 00000000:8A:00.0 physical id 3 port 12")
    assert kernel_log.parse(line)["sxid"] == [{"sxid": 24007, "pci": "00000000:8a:00.0",
                                               "message": "FATAL (fabric manager)", "line": line}]


def test_healthy_non_nic_limited_line() -> None:
    text = pub("dmesg", "HEALTHY-non-NIC-pci-limited-x1")
    assert kernel_log.parse(text) == {
        "xid": [], "sxid": [], "gpu_lost": [],
        "pcie_limited": [{"driver": "pci", "pci": "0000:02:00.0", "limited_by": "5.0 GT/s PCIe x1",
                          "at": "0000:00:0c.0", "gbps": 4.0, "capable_gbps": 8.0, "capable_of": "5.0 GT/s PCIe x2",
                          "line": text.splitlines()[0]}],
        "lines": 1, "from_boot": False}


def test_uppercase_bus_ids_are_lowered() -> None:
    xid_line = "NVRM: Xid (PCI:0000:9B:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    sxid_line = "nvidia-nvswitch2: SXid (PCI:0000:8A:00.0): 12028, Non-fatal, Link 61"
    p = kernel_log.parse(f"{xid_line}\n{sxid_line}")
    assert [(x["xid"], x["pci"]) for x in p["xid"]] == [(79, "0000:9b:00")]
    assert [(s["sxid"], s["pci"], s["message"]) for s in p["sxid"]] == [(12028, "0000:8a:00.0", "Non-fatal, Link 61")]


def test_message_and_line_are_cut() -> None:
    head = "[2397166.983093] NVRM: Xid (PCI:0000:0f:00): 94, "
    msg = "pid=2503421, name=python3, Ch 00000008 " + "x" * 400
    (x,) = kernel_log.parse(head + msg)["xid"]
    assert x["message"] == msg[:240] and len(x["message"]) == 240
    assert x["line"] == (head + msg)[:400] and len(x["line"]) == 400
    shead = "[186965.348898] nvidia-nvswitch2: SXid (PCI:0000:85:00.0): 12028, "
    (s,) = kernel_log.parse(shead + msg)["sxid"]
    assert s["message"] == msg[:240] and s["line"] == (shead + msg)[:400]
    fm = ("[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch "
          "pci bus id 00000000:86:00.0 physical id 3 port 61 " + "y" * 400)
    (f,) = kernel_log.parse(fm)["sxid"]
    assert f["line"] == fm[:400] and len(f["line"]) == 400
    lim = ("[   18.617069] mlx5_core 0000:9c:00.0: 252.056 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe "
           "x8 link at 0000:97:01.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link) " + "z" * 400)
    (li,) = kernel_log.parse(lim)["pcie_limited"]
    assert li["line"] == lim[:400] and len(li["line"]) == 400


def test_blank_lines_are_not_counted() -> None:
    text = pub("dmesg", "FAIL-xid94-xid64-sxid12028-pcie-limited")
    assert kernel_log.parse("\n   \n" + text.replace("\n", "\n\n\t\n"))["lines"] == 4
    assert kernel_log.parse("") == {"xid": [], "sxid": [], "gpu_lost": [], "pcie_limited": [], "lines": 0,
                                    "from_boot": False}


@pytest.mark.parametrize("line", [
    "NVRM: Xid (PCI:0000:0f:00): 94",  # no comma after the number
    "NVRM: Xid (PCI:0000:0f:00) 94, pid=1",  # no colon after the parenthesis
    "NVRM: Xid PCI:0000:0f:00: 94, pid=1",
    "NVRM: Xid (PCI:0000:0f:00 GPU-X:05): 94, pid=1",  # not a MIG tag
    "NVRM: Xid (PCI:): 94, pid=1",
    "SXid (PCI:0000:85:00.0) 12028, Non-fatal",
    "detected NVSwitch warning error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0",
    "mlx5_core 0000:9c:00.0: 252.056 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe link at 0000:97:01.0",
])
def test_near_misses_are_not_events(line: str) -> None:
    p = kernel_log.parse(line)
    assert (p["xid"], p["sxid"], p["pcie_limited"], p["lines"]) == ([], [], [], 1)


def test_xid_wins_over_the_other_forms_on_one_line() -> None:
    line = ("NVRM: Xid (PCI:0000:0f:00): 94, after SXid (PCI:0000:85:00.0): 12028, and limited by 32.0 GT/s PCIe x8 "
            "link at 0000:97:01.0")
    p = kernel_log.parse(line)
    assert [x["xid"] for x in p["xid"]] == [94] and p["sxid"] == [] and p["pcie_limited"] == []


def test_sxid_wins_over_fabric_manager_and_limited() -> None:
    line = ("SXid (PCI:0000:85:00.0): 12028, detected NVSwitch fatal error 1 on pci bus id 0000:86:00.0 "
            "mlx5_core 0000:9c:00.0: x available PCIe bandwidth, limited by 32.0 GT/s PCIe x8 link at 0000:97:01.0")
    p = kernel_log.parse(line)
    assert [(s["sxid"], s["pci"]) for s in p["sxid"]] == [(12028, "0000:85:00.0")] and p["pcie_limited"] == []


@pytest.mark.parametrize(("before", "boot", "from_boot"), [
    (0, BOOT, True), (0, CMDLINE, True), (3999, BOOT, True), (4000, BOOT, False), (4000, CMDLINE, False),
    (0, "[    0.000000] Linux version unknown", False), (0, "Command line:BOOT_IMAGE=x", False),
    (0, "[    1.0] NotLinux version 6.8.0", False),
])
def test_from_boot_within_the_first_4000_lines(before: int, boot: str, from_boot: bool) -> None:
    filler = "[    0.000001] x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'\n" * before
    xid = "NVRM: Xid (PCI:0000:0f:00): 94, pid=2503421, name=python3, Ch 00000008"
    p: dict[str, Any] = kernel_log.parse(filler + boot + "\n" + xid)
    assert p["from_boot"] is from_boot
    assert p["lines"] == before + 2 and [x["xid"] for x in p["xid"]] == [94]


# ---- a GPU lost or not initialised with no Xid line (NVIDIA/NVSentinel#155, leptonai/gpud#1209) -----------------

LOST = [
    ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
     "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
     "               NVRM: fallen off the bus and is not responding to commands.\n"
     "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).", "0000:b3:00",
     "fallen off the bus|failed to initialise"),
    ("[12.5] NVRM: GPU at PCI:0000:44:00: GPU has fallen off the bus.", "0000:44:00", "fallen off the bus"),
    ("Dec  2 11:49:53 worker4 kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
     "0000:0a:00", "failed to initialise (RmInitAdapter)"),
    ("[  903.611884] NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0", "0000:98:00",
     "failed to initialise (RmInitAdapter)"),
    ("[91063.874832] (EE) NVIDIA(GPU-0): Failed to initialize the NVIDIA GPU at PCI:1:0:0.  Please", "0000:01:00",
     "failed to initialise"),
]


@pytest.mark.parametrize(("text", "pci", "what"), LOST)
def test_gpu_lost_without_an_xid_line(text: str, pci: str, what: str) -> None:
    p = kernel_log.parse(text)
    assert [(e["pci"], e["what"]) for e in p["gpu_lost"]] == [(pci, w) for w in what.split("|")]
    assert p["xid"] == []


def test_xid_79_line_is_an_xid_not_a_lost_record() -> None:
    p = kernel_log.parse("NVRM: Xid (PCI:0000:44:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    assert [x["xid"] for x in p["xid"]] == [79] and p["gpu_lost"] == []


def test_wrapped_notice_takes_the_address_of_its_own_opener_only() -> None:
    text = ("[1.0] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
            "[2.0] mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE\n"
            "[3.0] NVRM: fallen off the bus and is not responding to commands.")
    assert [e["pci"] for e in kernel_log.parse(text)["gpu_lost"]] == ["0000:0a:00", None]


@pytest.mark.parametrize(("line", "limited", "capable"), [
    ("[    0.349668] pci 0001:08:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at 0001:00:00.0 "
     "(capable of 126.016 Gb/s with 8 GT/s x16 link)", "8 GT/s x8", "8 GT/s x16"),
    ("[    1.011954] nfp 0001:08:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8 GT/s x4 link at 0001:00:00.0 "
     "(capable of 63.008 \tGb/s with 8 GT/s x8 link)", "8 GT/s x4", "8 GT/s x8"),
    ("Feb 14 05:03:41 gpu-1 kernel: pci 0001:08:00.0: 7.876 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe "
     "x1 link at 0001:00:00.0 (capable of 15.752 Gb/s with 8.0 GT/s PCIe x2 link)", "8.0 GT/s PCIe x1",
     "8.0 GT/s PCIe x2"),
])
def test_limited_notice_every_form(line: str, limited: str, capable: str) -> None:
    (x,) = kernel_log.parse(line)["pcie_limited"]
    assert (x["pci"], x["limited_by"], x["at"], x["capable_of"]) == ("0001:08:00.0", limited, "0001:00:00.0", capable)
