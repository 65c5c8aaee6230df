"""More nvidia-smi parser values, each from a real capture (tests/fixtures): the query CSV, `nvlink -s`/`-c`/`-e`,
`-q` excerpts without a full GPU section, the tree reader, and `-q -x` elements absent on older drivers."""

from __future__ import annotations

import json
import re

import pytest

from gridready.probe import nvsmi
from tests.unit.certify.fixtures_io import FIX, pub

H200X1 = FIX / "h200x1"
H200X2 = FIX / "h200x2"
XML = (H200X1 / "nvidia-smi-q-x.xml").read_text()
Q_TEXT = (H200X1 / "nvidia-smi-q.txt").read_text()
NVLINK = (H200X2 / "nvidia-smi-nvlink.txt").read_text()  # `nvlink -s` then `nvlink -c` of the same 2 GPUs


def _drop(text: str, tag: str) -> str:
    out, n = re.subn(rf"\s*<{tag}>.*?</{tag}>", "", text, count=1, flags=re.S)
    assert n == 1, tag
    return out


# ---- _value: the placeholders nvidia-smi prints for a field it cannot read ---------------------------------------
@pytest.mark.parametrize(("raw", "value"), [
    ("", None), ("  ", None), ("N/A", None), ("[N/A]", None), ("[Not Supported]", None), ("Not Supported", None),
    ("[Unknown Error]", None), ("0x233010DE", "0x233010DE"), ("143771 MiB", 143771), ("700.00 W", 700.0),
    ("-5", -5), ("16x", "16x"), ("Enabled", "Enabled"),
])
def test_value_placeholders_and_numbers(raw: str, value: object) -> None:
    assert nvsmi._value(raw) == value
    assert type(nvsmi._value(raw)) is type(value)


# ---- --query-gpu CSV -------------------------------------------------------------------------------------------
def test_query_csv_skips_a_cut_row_and_reads_the_next() -> None:
    lines = (H200X2 / "nvidia-smi-query-gpu.csv").read_text().splitlines()
    cut = lines[1].rsplit(",", 3)[0]  # a row cut short (the tool killed mid-line)
    rows = nvsmi.parse_query_csv("\n".join([lines[0], cut, lines[2]]))
    assert [(r["index"], r["pci.bus_id"], r["memory.total"], r["power.limit"]) for r in rows] == [
        (1, "00000000:00:07.0", 143771, 700.0)]


# ---- nvlink -s / -c / -e ---------------------------------------------------------------------------------------
def test_nvlink_status_two_h200_with_capability_lines() -> None:
    p = nvsmi.parse_nvlink_status(NVLINK)
    assert sorted(p["gpus"]) == ["0", "1"]
    g0 = p["gpus"]["0"]
    assert (g0["name"], g0["uuid"], g0["all_inactive"]) == ("NVIDIA H200", "GPU-3920aa66-9ce5-4f4f-d636-9ae9527077cd",
                                                           False)
    assert g0["links"] == {str(n): 26.562 for n in range(18)}  # the `-c` lines (with a comma) add no link
    assert set(g0) == {"name", "uuid", "links", "all_inactive"}


def test_nvlink_status_all_inactive_then_another_gpu() -> None:
    inactive = pub("nvidia-smi", "nvlink-s-i6__A100__FAIL-all-links-inactive")
    ok = pub("nvidia-smi", "nvlink-s-i7__A100__ok")
    p = nvsmi.parse_nvlink_status("Fri Jan 1 00:00:00 2021\n" + inactive + ok)  # a banner before the first GPU
    assert p["gpus"]["6"] == {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-9667d95e-6d22-0c22-1f57-c481f13e7c44",
                              "links": {}, "all_inactive": True}
    assert p["gpus"]["7"]["links"] == {str(n): 25.0 for n in range(12)}
    assert p["gpus"]["7"]["all_inactive"] is False


def test_nvlink_errors_h200_counters() -> None:
    text = json.loads((H200X2 / "probe_quick.json").read_text())["raw"]["nvidia_smi_nvlink_e"]
    p = nvsmi.parse_nvlink_errors("nvidia-smi nvlink -e\n" + text)  # a line before the first GPU is skipped
    assert sorted(p) == ["0", "1"]
    assert p["0"]["0"] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    assert sorted(p["1"], key=int) == [str(n) for n in range(18)]


