"""lspci.parse and acs_redirects read value by value on the real `lspci -vvv` of an HGX H100 (tests/fixtures/public/
lspci, leptonai/gpud): every endpoint's link, every bridge's bus range, ACS control and endpoints below; and what
edited copies of those blocks (ACS redirection on, no link capability, lspci run without root) yield."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.probe import lspci
from tests.unit.certify.fixtures_io import pub

EXCERPT = "EXCERPT-gpu-cx7-and-benign-downgraded-switchport"
FULL = "HGX-H100-8gpu-CX7-PEX890xx__gpud.txt"
SWITCH = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])"
ACS_OFF = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
ALL_OFF = {"SrcValid": False, "TransBlk": False, "ReqRedir": False, "CmpltRedir": False, "UpstreamFwd": False,
           "EgressCtrl": False, "DirectTrans": False}
GPU_HEAD = "19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)"


def _ep(bdf: str, kind: str, desc: str, gen: tuple[int | None, int | None],
        width: tuple[int | None, int | None]) -> dict[str, Any]:
    return {"bdf": bdf, "kind": kind, "desc": desc, "gen_current": gen[0], "gen_max": gen[1],
            "width_current": width[0], "width_max": width[1], "source": "lspci"}


CX7 = "Mellanox Technologies MT2910 Family [ConnectX-7]"
CX6 = "Mellanox Technologies MT2892 Family [ConnectX-6 Dx]"
H100 = "NVIDIA Corporation Device 2330 (rev a1)"


def test_excerpt_every_value() -> None:
    p = lspci.parse(pub("lspci", EXCERPT))
    assert p["endpoints"] == [
        _ep("0000:19:00.0", "gpu", H100, (5, 5), (16, 16)),
        _ep("0000:1a:00.0", "nic", CX7, (5, 5), (16, 16)),
        _ep("0000:1b:00.0", "nic", CX6, (4, 4), (16, 16)),
    ]
    assert p["bridges"] == [
        {"bdf": "0000:16:00.0", "desc": SWITCH, "downgraded": False, "acs_ctl": None, "buses": [0x17, 0x1C],
         "endpoints_below": ["0000:19:00.0", "0000:1a:00.0", "0000:1b:00.0"]},
        {"bdf": "0000:17:03.0", "desc": SWITCH, "downgraded": True, "acs_ctl": ALL_OFF, "buses": [0x1B, 0x1B],
         "endpoints_below": ["0000:1b:00.0"]},
    ]
    assert lspci.acs_redirects(p) == {"bridges_checked": 1, "redirect_enabled": [], "above": {}}


def test_full_hgx_endpoints() -> None:
    p = lspci.parse(pub("lspci", FULL))
    bcm = "Broadcom Inc. and subsidiaries NetXtreme BCM5720 Gigabit Ethernet PCIe"
    expected = [_ep("0000:01:00.0", "nic", bcm, (2, 2), (1, 2)), _ep("0000:01:00.1", "nic", bcm, (2, 2), (1, 2))]
    for gpu, nics in (("19", ["1a", "1b:00.0", "1b:00.1"]), ("3b", ["3c"]), ("4c", ["4d"]), ("5d", ["5e"]),
                      ("9b", ["9c", "9d:00.0", "9d:00.1"]), ("bb", ["bc"]), ("cb", ["cc"]), ("db", ["dc"])):
        expected.append(_ep(f"0000:{gpu}:00.0", "gpu", H100, (5, 5), (16, 16)))
        for nic in nics:
            bdf = f"0000:{nic}" if "." in nic else f"0000:{nic}:00.0"
            cx6 = nic.startswith(("1b", "9d"))
            expected.append(_ep(bdf, "nic", CX6 if cx6 else CX7, (4, 4) if cx6 else (5, 5), (16, 16)))
    assert p["endpoints"] == expected  # the Matrox VGA (03:00.0) and the 4 NVSwitches are no endpoints


def test_full_hgx_bridges() -> None:
    p = lspci.parse(pub("lspci", FULL))
    br = {b["bdf"]: b for b in p["bridges"]}
    assert len(p["bridges"]) == 67  # 59 PCI bridges, 4 NVSwitches, 3 host and 1 ISA bridge
    assert [b["bdf"] for b in p["bridges"]][:8] == ["0000:00:0c.0", "0000:00:0e.0", "0000:00:14.4", "0000:00:1f.0",
                                                    "0000:02:00.0", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]
    assert br["0000:00:0c.0"] == {
        "bdf": "0000:00:0c.0", "desc": "Intel Corporation Device 1bbc (rev 11) (prog-if 00 [Normal decode])",
        "downgraded": True, "acs_ctl": {**ALL_OFF, "SrcValid": True}, "buses": [1, 1],
        "endpoints_below": ["0000:01:00.0", "0000:01:00.1"]}
    assert br["0000:00:1f.0"] == {"bdf": "0000:00:1f.0", "desc": "Intel Corporation Device 1b81 (rev 11)",
                                  "downgraded": False, "acs_ctl": None, "buses": None, "endpoints_below": []}
    assert br["0000:83:00.0"] == {"bdf": "0000:83:00.0", "desc": "NVIDIA Corporation Device 22a3 (rev a1)",
                                  "downgraded": False, "acs_ctl": None, "buses": None, "endpoints_below": []}
    assert (br["0000:15:01.0"]["buses"], br["0000:15:01.0"]["endpoints_below"]) == (
        [0x16, 0x1C], ["0000:19:00.0", "0000:1a:00.0", "0000:1b:00.0", "0000:1b:00.1"])
    assert (br["0000:17:01.0"]["buses"], br["0000:17:01.0"]["endpoints_below"]) == ([0x19, 0x19], ["0000:19:00.0"])
    assert (br["0000:17:1f.0"]["buses"], br["0000:17:1f.0"]["endpoints_below"]) == ([0x1C, 0x1C], [])
    assert (br["0000:c9:02.0"]["buses"], br["0000:c9:02.0"]["endpoints_below"]) == ([0xCC, 0xCC], ["0000:cc:00.0"])
    assert (br["0000:99:03.0"]["downgraded"], br["0000:99:03.0"]["endpoints_below"]) == (
        True, ["0000:9d:00.0", "0000:9d:00.1"])
    assert br["0000:82:00.0"]["acs_ctl"] == {**ALL_OFF, "SrcValid": True, "ReqRedir": True, "CmpltRedir": True,
                                             "UpstreamFwd": True}
    assert (br["0000:82:00.0"]["buses"], br["0000:82:00.0"]["endpoints_below"]) == ([0x83, 0x83], [])
    assert sorted(b for b, v in br.items() if v["downgraded"]) == [
        "0000:00:0c.0", "0000:00:0e.0", "0000:17:00.0", "0000:17:03.0", "0000:39:00.0", "0000:4a:00.0",
        "0000:5b:00.0", "0000:80:01.0", "0000:99:00.0", "0000:99:03.0", "0000:b9:00.0", "0000:c9:00.0",
        "0000:d9:00.0"]


def test_full_hgx_acs_redirect_only_above_nvswitches() -> None:
    """ReqRedir+/CmpltRedir+ on the PMC-Sierra ports above the NVSwitches (no GPU or NIC below): not reported."""
    assert lspci.acs_redirects(lspci.parse(pub("lspci", FULL))) == {"bridges_checked": 27, "redirect_enabled": [],
                                                                    "above": {}}


@pytest.mark.parametrize(("flags", "on"), [
    ("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-", True),
    ("SrcValid+ TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-", True),
    ("SrcValid+ TransBlk- ReqRedir- CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-", True),
    ("SrcValid+ TransBlk+ ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl+ DirectTrans+", False),
])
def test_acs_redirect_on_the_port_above_a_nic(flags: str, on: bool) -> None:
    """The excerpt with the switch port 17:03.0 (above the CX-6 Dx 1b:00.0) given the PMC-Sierra ports' ACS."""
    text = pub("lspci", EXCERPT).replace(ACS_OFF, f"ACSCtl:\t{flags}", 1)
    p = lspci.parse(text)
    port = next(b for b in p["bridges"] if b["bdf"] == "0000:17:03.0")
    assert port["acs_ctl"] == {f[:-1]: f.endswith("+") for f in flags.split()}
    assert lspci.acs_redirects(p) == {"bridges_checked": 1,
                                      "redirect_enabled": ["0000:17:03.0"] if on else [],
                                      "above": {"0000:17:03.0": ["0000:1b:00.0"]} if on else {}}


