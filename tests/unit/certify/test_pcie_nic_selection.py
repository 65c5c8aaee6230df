"""pcie_link's choices the other pcie tests leave open: which NICs count as fabric NICs (by vendor id or by any one
of the three names lspci prints), that a virtio NIC or a management LOM listed first never hides the ConnectX after
it, a Gen1-only or x1-only endpoint with an unreadable current link, and that GPU rows from nvidia-smi win over the
idle lspci readings of the same GPUs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import pcie
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_gates_public import exp


@pytest.mark.parametrize(("endpoint", "fabric"), [
    ({"vendor": "0x15b3"}, True),  # sysfs rows: the vendor id alone
    ({"desc": "Mellanox Technologies Device 1021"}, True),  # lspci, a device its pci.ids does not know yet
    ({"desc": "Nvidia Corporation MT2910 Family [ConnectX-7]"}, True),  # newer pci.ids name the vendor NVIDIA
    ({"desc": "Nvidia Corporation BlueField-3 integrated ConnectX-7 network controller"}, True),
    ({"desc": "Nvidia Corporation BlueField-3 SoC"}, True),
    ({"desc": "Intel Corporation I350 Gigabit Network Connection", "vendor": "0x8086"}, False),
    ({"desc": "mellanox connectx bluefield"}, False),  # lspci prints the names capitalised; nothing else matches
    ({}, False),
])
def test_fabric_nic_by_vendor_or_any_of_its_names(endpoint: dict[str, Any], fabric: bool) -> None:
    assert pcie._fabric_nic(endpoint) is fabric


def _nic(bdf: str, **kw: Any) -> dict[str, Any]:
    return {"bdf": bdf, "kind": "nic", "vendor": "0x15b3", "desc": "", "source": "sysfs", "gen_current": 5,
            "gen_max": 5, "width_current": 16, "width_max": 16, **kw}


def _nics(endpoints: list[dict[str, Any]]) -> list[tuple[str | None, S, str]]:
    return [(r.hca, r.status, r.reason) for r in pcie.pcie_link({"system": {"pcie_endpoints": endpoints}},
                                                                 exp("h100", 1)) if r.hca]


def test_a_virtio_nic_listed_first_does_not_hide_the_connectx_after_it() -> None:
    virtio = _nic("0000:00:03.0", vendor="0x1af4", gen_max=None, width_max=None, gen_current=None,
                  width_current=None)
    assert _nics([virtio, _nic("0000:1a:00.0")]) == [("0000:1a:00.0", S.PASS, "NIC 0000:1a:00.0: Gen5 x16")]


def test_a_management_lom_listed_first_does_not_hide_the_connectx_after_it() -> None:
    lom = _nic("0000:04:00.0", vendor="0x14e4", desc="Broadcom Inc. NetXtreme BCM5720", gen_max=2, width_max=2,
               gen_current=2, width_current=1)
    assert _nics([lom, _nic("0000:1a:00.0", width_current=8)]) == [
        ("0000:1a:00.0", S.FAIL, "NIC 0000:1a:00.0: link at Gen5 x8, capable of Gen5 x16")]


@pytest.mark.parametrize(("kw", "reason"), [
    ({"gen_max": 1, "gen_current": None}, "link at GenNone x16, capable of Gen1 x16"),
    ({"width_max": 1, "width_current": None}, "link at Gen5 xNone, capable of Gen5 x1"),
])
def test_an_unreadable_current_link_fails_even_at_the_lowest_capability(kw: dict[str, Any], reason: str) -> None:
    assert _nics([_nic("0000:1a:00.0", **kw)]) == [("0000:1a:00.0", S.FAIL, f"NIC 0000:1a:00.0: {reason}")]


def test_an_unreadable_maximum_width_fails_even_where_x1_is_wanted() -> None:
    base = exp("h200", 2, "passthrough")
    x1 = Expectations(node=base.node, sku=base.sku.model_copy(update={"pcie_width": 1}), gpus=2, spec=base.spec,
                      platform="passthrough")
    doc = copy.deepcopy(probe_quick())
    for part in (doc["nvidia_smi"]["q"]["gpus"][0]["pcie"], doc["nvml"]["gpus"][0]["pcie"],
                 doc["system"]["pcie_endpoints"][1]):
        part["width_max"] = None
    doc["nvidia_smi"]["query"][0]["pcie.link.width.max"] = None
    r = next(r for r in pcie.pcie_link(doc, x1) if r.gpu == 0)
    assert (r.status, r.reason) == (S.FAIL, "GPU 0 (0000:00:06.0): endpoint capable of only Gen5 xNone, expected "
                                            "Gen5 x1")


def test_gpu_rows_win_over_the_idle_lspci_readings_of_the_same_gpus() -> None:
    doc = copy.deepcopy(probe_quick())
    doc["system"]["lspci"] = {"endpoints": [
        {"bdf": g["pci.bus_id"][4:].lower(), "kind": "gpu", "desc": "NVIDIA Corporation GH100 [H200 SXM 141GB]",
         "gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16, "source": "lspci"}
        for g in doc["nvidia_smi"]["query"]]}
    res = [(r.gpu, r.status, r.reason) for r in pcie.pcie_link(doc, exp("h200", 2, "passthrough")) if r.hca is None]
    assert res == [(0, S.PASS, "GPU 0 (0000:00:06.0): Gen5 x16 under load"),
                   (1, S.PASS, "GPU 1 (0000:00:07.0): Gen5 x16 under load")]