def test_nvlink_errors_multi_line_form() -> None:
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)\n"
            "\t Note: counters since reset\n"
            "\t Link 0:\n\t\t Replay Errors: 3\n\t\t CRC Flit: N/A\n"
            "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-2)\n\t Link 1: Replay Errors: 0\n")
    p = nvsmi.parse_nvlink_errors(text)
    assert p == {"0": {"0": {"Replay Errors": 3, "CRC Flit": None}}, "1": {"1": {"Replay Errors": 0}}}


# ---- nvidia-smi -q: the tree reader and excerpts ---------------------------------------------------------------
def test_parse_tree_head_of_the_h200_capture() -> None:
    head = Q_TEXT.split("GPU 00000000:00:06.0")[0]
    tree = nvsmi.parse_tree(head)
    assert tree == {"Timestamp": tree["Timestamp"], "Driver Version": "580.159.04", "CUDA Version": "13.0",
                    "Attached GPUs": "1"}
    assert tree["Timestamp"].startswith(("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"))


def test_parse_tree_key_with_empty_value_is_a_section() -> None:
    tree = nvsmi.parse_tree("GPU 00000000:00:06.0\n    Processes :\n        Process ID : 1\n")
    assert tree == {"GPU 00000000:00:06.0": {"Processes": {"Process ID": "1"}}}


def test_q_sram_excerpt_without_a_gpu_header() -> None:
    (g,) = nvsmi.parse_q(pub("nvidia-smi", "sram-uncorrectable"))["gpus"]
    assert g["bus_id"] == "unknown"
    assert g["ecc"] == {"volatile_sram_ce": 0, "volatile_sram_ue": 1, "volatile_dram_ce": 0, "volatile_dram_ue": 0,
                        "aggregate_sram_ce": 0, "aggregate_sram_ue": 5, "aggregate_dram_ce": 0,
                        "aggregate_dram_ue": 0, "sram_threshold_exceeded": None}