@pytest.mark.parametrize(("line", "acs"), [
    ("ACSCtl:\tSrcValid+ ReqRedir- CmpltRedir+", {"SrcValid": True, "ReqRedir": False, "CmpltRedir": True}),
    ("ACSCtl:\tSrcValid+ TransBlkX ReqRedir? CmpltRedir-", {"SrcValid": True, "CmpltRedir": False}),
    ("ACSCtl:", {}),
])
def test_acs_flags_only_plus_or_minus(line: str, acs: dict[str, bool]) -> None:
    text = pub("lspci", EXCERPT).replace(ACS_OFF, line, 1)
    port = next(b for b in lspci.parse(text)["bridges"] if b["bdf"] == "0000:17:03.0")
    assert port["acs_ctl"] == acs


def test_acs_redirects_needs_endpoints_and_acs() -> None:
    parsed = {"bridges": [
        {"bdf": "0000:82:00.0", "acs_ctl": {"ReqRedir": True}, "endpoints_below": []},
        {"bdf": "0000:16:00.0", "acs_ctl": None, "endpoints_below": ["0000:19:00.0"]},
        {"bdf": "0000:17:01.0", "acs_ctl": {}, "endpoints_below": ["0000:19:00.0"]},
        {"bdf": "0000:17:02.0", "acs_ctl": {"SrcValid": True}, "endpoints_below": ["0000:1a:00.0"]},
        {"bdf": "0000:17:03.0", "acs_ctl": {"CmpltRedir": True}, "endpoints_below": ["0000:1b:00.0"]},
    ]}
    assert lspci.acs_redirects(parsed) == {"bridges_checked": 2, "redirect_enabled": ["0000:17:03.0"],
                                           "above": {"0000:17:03.0": ["0000:1b:00.0"]}}


