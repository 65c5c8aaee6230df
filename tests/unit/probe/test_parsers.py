"""The probe's parsers on real outputs (tests/fixtures, copied from ../shared/fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready.probe import dcgm, gpu_burn, kernel_log, lspci, nccl_tests, nvsmi
from gridready.probe.sysfs import gen_of
from tests.unit.certify.fixtures_io import FIX, H200, pub, read


def test_query_csv_h200() -> None:
    rows = nvsmi.parse_query_csv((H200 / "nvidia-smi-query-gpu.csv").read_text())
    assert [r["index"] for r in rows] == [0, 1]
    assert rows[0]["pci.bus_id"] == "00000000:00:06.0"
    assert rows[0]["pcie.link.gen.max"] == 5 and rows[0]["pcie.link.width.current"] == 16
    assert rows[0]["power.limit"] == 700.0 and rows[0]["memory.total"] == 143771


def test_q_h200_fields() -> None:
    q = nvsmi.parse_q((H200 / "nvidia-smi-q.txt").read_text())
    assert q["driver_version"] == "580.159.04" and len(q["gpus"]) == 2
    g = q["gpus"][0]
    assert g["bus_id"] == "00000000:00:06.0" and g["device_id"] == "0x233510DE"
    assert g["pcie"] == {"gen_max": 5, "gen_current": 5, "gen_device_max": 5, "width_max": 16, "width_current": 16,
                         "replays": 3}
    assert g["remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert g["ecc"]["aggregate_sram_ue"] == 0 and g["ecc"]["sram_threshold_exceeded"] is False
    assert g["max_clocks_mhz"] == {"sm": 1980, "memory": 3201}
    assert g["fabric"] == {"state": "Completed", "status": "Success"}
    assert g["clock_event_reasons"]["Idle"] is True and g["clock_event_reasons"]["HW Slowdown"] is False


def test_q_power_brake_fixture() -> None:
    q = nvsmi.parse_q(pub("nvidia-smi", "drv535.161.08"))
    assert len(q["gpus"]) == 8
    assert all(g["clock_event_reasons"]["HW Power Brake Slowdown"] for g in q["gpus"])


def test_q_excerpts_without_gpu_header() -> None:
    sram = nvsmi.parse_q(pub("nvidia-smi", "GPU-unspecified__EXCERPT"))
    assert sram["gpus"][0]["ecc"]["volatile_sram_ue"] == 1 and sram["gpus"][0]["ecc"]["aggregate_sram_ue"] == 5
    remap = nvsmi.parse_q(pub("nvidia-smi", "A100__EXCERPT"))
    assert remap["gpus"][0]["remap"]["pending"] is True


def test_q_page_retirement() -> None:
    bad = nvsmi.parse_q(pub("nvidia-smi", "FAIL-edited-pending-blacklist"))
    assert [g["retired_pages"]["pending"] for g in bad["gpus"]].count(True) == 4
    ok = nvsmi.parse_q(pub("nvidia-smi", "8xA100__ok"))
    assert not any(g["retired_pages"]["pending"] for g in ok["gpus"])


@pytest.mark.parametrize(("name", "gpus", "links", "inactive"), [
    ("h200x2/nvidia-smi-nvlink.txt", 2, 18, False),
    ("nvidia-smi/nvidia-smi-nvlink-s-i0__H100-SXM", 1, 18, False),
    ("nvidia-smi/nvidia-smi-nvlink-s__8xH800-8links", 3, 8, False),
    ("nvidia-smi/nvidia-smi-nvlink-s__A100", 8, 12, False),
    ("nvidia-smi/nvidia-smi-nvlink-s-i7__A100", 1, 12, False),
    ("nvidia-smi/nvidia-smi-nvlink-s-i6__A100", 1, 0, True),
])
def test_nvlink_status(name: str, gpus: int, links: int, inactive: bool) -> None:
    text = read(name) if name.startswith("h200x2") else pub("nvidia-smi", name.split("/", 1)[1])
    st = nvsmi.parse_nvlink_status(text)["gpus"]
    assert len(st) == gpus
    first = next(iter(st.values()))
    assert len([s for s in first["links"].values() if s]) == links
    assert first["all_inactive"] is inactive


def test_nvlink_errors_real_h200() -> None:
    from tests.unit.certify.fixtures_io import probe_quick
    errs = nvsmi.parse_nvlink_errors(probe_quick()["raw"]["nvidia_smi_nvlink_e"])
    assert set(errs) == {"0", "1"} and len(errs["0"]) == 18
    assert errs["0"]["0"] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}




@pytest.mark.parametrize(("name", "schema", "failed"), [
    ("diag-r1-j__1xTesla-T4__DCGM3.x-pass", "3.x", []),
    ("diag-r3-j__1xTesla-T4__DCGM3.x-pass", "3.x", []),
    ("DCGM4.2.3", "4.x", ["software"]),
    ("DCGM4.0.0-pass-table", "text", []),
    ("FAIL-gpu-memory-thermal-violation", "text", ["GPU Memory"]),
    ("FAIL-uncorrectable-mem-rowremap-pending", "text", ["Deployment"]),
])
def test_dcgm_schemas(name: str, schema: str, failed: list[str]) -> None:
    text = pub("dcgmi", name)
    parsed = dcgm.parse_json(text) if text.lstrip().startswith("{") else dcgm.parse_text(text)
    assert parsed["schema"] == schema
    assert dcgm.failed_tests(parsed) == failed


def test_dcgm_4x_metadata_and_gpu() -> None:
    p = dcgm.parse_json(pub("dcgmi", "DCGM4.2.3"))
    assert p["version"] == "4.2.3"
    res = p["tests"][0]["results"][0]
    assert res["gpus"] == [0] and "Persistence mode for GPU 0 is disabled" in res["warnings"][0]


def test_dcgm_malformed_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"malformed 3\.x"):
        dcgm.parse_json(pub("dcgmi", "MALFORMED-handedited"))
    with pytest.raises(ValueError):
        dcgm.parse_json("not json")




@pytest.mark.parametrize(("name", "rows", "max_busbw", "oob", "ranks"), [
    ("healthy-476GBps", 6, 476.53, 0, 8),
    ("healthy-235GBps-validation-off", 34, 235.26, 0, 8),
    ("healthy-188GBps", 30, 188.7, 0, 0),
    ("healthy-78GBps", 29, 78.33, None, 0),
    ("healthy-339GBps", 31, 338.82, 0, 16),
    ("DEGRADED-155GBps-default-algo", 11, 167.87, 0, 16),
    ("LOW-23GBps-expected-for-hw", 29, 22.92, 0, 0),
    ("FAIL-wrong-nonzero-NCCL_PROTO-SIMPLE", 3, 0.92, None, 0),
])
def test_nccl_tests_text(name: str, rows: int, max_busbw: float, oob: int | None, ranks: int) -> None:
    p = nccl_tests.parse_text(pub("nccl-tests", name))
    assert len(p["rows"]) == rows
    assert max(max(r["oop"]["busbw"], r["ip"]["busbw"]) for r in p["rows"]) == pytest.approx(max_busbw)
    assert p["out_of_bounds"] == oob and p["ranks"] == ranks


def test_nccl_tests_wrong_and_error_columns() -> None:
    bad = nccl_tests.parse_text(pub("nccl-tests", "FAIL-wrong-nonzero-NCCL_PROTO-SIMPLE"))
    assert max(r["oop"]["wrong"] or 0 for r in bad["rows"]) == 237858 and bad["elided"]
    old = nccl_tests.parse_text(pub("nccl-tests", "healthy-188GBps"))
    assert old["wrong_kind"] == "error"
    off = nccl_tests.parse_text(pub("nccl-tests", "healthy-235GBps-validation-off"))
    assert all(r["oop"]["wrong"] is None for r in off["rows"])


def test_nccl_tests_h200_text() -> None:
    text = nccl_tests.parse_text((H200 / "all_reduce_perf.txt").read_text())
    assert text["ranks"] == 2 and text["avg_busbw"] == pytest.approx(110.211)
    big = {r["bytes"]: r["oop"]["busbw"] for r in text["rows"]}
    assert big[4 << 30] == pytest.approx(346.98)


NCCL_J = FIX / "h200x1" / "nccl-tests-J"  # one real run per collective: -J JSON and stdout (README.md there)
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]


def _close(js: float | None, txt: float | None) -> bool:
    """The text table rounds to 4-6 significant digits (e.g. 197060 for 197060.237851)."""
    return js == txt if js is None or txt is None else js == pytest.approx(txt, rel=1e-3, abs=0.01)


@pytest.mark.parametrize("coll", COLLECTIVES)
def test_nccl_tests_real_json_reads_as_its_own_text(coll: str) -> None:
    """The same nccl-tests 2.19.6 run read from its -J file and from its stdout: every row, value by value, and the
    run's header facts (what the gates read from `parsed`, whichever of the two collect() kept)."""
    js = nccl_tests.parse_json((NCCL_J / f"{coll}_perf.json").read_text())
    txt = nccl_tests.parse_text((NCCL_J / f"{coll}_perf.txt").read_text())
    assert [r["bytes"] for r in js["rows"]] == [r["bytes"] for r in txt["rows"]] == [64 << 20, 128 << 20, 256 << 20]
    for j, t in zip(js["rows"], txt["rows"], strict=True):
        assert (j["count"], j["type"], j["redop"]) == (t["count"], t["type"], t["redop"])
        for side in ("oop", "ip"):
            for key in ("time_us", "algbw", "busbw"):
                assert _close(j[side][key], t[side][key]), (coll, j["bytes"], side, key, j[side][key], t[side][key])
            assert j[side]["wrong"] == t[side]["wrong"]  # 0, or None where nccl-tests printed N/A
    for key in ("ranks", "hosts", "validation", "collective", "out_of_bounds", "errors", "wrong_kind", "nccl_version"):
        assert js[key] == txt[key], key
    assert _close(js["avg_busbw"], txt["avg_busbw"])
    assert (js["ranks"], js["hosts"], js["collective"], js["nccl_version"]) == (1, ["vm"], coll, 22809)


