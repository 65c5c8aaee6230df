"""The gpu_inventory gate on the real 2x H200 probe document: the count and the PCI device id of every GPU (the
query's 8-digit 0xDDDDVVVV form and the plain 4-digit one), with the exact sentence an operator reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify.inventory import gpu_inventory
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_gates_public import exp

H200 = exp("h200", 2, "passthrough")


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def test_healthy_capture_passes() -> None:
    (r,) = gpu_inventory(_doc(), H200)
    assert (r.gate, r.status, r.reason) == ("gpu_inventory", S.PASS, "2 x H200-SXM-141GB (0x2335)")
    assert r.measured == {"count": 2, "device_ids": ["0x233510DE"]}
    assert r.expected.equals == {"count": 2, "device_id": "0x2335"} and r.expected.source == "spec + catalog"
    assert r.evidence == "raw.nvidia_smi_query"


@pytest.mark.parametrize("dev", ["0x2335", "0X233510DE", "0x233510de"])
def test_device_id_forms_of_the_right_sku_pass(dev: str) -> None:
    doc = _doc()
    doc["nvidia_smi"]["query"][1]["pci.device_id"] = dev
    (r,) = gpu_inventory(doc, H200)
    assert r.status is S.PASS, r.reason
    assert r.measured["device_ids"] == sorted({"0x233510DE", dev})


@pytest.mark.parametrize(("dev", "shown"), [("0x233010DE", "0x233010DE"), ("0x23351", "0x23351"),
                                            ("2335", "2335"), ("0x2335000010DE", "0x2335000010DE")])
def test_other_device_ids_fail_naming_the_gpu(dev: str, shown: str) -> None:
    doc = _doc()
    doc["nvidia_smi"]["query"][1]["pci.device_id"] = dev
    (r,) = gpu_inventory(doc, H200)
    assert r.status is S.FAIL
    assert r.reason == f"not H200-SXM-141GB (0x2335): GPU 1 (0000:00:07.0) is NVIDIA H200 device {shown}"
    assert r.measured == {"count": 2, "device_ids": sorted(["0x233510DE", shown])}


def test_every_wrong_gpu_is_listed() -> None:
    doc = _doc()
    for row in doc["nvidia_smi"]["query"]:
        row.update({"pci.device_id": "0x233010DE", "name": "NVIDIA H100 80GB HBM3"})
    (r,) = gpu_inventory(doc, H200)
    assert r.reason == ("not H200-SXM-141GB (0x2335): GPU 0 (0000:00:06.0) is NVIDIA H100 80GB HBM3 device "
                        "0x233010DE; GPU 1 (0000:00:07.0) is NVIDIA H100 80GB HBM3 device 0x233010DE")


def test_unknown_device_id_fails() -> None:
    doc = _doc()
    doc["nvidia_smi"]["query"][0]["pci.device_id"] = None
    doc["nvidia_smi"]["q"]["gpus"][0].pop("device_id", None)
    doc["nvml"]["gpus"][0]["device_id"] = None
    (r,) = gpu_inventory(doc, H200)
    assert r.status is S.FAIL and "GPU 0 (0000:00:06.0) is NVIDIA H200 device None" in r.reason
    assert r.measured["device_ids"] == ["0x233510DE", "None"]


@pytest.mark.parametrize(("gpus", "reason"), [(1, "2 GPUs found, the spec expects 1"),
                                              (8, "2 GPUs found, the spec expects 8")])
def test_count_other_than_the_spec_fails_before_the_sku(gpus: int, reason: str) -> None:
    doc = _doc()
    doc["nvidia_smi"]["query"][1]["pci.device_id"] = "0x233010DE"
    (r,) = gpu_inventory(doc, exp("h200", gpus, "passthrough"))
    assert r.status is S.FAIL and r.reason == reason
    assert r.expected.equals == {"count": gpus, "device_id": "0x2335"} and r.evidence == "raw.nvidia_smi_query"
    assert r.measured == {"count": 2, "device_ids": ["0x233010DE", "0x233510DE"]}


def test_no_gpus_is_an_error() -> None:
    (r,) = gpu_inventory({"nvidia_smi": {}}, exp("h200", 8))
    assert r.status is S.ERROR and r.reason == "no GPUs enumerated (nvidia-smi and NVML gave none)"
    assert r.measured == 0 and r.expected.equals == 8 and r.expected.source == "spec"
    assert r.evidence == "raw.nvidia_smi_query"