@pytest.mark.parametrize(("cls", "desc", "kind"), [
    ("3D controller", H100, "gpu"),
    ("VGA compatible controller", "NVIDIA Corporation GA102GL [RTX A6000] (rev a1)", "gpu"),
    ("VGA compatible controller", "Matrox Electronics Systems Ltd. Integrated Matrox G200eW3 Graphics Controller",
     None),
    ("3D controller", "Advanced Micro Devices, Inc. [AMD/ATI] Aldebaran/MI200 [Instinct MI250X]", None),
    ("Ethernet controller", CX7, "nic"),
    ("Infiniband controller", CX7, "nic"),
    ("Network controller", "Mellanox Technologies MT28908 Family [ConnectX-6]", "nic"),
    ("PCI bridge", SWITCH, "bridge"),
    ("Bridge", "NVIDIA Corporation Device 22a3 (rev a1)", "bridge"),
    ("Host bridge", "Intel Corporation Device 0998", "bridge"),
    ("ISA bridge", "Intel Corporation Device 1b81 (rev 11)", "bridge"),
    ("System peripheral", "Intel Corporation Device 324d", None),
    ("Audio device", "NVIDIA Corporation Device 22ba (rev a1)", None),
])
def test_kind_of_a_class(cls: str, desc: str, kind: str | None) -> None:
    assert lspci._kind(cls, desc) == kind


def _gpu_block(*lines: str) -> str:
    return "\n".join([GPU_HEAD, "\tSubsystem: NVIDIA Corporation Device 16c1", *(f"\t\t{ln}" for ln in lines)]) + "\n"


def test_without_root_no_link_is_read() -> None:
    """`lspci -vvv` as a user prints `Capabilities: <access denied>`: the endpoint is listed with no link."""
    text = GPU_HEAD + "\n\tSubsystem: NVIDIA Corporation Device 16c1\n\tCapabilities: <access denied>\n"
    assert lspci.parse(text) == {"endpoints": [_ep("0000:19:00.0", "gpu", H100, (None, None), (None, None))],
                                 "bridges": []}


