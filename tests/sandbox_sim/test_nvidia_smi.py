"""Simulated nvidia-smi against the real 2x H200 outputs (tests/fixtures/h200x2) and per fault."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from sandbox.profile import HardwareProfile

from .conftest import FIXTURES, call

FX = FIXTURES / "h200x2"
QUERY = (FX / "README.md").read_text().split("--query-gpu=")[1].split(" --format")[0]


def smi(*args: str) -> str:
    rc, out = call("nvidia_smi", list(args))
    assert rc == 0, out
    return out


def rows(csv: str) -> list[list[str]]:
    return [line.split(", ") for line in csv.strip().splitlines()]


def test_table_has_the_real_layout(healthy):
    out = smi().splitlines()
    real = (FX / "nvidia-smi.txt").read_text().splitlines()
    assert out[0].startswith("# gridready-sim: simulated output")
    assert out[3] == real[2]  # the NVIDIA-SMI / Driver / CUDA line (same versions as the fixture machine)
    assert out[4:9] == real[3:8]
    gpu_rows = [line for line in out if re.match(r"\|\s+\d+\s+NVIDIA H200", line)]
    assert len(gpu_rows) == 8
    assert {len(line) for line in out[2:] if line.startswith(("|", "+"))} == {len(real[2])}


def test_query_gpu_csv_matches_the_fixture_header_and_values(healthy):
    out = smi(f"--query-gpu={QUERY}", "--format=csv")
    real = (FX / "nvidia-smi-query-gpu.csv").read_text()
    assert out.splitlines()[0] == real.splitlines()[0]
    body = rows(out)[1:]
    assert len(body) == 8
    ref = rows(real)[1]
    for r in body:
        assert len(r) == len(ref)
        assert r[1:2] + r[3:] == ref[1:2] + ref[3:]  # all but index and bus id: identical to the real H200


def test_query_formats(healthy):
    assert (
        smi("--query-gpu=memory.total,power.limit", "--format=csv,noheader,nounits").splitlines()[0] == "143771, 700.00"
    )
    assert smi("--query-gpu=pci.device_id", "--format=csv,noheader").strip().splitlines()[0] == "0x233510DE"
    rc, out = call("nvidia_smi", ["--query-gpu=not.a.field", "--format=csv"])
    assert rc == 2 and "is not a valid field" in out


def test_pcie_downtrained_changes_only_that_gpu(use_profile):
    use_profile({"kind": "pcie_downtrained", "gpu": 3})
    body = rows(smi("--query-gpu=index,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,"
                    "pcie.link.width.max", "--format=csv,noheader"))  # fmt: skip
    assert body[3] == ["3", "4", "8", "5", "16"]
    assert all(r[1:] == ["5", "16", "5", "16"] for i, r in enumerate(body) if i != 3)
    q = smi("-q", "-i", "3")
    assert re.search(r"Link Width\n\s+Max\s+: 16x\n\s+Current\s+: 8x", q)


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("hw_slowdown", "clocks_event_reasons.hw_slowdown", "Active"),
        ("power_brake", "clocks_event_reasons.hw_power_brake_slowdown", "Active"),
        ("thermal_throttle", "clocks_event_reasons.hw_thermal_slowdown", "Active"),
        ("thermal_throttle", "clocks_event_reasons.sw_thermal_slowdown", "Active"),
        ("thermal_throttle", "temperature.gpu", "88"),
        ("ecc_uncorrectable", "ecc.errors.uncorrected.volatile.dram", "1"),
        ("ecc_uncorrectable", "ecc.errors.uncorrected.aggregate.total", "1"),
        ("row_remap_pending", "remapped_rows.pending", "Yes"),
    ],
)
def test_gpu_faults_change_their_field_on_their_gpu(use_profile, kind, field, value):
    use_profile({"kind": kind, "gpu": 5})
    body = rows(smi(f"--query-gpu={field}", "--format=csv,noheader,nounits"))
    assert body[5] == [value]
    assert all(r != [value] for i, r in enumerate(body) if i != 5)


def test_event_reason_mask(use_profile):
    use_profile({"kind": "power_brake", "gpu": 0})
    masks = [r[0] for r in rows(smi("--query-gpu=clocks_event_reasons.active", "--format=csv,noheader"))]
    assert masks[0] == "0x0000000000000088" and masks[1] == "0x0000000000000001"


def test_remapped_rows_query(use_profile):
    use_profile({"kind": "row_remap_pending", "gpu": 2})
    out = smi("--query-remapped-rows=gpu_bus_id,remapped_rows.uncorrectable,remapped_rows.pending,"
              "remapped_rows.failure", "--format=csv")  # fmt: skip
    head, *body = rows(out)
    assert head == ["gpu_bus_id", "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure"]
    assert body[2][1:] == ["1", "1", "0"] and body[0][1:] == ["0", "0", "0"]


def _sections(text: str) -> list[str]:
    return [
        ln.split(":")[0].rstrip() for ln in text.splitlines() if ln.startswith("    ") and not ln.startswith("     ")
    ]


def test_q_has_the_real_sections_and_marker(healthy):
    out = smi("-q")
    real = (FX / "nvidia-smi-q.txt").read_text()
    assert "Simulated                                              : Yes" in out
    assert _sections(out.split("GPU 00000000:2A:00.0")[0].split("GPU 00000000:18:00.0")[1]) == _sections(
        real.split("GPU 00000000:00:07.0")[0]
    )
    assert out.count("\nGPU 00000000:") == 8


def _tag_paths(el: ET.Element, prefix: str = "") -> list[str]:
    out = []
    for child in el:
        path = f"{prefix}/{child.tag}"
        out += [path, *_tag_paths(child, path)]
    return out


def test_q_xml_has_nvidias_tags_and_is_marked(use_profile):
    use_profile({"kind": "pcie_downtrained", "gpu": 1})
    text = smi("-q", "-x")
    assert "<!-- gridready-sim: simulated output" in text
    root = ET.fromstring(text)
    gpus = root.findall("gpu")
    assert len(gpus) == 8
    real = ET.parse(FX.parent / "h200x1" / "nvidia-smi-q-x.xml").getroot()
    assert _tag_paths(gpus[0]) == _tag_paths(real.find("gpu"))  # NVIDIA's element names and order, nothing added
    assert [c.tag for c in root if c.tag != "gpu"] == [c.tag for c in real if c.tag != "gpu"]
    assert gpus[1].findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "8x"
    assert gpus[0].findtext("pci/pci_gpu_link_info/pcie_gen/current_link_gen") == "5"
    assert gpus[0].findtext("fabric/state") == "Completed"


def test_q_xml_and_text_read_the_same(use_profile):
    from gridready.probe import nvsmi

    use_profile({"kind": "row_remap_pending", "gpu": 2}, {"kind": "hw_slowdown", "gpu": 3})
    x, t = nvsmi.parse_q_xml(smi("-q", "-x")), nvsmi.parse_q(smi("-q"))
    for gx, gt in zip(x["gpus"], t["gpus"], strict=True):
        assert {k: v for k, v in gx.items() if k != "power_draw_w"} == {
            k: v for k, v in gt.items() if k != "power_draw_w"}
    assert x["gpus"][2]["remap"]["pending"] is True and x["gpus"][3]["clock_event_reasons"]["HW Slowdown"] is True


def test_list_and_topology(healthy):
    assert len(smi("-L").splitlines()) == 8
    topo = smi("topo", "-m")
    assert topo.count("NV18") == 8 * 7 and "NIC Legend:" in topo and "  NIC7: mlx5_7" in topo
    gpu0 = next(line for line in topo.splitlines() if line.startswith("GPU0\t")).split("\t")
    assert gpu0[9] == "PIX"  # GPU0 sits with NIC0 (rail alignment)


def test_nvlink_inactive(use_profile):
    use_profile({"kind": "nvlink_inactive", "gpu": 6})
    out = smi("nvlink", "-s")
    assert "NVML: Unable to retrieve NVLink information as all links are inactive" in out
    assert out.count("26.562 GB/s") == 7 * 18
    row6 = next(line for line in smi("topo", "-m").splitlines() if line.startswith("GPU6\t")).split("\t")
    assert row6[1:9] == ["SYS"] * 4 + ["NODE", "NODE", " X ", "NODE"]
    use_profile({"kind": "nvlink_inactive", "gpu": 2, "count": 4})
    assert smi("nvlink", "-s", "-i", "2").count("<inactive>") == 4
    assert "NV14" in smi("topo", "-m")


def test_nvlink_status_matches_the_fixture(healthy):
    out = smi("nvlink", "-s", "-i", "0").splitlines()
    real = (FX / "nvidia-smi-nvlink.txt").read_text().splitlines()
    assert out[2:20] == real[1:19] and out[1].startswith("GPU 0: NVIDIA H200 (UUID: GPU-")


def test_nvml_mismatch_after_an_upgrade_without_reboot(tmp_path, monkeypatch):
    prof = HardwareProfile.sample("sim-up").model_copy(update={"loaded_driver": "580.95.05"})
    monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(prof.write(tmp_path / "p.json")))
    rc, out = call("nvidia_smi", ["--query-gpu=driver_version", "--format=csv,noheader"])
    assert rc == 18  # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    assert out.startswith("Failed to initialize NVML: Driver/library version mismatch")