def test_nccl_tests_real_json_unchecked_columns_and_rates() -> None:
    """sendrecv checks only its out-of-place column (src/sendrecv.cu) and is the one collective whose busbw is not 0
    on one GPU; alltoall leaves in-place unchecked too (`nwrong` null in the JSON, N/A in the text)."""
    sr = nccl_tests.parse_json((NCCL_J / "sendrecv_perf.json").read_text())
    assert [r["ip"]["wrong"] for r in sr["rows"]] == [None] * 3 and [r["oop"]["wrong"] for r in sr["rows"]] == [0] * 3
    assert sr["rows"][0]["oop"]["busbw"] == pytest.approx(1625.150028) and sr["avg_busbw"] == pytest.approx(49427.87681)
    assert nccl_tests.validated_busbw(sr["rows"][0]) == pytest.approx(1625.150028)  # the checked column only
    a2a = nccl_tests.parse_json((NCCL_J / "alltoall_perf.json").read_text())
    assert [r["ip"]["wrong"] for r in a2a["rows"]] == [None] * 3 and a2a["rows"][0]["redop"] == "none"
    ar = nccl_tests.parse_json((NCCL_J / "all_reduce_perf.json").read_text())
    assert [r["oop"]["busbw"] for r in ar["rows"]] == [0.0] * 3  # one rank: nothing crosses a bus
    assert [r["oop"]["algbw"] for r in ar["rows"]] == [1916.656832, 2021.323928, 2078.617391]