def test_link_status_without_capability() -> None:
    p = lspci.parse(_gpu_block("LnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)"))
    assert p["endpoints"] == [_ep("0000:19:00.0", "gpu", H100, (4, None), (8, None))]


def test_link_capability_without_status() -> None:
    p = lspci.parse(_gpu_block("LnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <4us"))
    assert p["endpoints"] == [_ep("0000:19:00.0", "gpu", H100, (None, 5), (None, 16))]


def test_first_lnkcap_and_lnksta_win() -> None:
    p = lspci.parse(_gpu_block(
        "LnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1",
        "LnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)",
        "LnkCap:\tPort #0, Speed 8GT/s, Width x4, ASPM L1",
        "LnkSta:\tSpeed 2.5GT/s (downgraded), Width x1 (downgraded)",
    ))
    assert p["endpoints"] == [_ep("0000:19:00.0", "gpu", H100, (4, 5), (8, 16))]


def test_acs_of_a_bridge_without_link_lines() -> None:
    text = ("00:1c.0 PCI bridge: Intel Corporation Device 1bbc (rev 11) (prog-if 00 [Normal decode])\n"
            "\tBus: primary=00, secondary=19, subordinate=19, sec-latency=0\n"
            "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
            + _gpu_block("LnkCap:\tPort #0, Speed 32GT/s, Width x16", "LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)"))
    p = lspci.parse(text)
    (br,) = p["bridges"]
    assert br["acs_ctl"] == {**ALL_OFF, "SrcValid": True, "ReqRedir": True, "CmpltRedir": True, "UpstreamFwd": True}
    assert (br["buses"], br["endpoints_below"], br["downgraded"]) == ([0x19, 0x19], ["0000:19:00.0"], False)
    assert lspci.acs_redirects(p) == {"bridges_checked": 1, "redirect_enabled": ["0000:00:1c.0"],
                                      "above": {"0000:00:1c.0": ["0000:19:00.0"]}}


def test_domain_and_uppercase_bdf() -> None:
    text = ("0000:17:1F.0 PCI bridge: " + SWITCH + "\n\tBus: primary=17, secondary=1c, subordinate=1c\n"
            "0000:1C:00.0 3D controller: " + H100 + "\n")
    p = lspci.parse(text)
    assert [(b["bdf"], b["buses"], b["endpoints_below"]) for b in p["bridges"]] == [
        ("0000:17:1f.0", [0x1C, 0x1C], ["0000:1c:00.0"])]
    assert [e["bdf"] for e in p["endpoints"]] == ["0000:1c:00.0"]


def test_a_bridge_covers_buses_of_its_own_pci_domain_only() -> None:
    """Hosts with several PCI segments (one per socket or per switch on large GPU servers) reuse bus numbers in
    each domain: the port 0001:17:1f.0 with ACS redirection sits above 0001:1c:00.0, never above 0000:1c:00.0."""
    text = ("0000:1c:00.0 3D controller: " + H100 + "\n"
            "0001:17:1f.0 PCI bridge: " + SWITCH + "\n\tBus: primary=17, secondary=1c, subordinate=1c\n"
            "\tACSCtl:\tSrcValid+ ReqRedir+ CmpltRedir+\n"
            "0001:1c:00.0 Infiniband controller: " + CX7 + "\n")
    p = lspci.parse(text)
    assert [(b["bdf"], b["endpoints_below"]) for b in p["bridges"]] == [("0001:17:1f.0", ["0001:1c:00.0"])]
    assert lspci.acs_redirects(p)["above"] == {"0001:17:1f.0": ["0001:1c:00.0"]}


def test_lines_before_the_first_device_are_ignored() -> None:
    text = "pcilib: sysfs_read_vpd: read failed: Input/output error\n" + pub("lspci", EXCERPT)
    assert lspci.parse(text) == lspci.parse(pub("lspci", EXCERPT))
    assert lspci.parse("") == {"endpoints": [], "bridges": []}
    assert lspci.parse("not lspci output\n\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)\n") == {
        "endpoints": [], "bridges": []}
