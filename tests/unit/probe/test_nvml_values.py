"""NVML collector value by value against a pynvml stand-in (tests/unit/probe/fake_pynvml.py): the driver, PCI
identity, PCIe link (current/max, the GPU's own max where the binding has it), NVLink state and error counters per
link, bytes answers decoded, and what an NVML error or a missing binding yields."""

from __future__ import annotations

import pytest

from gridready.probe import nvml
from tests.unit.probe.fake_pynvml import FakeNvml, Gpu, NVMLError_LibraryNotFound, PciInfo

H100 = 0x233010DE  # the PCI device/vendor id of an H100 SXM5 (NVML: pciDeviceId = device << 16 | vendor)


def _fake(monkeypatch: pytest.MonkeyPatch, gpus: list[Gpu], **kw: object) -> FakeNvml:
    fake = FakeNvml(gpus, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(nvml, "pynvml", fake)
    fake.nvmlInit()
    fake.calls.clear()
    return fake


def test_without_pynvml_nothing_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "pynvml", None)
    assert nvml.available() is False


def test_available_initialises_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([Gpu()])
    monkeypatch.setattr(nvml, "pynvml", fake)
    assert nvml.available() is True
    assert fake.calls == [("nvmlInit", ())] and fake.initialized


def test_a_failed_init_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([Gpu()], init_error=NVMLError_LibraryNotFound())  # no libnvidia-ml.so.1 on the host
    monkeypatch.setattr(nvml, "pynvml", fake)
    assert nvml.available() is False


def test_pcie_of_a_gpu_under_load(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [Gpu(gen=(5, 5, 5), width=(16, 16)), Gpu(gen=(4, 5, 5), width=(8, 16))])
    assert nvml.pcie(1) == {"gen_current": 4, "gen_max": 5, "gen_device_max": 5, "width_current": 8,
                            "width_max": 16, "source": "nvml"}
    assert nvml.pcie(0) == {"gen_current": 5, "gen_max": 5, "gen_device_max": 5, "width_current": 16,
                            "width_max": 16, "source": "nvml"}


def test_pcie_keeps_each_reading_in_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # a GPU of gen 5 in a gen 4 slot reading gen 1 at idle: every figure differs from the others
    _fake(monkeypatch, [Gpu(gen=(1, 4, 5), width=(4, 16))])
    assert nvml.pcie(0) == {"gen_current": 1, "gen_max": 4, "gen_device_max": 5, "width_current": 4,
                            "width_max": 16, "source": "nvml"}


def test_pcie_without_the_gpu_max_call_of_older_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [Gpu(gen=(3, 4, 5))], gpu_max_gen=False)
    assert nvml.pcie(0) == {"gen_current": 3, "gen_max": 4, "gen_device_max": None, "width_current": 16,
                            "width_max": 16, "source": "nvml"}


def test_pcie_reading_not_supported_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [Gpu(gen=(None, 5, None), width=(None, 16))])
    assert nvml.pcie(0) == {"gen_current": None, "gen_max": 5, "gen_device_max": None, "width_current": None,
                            "width_max": 16, "source": "nvml"}


def _h100(bus: object, links: dict[int, int], counters: dict[tuple[int, int], int] | None = None) -> Gpu:
    return Gpu(name="NVIDIA H100 80GB HBM3", pci=PciInfo(busId=bus, pciDeviceId=H100), links=links,
               counters=counters or {})


def test_collect_two_gpus_with_links_and_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    g0 = _h100("00000000:18:00.0", {0: 1, 1: 0}, {(0, 0): 7, (0, 1): 2, (0, 2): 11, (0, 3): 5, (1, 3): 1})
    g1 = _h100(b"00000000:2A:00.0", {17: 1}, {(17, 2): 3})
    g1.name, g1.gen, g1.width = b"NVIDIA H100 80GB HBM3", (4, 5, 5), (16, 16)
    fake = _fake(monkeypatch, [g0, g1], driver=b"560.35.03")
    doc = nvml.collect()
    assert doc == {"driver_version": "560.35.03", "gpus": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:18:00.0", "device_id": "0x233010DE",
         "pcie": {"gen_current": 5, "gen_max": 5, "gen_device_max": 5, "width_current": 16, "width_max": 16,
                  "source": "nvml"},
         "nvlink": {"links": {
             "0": {"active": True, "errors": {"replay": 7, "recovery": 2, "crc_flit": 11, "crc_data": 5}},
             "1": {"active": False, "errors": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 1}}}}},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:2A:00.0", "device_id": "0x233010DE",
         "pcie": {"gen_current": 4, "gen_max": 5, "gen_device_max": 5, "width_current": 16, "width_max": 16,
                  "source": "nvml"},
         "nvlink": {"links": {
             "17": {"active": True, "errors": {"replay": 0, "recovery": 0, "crc_flit": 3, "crc_data": 0}}}}}]}
    # every link NVML knows of is asked, on the GPU's own handle
    asked = [args for name, args in fake.calls if name == "nvmlDeviceGetNvLinkState"]
    assert asked == [(0, link) for link in range(18)] + [(1, link) for link in range(18)]


def test_the_link_count_is_the_bindings_own(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(monkeypatch, [_h100("0000:18:00.0", {3: 1, 4: 1})], max_links=4)
    links = nvml.collect()["gpus"][0]["nvlink"]["links"]
    assert list(links) == ["3"]  # link 4 is past NVML_NVLINK_MAX_LINKS = 4: not asked
    assert [a[1] for n, a in fake.calls if n == "nvmlDeviceGetNvLinkState"] == [0, 1, 2, 3]


def test_a_binding_without_the_link_count_asks_18_links(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(monkeypatch, [_h100("0000:18:00.0", {17: 1, 18: 1})], max_links=None)
    assert list(nvml.collect()["gpus"][0]["nvlink"]["links"]) == ["17"]
    assert [a[1] for n, a in fake.calls if n == "nvmlDeviceGetNvLinkState"] == list(range(18))


def test_counter_numbers_are_nvmls(monkeypatch: pytest.MonkeyPatch) -> None:
    counters = {(2, c): 100 + c for c in range(4)}
    fake = _fake(monkeypatch, [_h100("0000:18:00.0", {2: 1}, counters)])
    assert nvml.collect()["gpus"][0]["nvlink"]["links"]["2"]["errors"] == {
        "replay": 100, "recovery": 101, "crc_flit": 102, "crc_data": 103}
    assert [a for n, a in fake.calls if n == "nvmlDeviceGetNvLinkErrorCounter"] == [(0, 2, c) for c in range(4)]


def test_a_gpu_without_pci_info_or_name(monkeypatch: pytest.MonkeyPatch) -> None:
    g = Gpu(name=None, pci=None, links={})
    _fake(monkeypatch, [g], driver=None)
    doc = nvml.collect()
    assert doc["driver_version"] is None
    assert doc["gpus"] == [{"index": 0, "name": None, "bus_id": None, "device_id": None,
                            "pcie": {"gen_current": 5, "gen_max": 5, "gen_device_max": 5, "width_current": 16,
                                     "width_max": 16, "source": "nvml"},
                            "nvlink": {"links": {}}}]


def test_device_id_is_eight_upper_hex_digits(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [Gpu(pci=PciInfo(busId="00000000:01:00.0", pciDeviceId=0x20B010DE)),
                        Gpu(pci=PciInfo(busId="00000000:02:00.0", pciDeviceId=0xABC))])
    assert [g["device_id"] for g in nvml.collect()["gpus"]] == ["0x20B010DE", "0x00000ABC"]


def test_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [])
    assert nvml.collect() == {"driver_version": "560.35.03", "gpus": []}