def test_kernel_log_gpud_dmesg() -> None:
    p = kernel_log.parse(pub("dmesg", "FAIL-xid48-63-94-dbe-rowremap"))
    assert [x["xid"] for x in p["xid"]][:3] == [48, 63, 94]
    assert {x["pci"] for x in p["xid"]} == {"0000:19:00"}


def test_kernel_log_imbue_lines() -> None:
    p = kernel_log.parse(pub("dmesg", "FAIL-xid94-xid64-sxid12028-pcie-limited"))
    assert sorted(x["xid"] for x in p["xid"]) == [64, 94]
    assert p["sxid"][0]["sxid"] == 12028 and p["sxid"][0]["pci"] == "0000:85:00.0"
    assert p["pcie_limited"][0]["pci"] == "0000:9c:00.0" and "x8" in p["pcie_limited"][0]["limited_by"]


def test_kernel_log_noise_only() -> None:
    p = kernel_log.parse(pub("dmesg", "FAIL-nvidia-peermem-invalid-context__gpud.log"))
    assert p["xid"] == [] and p["sxid"] == []
    flap = kernel_log.parse(pub("dmesg", "azurehpc-nhc.log"))
    assert flap["xid"] == []  # a link flap is the fabric certification's gate, not an Xid


def test_fabricmanager_log_sxid() -> None:
    p = kernel_log.parse(pub("fabricmanager", "multicast-teams-plus-FAIL-nvswitch-nonfatal-SXid12028"))
    assert [s["sxid"] for s in p["sxid"]] == [12028] and p["sxid"][0]["pci"] == "00000000:86:00.0"