def test_q_remapped_rows_excerpt_without_a_gpu_header() -> None:
    start = Q_TEXT.index("    Remapped Rows")
    block = "\n".join(Q_TEXT[start:].splitlines()[:7])  # the section's own lines, as a `-d ROW_REMAPPER` excerpt
    (g,) = nvsmi.parse_q(block)["gpus"]
    assert g["bus_id"] == "unknown"
    assert g["remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


def test_q_a100_rowremap_excerpt_reads_absent_fields_as_none() -> None:
    q = nvsmi.parse_q(pub("nvidia-smi", "rowremap-pending"))
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("510.73.08", "11.6", 8)
    (g,) = q["gpus"]
    assert g["bus_id"] == "00000000:10:1C.0" and g["name"] == "NVIDIA A100-SXM4-80GB"
    assert g["pcie"] == {"gen_max": None, "gen_current": None, "gen_device_max": None, "width_max": None,
                         "width_current": None, "replays": None}
    assert (g["ecc"]["volatile_dram_ce"], g["ecc"]["aggregate_dram_ce"]) == (177, 177)
    assert g["remap"] == {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False}


def test_q_ecc_counters_all_na_read_as_none() -> None:
    t = re.sub(r"^(\s*(?:SRAM|DRAM) [\w -]+?\s*:) 0$", r"\1 N/A", Q_TEXT, flags=re.M)  # ECC off: counters N/A
    ecc = nvsmi.parse_q(t)["gpus"][0]["ecc"]
    assert {k: v for k, v in ecc.items() if k != "sram_threshold_exceeded"} == dict.fromkeys(
        ["volatile_sram_ce", "volatile_sram_ue", "volatile_dram_ce", "volatile_dram_ue", "aggregate_sram_ce",
         "aggregate_sram_ue", "aggregate_dram_ce", "aggregate_dram_ue"])


def test_q_page_retirement_8xa100_fail() -> None:
    q = nvsmi.parse_q(pub("nvidia-smi", "PAGE_RETIREMENT__8xA100__FAIL"))
    assert [(g["bus_id"][:8], g["retired_pages"]["pending"], g["retired_pages"]["single_bit"],
             g["retired_pages"]["double_bit"]) for g in q["gpus"]] == [
        ("00000001", False, 60, 5), ("00000002", True, 2, 61), ("00000003", False, 0, 0), ("00000004", True, 6, 0),
        ("00000005", False, 0, 0), ("00000006", True, 20, 45), ("00000007", False, 0, 0), ("00000008", True, 8, 56)]


# ---- nvidia-smi -q -x ------------------------------------------------------------------------------------------
def test_xml_as_bytes() -> None:
    assert nvsmi.parse_q_xml(XML.encode()) == nvsmi.parse_q_xml(XML)


def test_xml_container_element_has_no_text() -> None:
    g = nvsmi.ET.fromstring(XML.encode()).find("gpu")
    assert nvsmi._x(g, "temperature") is None and nvsmi._x(g, "temperature/gpu_temp") == "42 C"


def test_xml_without_remapped_rows_or_link_widths() -> None:
    """Drivers before R450 have no <remapped_rows>; a vGPU/passthrough document may lack <link_widths>."""
    (g,) = nvsmi.parse_q_xml(_drop(_drop(XML, "remapped_rows"), "link_widths"))["gpus"]
    assert g["remap"] == {"correctable": None, "uncorrectable": None, "pending": None, "failure": None}
    assert (g["pcie"]["width_max"], g["pcie"]["width_current"], g["pcie"]["gen_max"]) == (None, None, 5)


def test_xml_pending_blacklist_yes() -> None:
    t = XML.replace("<pending_blacklist>N/A</pending_blacklist>", "<pending_blacklist>Yes</pending_blacklist>")
    assert nvsmi.parse_q_xml(t)["gpus"][0]["retired_pages"] == {"pending": True, "single_bit": None,
                                                                "double_bit": None}


# ---- fixed defects (each test fails on the parser before its fix) ----------------------------------------------
def test_q_text_r410_nested_ecc_counters_and_ecc_mode() -> None:
    """The R410 V100 capture (tests/fixtures/public/nvidia-smi, drv410.48) nests `Single Bit` / `Double Bit` sections
    with a `Total` under `Volatile`, and names the mode section `Ecc Mode`."""
    t = pub("nvidia-smi", "V100")
    total = re.compile(r"^(\s+Total\s+:) 0$", re.M)  # the first two: Volatile Single Bit, Volatile Double Bit
    t = total.sub(r"\1 3", t, count=1)
    t = total.sub(r"\1 2", t, count=1)
    g = nvsmi.parse_q(t)["gpus"][0]
    assert g["ecc_mode"] == "Enabled"
    assert (g["ecc"]["volatile_sram_ce"], g["ecc"]["volatile_dram_ue"]) == (3, 2)


def test_q_text_r410_lower_case_keys() -> None:
    """The same capture spells `Replays since reset` and `Virtualization mode` in lower case."""
    t = pub("nvidia-smi", "V100").replace("Replays since reset         : 0", "Replays since reset         : 7")
    g = nvsmi.parse_q(t)["gpus"][0]
    assert (g["pcie"]["replays"], g["virtualization_mode"]) == (7, "None")


@pytest.mark.parametrize("blacklist", ["N/A", "No"])
def test_xml_pending_retirement_yes_is_not_hidden_by_the_blacklist(blacklist: str) -> None:
    """Both elements stand in the real R580 document (tests/fixtures/h200x1/nvidia-smi-q-x.xml), both N/A there."""
    t = XML.replace("<pending_retirement>N/A</pending_retirement>", "<pending_retirement>Yes</pending_retirement>")
    t = t.replace("<pending_blacklist>N/A</pending_blacklist>", f"<pending_blacklist>{blacklist}</pending_blacklist>")
    assert nvsmi.parse_q_xml(t)["gpus"][0]["retired_pages"]["pending"] is True
    no = XML.replace("<pending_retirement>N/A</pending_retirement>", "<pending_retirement>No</pending_retirement>")
    assert nvsmi.parse_q_xml(no)["gpus"][0]["retired_pages"]["pending"] is False
