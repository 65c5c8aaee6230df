"""`nvidia-smi -q` text read field by field: the real one-GPU H200 capture (tests/fixtures/h200x1) edited to show
faults, and the R410 V100 capture for the older key names (tests/fixtures/public/nvidia-smi)."""

from __future__ import annotations

import re
from pathlib import Path

from gridready.probe import nvsmi
from tests.unit.certify.fixtures_io import pub
from tests.unit.probe.nvsmi_faulty import FAULTY_GPU, REASONS_IDLE

TEXT = (Path(__file__).resolve().parents[2] / "fixtures" / "h200x1" / "nvidia-smi-q.txt").read_text()


def _set(text: str, key: str, value: str, after: str | None = None) -> str:
    """Set the value of the first `key : value` line (after the first line holding `after`, when given)."""
    start = text.index(after) if after else 0
    pat = re.compile(rf"^(\s*{re.escape(key)}\s*:) .*$", re.M)
    m = pat.search(text, start)
    assert m, key
    return text[:m.start()] + f"{m.group(1)} {value}" + text[m.end():]


def _faulty() -> str:
    t = TEXT
    for key, v in [("SRAM Correctable", "11"), ("SRAM Uncorrectable Parity", "1"), ("SRAM Uncorrectable SEC-DED", "2"),
                   ("DRAM Correctable", "13"), ("DRAM Uncorrectable", "14")]:
        t = _set(t, key, v, after="        Volatile")
    for key, v in [("SRAM Correctable", "21"), ("SRAM Uncorrectable Parity", "4"), ("SRAM Uncorrectable SEC-DED", "8"),
                   ("DRAM Correctable", "23"), ("DRAM Uncorrectable", "24"), ("SRAM Threshold Exceeded", "Yes")]:
        t = _set(t, key, v, after="        Aggregate")
    for key, v, after in [("Single Bit ECC", "5", "Retired Pages"), ("Double Bit ECC", "6", "Retired Pages"),
                          ("Pending Page Blacklist", "Yes", "Retired Pages"),
                          ("Correctable Error", "7", "Remapped Rows"), ("Uncorrectable Error", "9", "Remapped Rows"),
                          ("Pending", "Yes", "Remapped Rows"), ("Remapping Failure Occurred", "Yes", "Remapped Rows"),
                          ("Max", "5", "PCIe Generation"), ("Current", "3", "PCIe Generation"),
                          ("Device Max", "4", "PCIe Generation"), ("Max", "16x", "Link Width"),
                          ("Current", "8x", "Link Width"), ("Replays Since Reset", "17", None),
                          ("GPU Current Temp", "71 C", None), ("Memory Current Temp", "83 C", None),
                          ("Current Power Limit", "650.00 W", None), ("SW Power Cap", "Active", "Clocks Event Reasons"),
                          ("HW Thermal Slowdown", "Active", "Clocks Event Reasons"),
                          ("Persistence Mode", "Disabled", None), ("GPU Recovery Action", "GPU Reset", None),
                          ("Channel Repair Pending", "Yes", None), ("Unrepairable Memory", "Yes", None),
                          ("Current", "Disabled", "ECC Mode"),
                          ("SM", "1755 MHz", "Max Clocks"), ("Memory", "2619 MHz", "Max Clocks"),
                          ("State", "In Progress", "    Fabric"), ("Status", "Failure", "    Fabric")]:
        t = _set(t, key, v, after)
    return t


def test_q_text_every_gate_field_reads_its_own_line() -> None:
    q = nvsmi.parse_q(_faulty())
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("580.159.04", "13.0", 1)
    (g,) = q["gpus"]
    assert g == {**FAULTY_GPU, "power_draw_w": 134.4, "max_clocks_mhz": {"sm": 1755, "memory": 2619},
                 "fabric": {"state": "In Progress", "status": "Failure"}}


def test_q_text_r410_key_names() -> None:
    """Clocks Throttle Reasons, Power Readings / Power Limit / Power Draw and Retired Pages `Pending` of old drivers."""
    q = nvsmi.parse_q(pub("nvidia-smi", "V100"))
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("410.48", None, 4)
    g = q["gpus"][0]
    assert (g["bus_id"], g["name"], g["device_id"]) == ("00000000:18:00.0", "Tesla V100-PCIE-32GB", "0x1DB610DE")
    assert (g["power_limit_w"], g["power_draw_w"]) == (250.0, 58.81)
    assert g["retired_pages"] == {"pending": False, "single_bit": 0, "double_bit": 0}
    assert g["clock_event_reasons"] == REASONS_IDLE
    assert (g["temperature_c"], g["memory_temperature_c"], g["max_clocks_mhz"]) == (40, 39, {"sm": 1380,
                                                                                           "memory": 877})
    assert g["pcie"]["gen_device_max"] is None and g["remap"]["pending"] is None


def test_q_text_pending_retirement_under_the_old_key() -> None:
    t = pub("nvidia-smi", "V100")
    t = _set(t, "Pending", "Yes", after="Retired Pages")
    assert nvsmi.parse_q(t)["gpus"][0]["retired_pages"]["pending"] is True


def test_q_text_legacy_flat_bit_counters() -> None:
    """Drivers that print `Single Bit` / `Double Bit` as counters of the volatile section."""
    t = TEXT.replace("            SRAM Correctable                           : 0\n", "            Single Bit : 3\n", 1)
    t = t.replace("            DRAM Uncorrectable                         : 0\n", "            Double Bit : 2\n", 1)
    ecc = nvsmi.parse_q(t)["gpus"][0]["ecc"]
    assert (ecc["volatile_sram_ce"], ecc["volatile_dram_ue"]) == (3, 2)


def test_q_text_reason_with_children_is_flattened() -> None:
    t = re.sub(r"^(\s*HW Slowdown)\s*: Not Active$", r"\1", TEXT, count=1, flags=re.M)  # a parent, no value
    t = _set(t, "HW Power Brake Slowdown", "Active", after="Clocks Event Reasons")
    reasons = nvsmi.parse_q(t)["gpus"][0]["clock_event_reasons"]
    assert reasons["HW Power Brake Slowdown"] is True and reasons["HW Thermal Slowdown"] is False
    assert "HW Slowdown" not in reasons


def test_q_text_power_draw_without_average() -> None:
    t = TEXT.replace("Average Power Draw      ", "Power Draw              ", 1)
    t = _set(t, "Power Draw", "61.25 W", after="GPU Power Readings")
    assert nvsmi.parse_q(t)["gpus"][0]["power_draw_w"] == 61.25


def test_q_text_two_gpus_in_order() -> None:
    head, gpu = TEXT.split("GPU 00000000:00:06.0\n", 1)
    second = _set("GPU 00000000:00:07.0\n" + gpu, "GPU Current Temp", "55 C")
    q = nvsmi.parse_q(head + "GPU 00000000:00:06.0\n" + gpu + second)
    assert [(g["bus_id"], g["temperature_c"]) for g in q["gpus"]] == [("00000000:00:06.0", 42),
                                                                       ("00000000:00:07.0", 55)]


def test_q_text_without_gpu_sections() -> None:
    assert nvsmi.parse_q("Driver Version : 580.1\nAttached GPUs : 0\n") == {
        "driver_version": "580.1", "cuda_version": None, "attached_gpus": 0, "gpus": []}