def test_lspci_endpoints_and_benign_switch_port() -> None:
    p = lspci.parse(pub("lspci", "EXCERPT-gpu-cx7-and-benign-downgraded-switchport"))
    assert [(e["bdf"], e["kind"], e["gen_current"], e["width_current"]) for e in p["endpoints"]] == [
        ("0000:19:00.0", "gpu", 5, 16), ("0000:1a:00.0", "nic", 5, 16), ("0000:1b:00.0", "nic", 4, 16)]
    downgraded = [b for b in p["bridges"] if b["downgraded"]]
    assert [b["bdf"] for b in downgraded] == ["0000:17:03.0"]  # a switch port: never judged


def test_lspci_full_acs_topology() -> None:
    p = lspci.parse(pub("lspci", "HGX-H100-8gpu-CX7-PEX890xx__gpud.txt"))
    assert sum(e["kind"] == "gpu" for e in p["endpoints"]) == 8
    redirect = [b for b in p["bridges"] if b["acs_ctl"] and b["acs_ctl"].get("ReqRedir")]
    assert redirect and all(not b["endpoints_below"] for b in redirect)


@pytest.mark.parametrize(("name", "tested", "faulty"), [
    ("ok-all-GPUs", 8, 0),
    ("FAIL-all-FAULTY-but-exit-0", 16, 16),
])
def test_gpu_burn(name: str, tested: int, faulty: int) -> None:
    p = gpu_burn.parse(pub("gpu-burn", name))
    assert p["tested"] == tested and list(p["gpus"].values()).count("FAULTY") == faulty


def test_gen_of() -> None:
    assert gen_of("32.0 GT/s PCIe") == 5 and gen_of("16.0 GT/s PCIe") == 4 and gen_of("2.5 GT/s PCIe") == 1
    assert gen_of(None) is None and gen_of("Unknown") is None


def test_nvbandwidth_matrices() -> None:
    from gridready.probe import nvbandwidth
    p = nvbandwidth.parse(pub("nvbandwidth", "GH200"))
    assert p["version"] == "v0.6"
    assert p["tests"]["host_to_device_memcpy_ce"]["sum"] == 1985.60
    assert nvbandwidth.per_gpu(p["tests"], "host_to_device_memcpy_ce") == {0: 369.36, 1: 269.33, 2: 412.11}


# ---- nvidia-smi -q -x (NVIDIA's XML) ------------------------------------------------------------------------

def test_q_xml_reads_what_the_text_reads_on_the_real_h200_capture() -> None:
    """The one-GPU H200 VM captured both forms in one minute: every field the gates use agrees (power draw moved)."""
    fx = Path(__file__).resolve().parents[2] / "fixtures" / "h200x1"
    x = nvsmi.parse_q_xml((fx / "nvidia-smi-q-x.xml").read_text())
    t = nvsmi.parse_q((fx / "nvidia-smi-q.txt").read_text())
    assert (x["driver_version"], x["cuda_version"], x["attached_gpus"]) == ("580.159.04", "13.0", 1)
    (gx,), (gt,) = x["gpus"], t["gpus"]
    assert {k: v for k, v in gx.items() if k != "power_draw_w"} == {k: v for k, v in gt.items() if k != "power_draw_w"}
    assert gx["device_id"] == "0x233510DE" and gx["fabric"] == {"state": "N/A", "status": "N/A"}
    assert gx["pcie"]["gen_current"] == 5 and gx["pcie"]["width_current"] == 16
    assert gx["clock_event_reasons"]["HW Slowdown"] is False and gx["max_clocks_mhz"] == {"sm": 1980, "memory": 3201}


def test_q_xml_faults_read_through() -> None:
    fx = Path(__file__).resolve().parents[2] / "fixtures" / "h200x1"
    text = (fx / "nvidia-smi-q-x.xml").read_text()
    bad = (text.replace("<remapped_row_pending>No", "<remapped_row_pending>Yes")
           .replace("<current_link_width>16x", "<current_link_width>8x")
           .replace("<clocks_event_reason_hw_slowdown>Not Active", "<clocks_event_reason_hw_slowdown>Active"))
    (g,) = nvsmi.parse_q_xml(bad)["gpus"]
    assert g["remap"]["pending"] is True and g["pcie"]["width_current"] == 8
    assert g["clock_event_reasons"]["HW Slowdown"] is True


@pytest.mark.parametrize("text", ["", "<html/>", "==============NVSMI LOG=============="])
def test_q_xml_refuses_what_is_not_nvidia_smi_log(text: str) -> None:
    with pytest.raises(ValueError, match="nvidia-smi -q -x"):
        nvsmi.parse_q_xml(text)
