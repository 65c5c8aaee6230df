"""`nvidia-smi -q -x` read field by field: the real one-GPU H200 capture (tests/fixtures/h200x1), edited where a fault
or an older driver's layout must be shown, each gate field with a value of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gridready.probe import nvsmi
from tests.unit.probe.nvsmi_faulty import FAULTY_GPU, REASONS_IDLE

XML = (Path(__file__).resolve().parents[2] / "fixtures" / "h200x1" / "nvidia-smi-q-x.xml").read_text()


def _set(text: str, tag: str, value: str, within: str | None = None) -> str:
    """Set the first `<tag>` (inside the first `<within>` block when given) to `value`."""
    def one(block: str) -> str:
        new, n = re.subn(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", block, count=1)
        assert n == 1, tag
        return new
    if within is None:
        return one(text)
    m = re.search(rf"<{within}>.*?</{within}>", text, re.S)
    assert m, within
    return text[:m.start()] + one(m.group(0)) + text[m.end():]


def _replace_block(text: str, tag: str, new: str) -> str:
    out, n = re.subn(rf"<{tag}>.*?</{tag}>", new, text, count=1, flags=re.S)
    assert n == 1, tag
    return out


def _faulty() -> str:
    t = XML
    for tag, v in [("sram_correctable", "11"), ("sram_uncorrectable_parity", "1"), ("sram_uncorrectable_secded", "2"),
                   ("dram_correctable", "13"), ("dram_uncorrectable", "14")]:
        t = _set(t, tag, v, within="volatile")
    for tag, v in [("sram_correctable", "21"), ("sram_uncorrectable_parity", "4"), ("sram_uncorrectable_secded", "8"),
                   ("dram_correctable", "23"), ("dram_uncorrectable", "24"), ("sram_threshold_exceeded", "Yes")]:
        t = _set(t, tag, v, within="aggregate")
    t = _set(t, "retired_count", "5", within="multiple_single_bit_retirement")
    t = _set(t, "retired_count", "6", within="double_bit_retirement")
    t = _set(t, "pending_retirement", "Yes").replace("<pending_blacklist>N/A</pending_blacklist>", "")  # newer form
    for tag, v in [("remapped_row_corr", "7"), ("remapped_row_unc", "9"), ("remapped_row_pending", "Yes"),
                   ("remapped_row_failure", "Yes"), ("gpu_recovery_action", "GPU Reset"),
                   ("channel_repair_pending", "Yes"), ("unrepairable_memory", "Yes")]:
        t = _set(t, tag, v)
    for tag, v in [("max_link_gen", "5"), ("current_link_gen", "3"), ("max_device_link_gen", "4"),
                   ("max_link_width", "16x"), ("current_link_width", "8x"), ("replay_counter", "17"),
                   ("gpu_temp", "71 C"), ("memory_temp", "83 C"), ("current_power_limit", "650.00 W"),
                   ("clocks_event_reason_sw_power_cap", "Active"),
                   ("clocks_event_reason_hw_thermal_slowdown", "Active"),
                   ("state", "Completed"), ("status", "Success"), ("persistence_mode", "Disabled"),
                   ("current_ecc", "Disabled")]:
        t = _set(t, tag, v)
    return t


def test_q_xml_every_gate_field_reads_its_own_element() -> None:
    q = nvsmi.parse_q_xml(_faulty())
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"], q["format"]) == ("580.159.04", "13.0", 1, "xml")
    (g,) = q["gpus"]
    assert g == {**FAULTY_GPU, "power_draw_w": 134.16, "max_clocks_mhz": {"sm": 1980, "memory": 3201},
                 "fabric": {"state": "Completed", "status": "Success"}}


def test_q_xml_healthy_capture_reads_zero_counts_not_missing_ones() -> None:
    (g,) = nvsmi.parse_q_xml(XML)["gpus"]
    assert [v for k, v in g["ecc"].items() if k != "sram_threshold_exceeded"] == [0] * 8
    assert g["ecc"]["sram_threshold_exceeded"] is False
    assert g["retired_pages"] == {"pending": None, "single_bit": None, "double_bit": None}  # all N/A on H200
    assert g["remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert g["clock_event_reasons"] == REASONS_IDLE and g["pcie"]["replays"] == 0


def test_q_xml_sram_uncorrectable_of_one_kind_only() -> None:
    """A driver that prints one SRAM uncorrectable counter: the sum is that counter alone."""
    t = _replace_block(XML, "volatile", "<volatile><sram_uncorrectable>6</sram_uncorrectable>"
                                        "<dram_uncorrectable>N/A</dram_uncorrectable></volatile>")
    ecc = nvsmi.parse_q_xml(t)["gpus"][0]["ecc"]
    assert (ecc["volatile_sram_ue"], ecc["volatile_sram_ce"], ecc["volatile_dram_ue"]) == (6, None, None)


def test_q_xml_pre_hopper_single_and_double_bit_layout() -> None:
    legacy = ("<volatile><single_bit><device_memory>1</device_memory><total>3</total></single_bit>"
              "<double_bit><device_memory>2</device_memory><total>2</total></double_bit></volatile>")
    t = _replace_block(XML, "volatile", legacy)
    t = _replace_block(t, "aggregate", "<aggregate><single_bit><total>40</total></single_bit>"
                                       "<double_bit><total>41</total></double_bit></aggregate>")
    ecc = nvsmi.parse_q_xml(t)["gpus"][0]["ecc"]
    assert ecc == {"volatile_sram_ce": 3, "volatile_sram_ue": None, "volatile_dram_ce": None, "volatile_dram_ue": 2,
                   "aggregate_sram_ce": None, "aggregate_sram_ue": None, "aggregate_dram_ce": None,
                   "aggregate_dram_ue": None, "sram_threshold_exceeded": None}


def test_q_xml_pre_r535_throttle_reasons_and_unknown_reason() -> None:
    t = _set(XML, "clocks_event_reason_hw_power_brake_slowdown", "Active")
    t = t.replace("</clocks_event_reasons>", "<clocks_event_reason_new_cause>Active</clocks_event_reason_new_cause>"
                                             "</clocks_event_reasons>")
    t = re.sub(r"clocks_event_reason(s?)(_|>)", r"clocks_throttle_reason\1\2", t)
    assert "<clocks_throttle_reasons>" in t and "<clocks_event_reasons>" not in t
    reasons = nvsmi.parse_q_xml(t)["gpus"][0]["clock_event_reasons"]
    assert reasons == {**REASONS_IDLE, "HW Power Brake Slowdown": True, "new_cause": True}


def test_q_xml_without_reasons_reads_none() -> None:
    t = _replace_block(XML, "clocks_event_reasons", "")
    assert nvsmi.parse_q_xml(t)["gpus"][0]["clock_event_reasons"] == {}


def test_q_xml_remapped_rows_not_applicable_before_ampere() -> None:
    t = _replace_block(XML, "remapped_rows", "<remapped_rows>N/A</remapped_rows>")
    assert nvsmi.parse_q_xml(t)["gpus"][0]["remap"] == {"correctable": None, "uncorrectable": None, "pending": None,
                                                          "failure": None}


@pytest.mark.parametrize(("block", "limit", "draw"), [
    ("<power_readings><power_limit>300.00 W</power_limit><power_draw>45.50 W</power_draw></power_readings>",
     300.0, 45.5),
    ("<gpu_power_readings><power_draw>61.25 W</power_draw><current_power_limit>400.00 W</current_power_limit>"
     "</gpu_power_readings>", 400.0, 61.25),
    ("<gpu_power_readings><average_power_draw>N/A</average_power_draw><power_draw>N/A</power_draw>"
     "</gpu_power_readings><power_readings><power_limit>250.00 W</power_limit><power_draw>33.00 W</power_draw>"
     "</power_readings>", 250.0, 33.0),
])
def test_q_xml_power_of_older_drivers(block: str, limit: float, draw: float) -> None:
    t = _replace_block(XML, "gpu_power_readings", block)
    g = nvsmi.parse_q_xml(t)["gpus"][0]
    assert (g["power_limit_w"], g["power_draw_w"]) == (limit, draw)


def test_q_xml_device_id_already_prefixed_is_kept() -> None:
    t = _set(XML, "pci_device_id", "0x20B010DE")
    assert nvsmi.parse_q_xml(t)["gpus"][0]["device_id"] == "0x20B010DE"


def test_q_xml_reads_every_gpu_in_order() -> None:
    gpu = re.search(r"<gpu id=.*?</gpu>", XML, re.S).group(0)
    second = _set(gpu.replace('id="00000000:00:06.0"', 'id="00000000:00:07.0"'), "gpu_temp", "55 C")
    t = _set(XML.replace("</gpu>", "</gpu>" + second, 1), "attached_gpus", "2")
    q = nvsmi.parse_q_xml(t)
    assert q["attached_gpus"] == 2
    assert [(g["bus_id"], g["temperature_c"]) for g in q["gpus"]] == [("00000000:00:06.0", 42),
                                                                       ("00000000:00:07.0", 55)]


def test_q_xml_errors_name_what_was_read() -> None:
    with pytest.raises(ValueError, match=r"^nvidia-smi -q -x: not XML \(") as exc:
        nvsmi.parse_q_xml("GPU 00000000:00:06.0\n")
    assert exc.value.__cause__ is None
    with pytest.raises(ValueError, match=r"^nvidia-smi -q -x: root element <html>, expected <nvidia_smi_log>$"):
        nvsmi.parse_q_xml("<html><body/></html>")
