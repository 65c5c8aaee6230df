"""The pcie_link gate: which source a GPU's link reading comes from, each GPU verdict with its exact sentence (real
2x H200 probe document, edited), the replay counts over the run, and the NIC verdicts on real lspci/dmesg captures."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import pcie
from gridready.certify.result import GateStatus as S
from gridready.probe import kernel_log
from gridready.probe.offline import doc_from_outputs
from tests.unit.certify.fixtures_io import probe_quick, pub
from tests.unit.certify.test_gates_public import exp

H200 = exp("h200", 2, "passthrough")
G0 = "GPU 0 (0000:00:06.0)"
G1 = "GPU 1 (0000:00:07.0)"

# ---- where each reading comes from, in order of trust ----------------------------------------------------------

# (field, [(source, key)] first-trusted first); sources: query CSV, NVML, sysfs, `-q`, and the load samples
PRIORITY: list[tuple[str, list[tuple[str, str]]]] = [
    ("gen_max", [("nv", "gen_device_max"), ("qp", "gen_device_max"), ("sf", "gen_max"), ("nv", "gen_max"),
                 ("qp", "gen_max"), ("q", "pcie.link.gen.max")]),
    ("width_max", [("nv", "width_max"), ("sf", "width_max"), ("qp", "width_max"), ("q", "pcie.link.width.max")]),
    ("gen_idle", [("q", "pcie.link.gen.current"), ("qp", "gen_current"), ("sf", "gen_current"),
                  ("nv", "gen_current")]),
    ("width_idle", [("q", "pcie.link.width.current"), ("qp", "width_current"), ("sf", "width_current"),
                    ("nv", "width_current")]),
    ("gen_load", [("lnv", "gen_current"), ("lsf", "gen_current")]),
    ("width_load", [("lnv", "width_current"), ("lsf", "width_current")]),
]


def _row() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A GPU row whose every source holds a distinct value for every key (the value names source and key)."""
    src: dict[str, dict[str, Any]] = {s: {} for s in ("q", "nv", "sf", "qp", "lnv", "lsf")}
    n = 0
    for _, order in PRIORITY:
        for s, k in order:
            n += 1
            src[s][k] = 100 + n
    src["qp"]["replays"] = 7
    g = {"query": src["q"], "nvml": {"pcie": src["nv"]}, "sysfs": src["sf"], "q": {"pcie": src["qp"]},
         "torch": {"pcie_under_load": {"nvml": src["lnv"], "sysfs": src["lsf"]}}}
    return g, src


@pytest.mark.parametrize(("field", "order"), PRIORITY, ids=[f for f, _ in PRIORITY])
def test_each_reading_takes_the_most_trusted_source_present(field: str, order: list[tuple[str, str]]) -> None:
    g, src = _row()
    for s, k in order:
        assert pcie._gpu_link(g)[field] == src[s][k], (field, s, k)
        src[s][k] = "N/A"  # an unreadable value is passed over like an absent one
    assert pcie._gpu_link(g)[field] is None


def test_link_reading_with_no_sources_at_all() -> None:
    g = {"query": {}, "nvml": {}, "sysfs": None, "q": {}, "torch": {}}
    assert pcie._gpu_link(g) == {"gen_max": None, "width_max": None, "gen_idle": None, "width_idle": None,
                                 "gen_load": None, "width_load": None, "replays": None}
    g2, _ = _row()
    assert pcie._gpu_link(g2)["replays"] == 7


# ---- GPU verdicts -----------------------------------------------------------------------------------------------

def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def _gpu(res: list[Any], i: int) -> Any:
    return next(r for r in res if r.gpu == i)


def test_healthy_capture_passes_under_load() -> None:
    res = pcie.pcie_link(_doc(), H200)
    assert [(r.gpu, r.status, r.reason) for r in res] == [(0, S.PASS, f"{G0}: Gen5 x16 under load"),
                                                          (1, S.PASS, f"{G1}: Gen5 x16 under load")]
    r = res[0]
    assert r.gate == "pcie_link" and r.evidence == "torch.gpus[].pcie_under_load"
    assert r.expected.equals == "Gen5 x16" and r.expected.source == "catalog: H200-SXM-141GB"
    assert r.measured == {"gen_max": 5, "width_max": 16, "gen_idle": 5, "width_idle": 16, "gen_load": 5,
                          "width_load": 16, "replays": 0}


def _no_load(doc: dict[str, Any]) -> dict[str, Any]:
    for t in doc["torch"]["gpus"]:
        t.pop("pcie_under_load")
    return doc


def _set(doc: dict[str, Any], gpu: int, key: str, value: Any) -> None:
    """One link field of one GPU in every source of the document that reports it."""
    doc["nvidia_smi"]["query"][gpu][{"gen_max": "pcie.link.gen.max", "gen_current": "pcie.link.gen.current",
                                     "width_max": "pcie.link.width.max",
                                     "width_current": "pcie.link.width.current"}[key]] = value
    for part in (doc["nvidia_smi"]["q"]["gpus"][gpu]["pcie"], doc["nvml"]["gpus"][gpu]["pcie"],
                 doc["system"]["pcie_endpoints"][gpu + 1]):
        part[key] = value
        if key == "gen_max" and "gen_device_max" in part:
            part["gen_device_max"] = value


def test_idle_reading_alone_at_the_target_passes_without_load() -> None:
    res = pcie.pcie_link(_no_load(_doc()), H200)
    assert [(r.status, r.reason, r.evidence) for r in res] == [(S.PASS, f"{G0}: Gen5 x16", "raw.nvidia_smi_q"),
                                                               (S.PASS, f"{G1}: Gen5 x16", "raw.nvidia_smi_q")]


def test_idle_generation_below_the_target_only_warns_without_load() -> None:
    doc = _no_load(_doc())
    _set(doc, 1, "gen_current", 1)
    r = _gpu(pcie.pcie_link(doc, H200), 1)
    assert r.status is S.WARN
    assert r.reason == (f"{G1}: Gen1 at idle and no reading under load (capable of Gen5); run with torch to confirm "
                        "Gen5")


def test_load_generation_below_the_target_fails() -> None:
    doc = _doc()
    doc["torch"]["gpus"][0]["pcie_under_load"]["nvml"]["gen_current"] = 4
    r = _gpu(pcie.pcie_link(doc, H200), 0)
    assert r.status is S.FAIL and r.reason == f"{G0}: link at Gen4 under load, expected Gen5"
    doc["torch"]["gpus"][0]["pcie_under_load"]["nvml"]["gen_current"] = 5
    assert _gpu(pcie.pcie_link(doc, H200), 0).status is S.PASS


def test_load_width_falls_back_to_the_idle_width() -> None:
    doc = _doc()
    for part in doc["torch"]["gpus"][1]["pcie_under_load"].values():
        part.pop("width_current")
    r = _gpu(pcie.pcie_link(doc, H200), 1)
    assert r.status is S.PASS and r.reason == f"{G1}: Gen5 x16 under load"
    _set(doc, 1, "width_current", 8)
    r = _gpu(pcie.pcie_link(doc, H200), 1)
    assert r.status is S.FAIL and r.reason == f"{G1}: link trained at x8, expected x16"


def test_width_under_load_is_judged_over_the_idle_width() -> None:
    doc = _doc()
    doc["torch"]["gpus"][0]["pcie_under_load"]["nvml"]["width_current"] = 8
    r = _gpu(pcie.pcie_link(doc, H200), 0)
    assert r.status is S.FAIL and r.reason == f"{G0}: link trained at x8, expected x16"


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("gen_max", 4, "endpoint capable of only Gen4 x16, expected Gen5 x16"),
    ("width_max", 8, "endpoint capable of only Gen5 x8, expected Gen5 x16"),
    ("width_max", None, "endpoint capable of only Gen5 xNone, expected Gen5 x16"),
    ("gen_max", None, "PCIe link generation/width not readable"),
])
def test_endpoint_capability_below_the_catalog(key: str, value: Any, reason: str) -> None:
    doc = _doc()
    _set(doc, 1, key, value)
    r = _gpu(pcie.pcie_link(doc, H200), 1)
    assert r.status is (S.ERROR if "not readable" in reason else S.FAIL)
    assert r.reason == f"{G1}: {reason}"
    assert _gpu(pcie.pcie_link(doc, H200), 0).status is S.PASS


def test_width_readable_nowhere_is_an_error() -> None:
    doc = _no_load(_doc())
    _set(doc, 0, "width_current", None)
    r = _gpu(pcie.pcie_link(doc, H200), 0)
    assert r.status is S.ERROR and r.reason == f"{G0}: PCIe link generation/width not readable"


def test_no_gpu_readings_is_an_error() -> None:
    (r,) = pcie.pcie_link({}, H200)
    assert r.status is S.ERROR and r.reason == "no GPU PCIe link readings (nvidia-smi, NVML, sysfs all empty)"


def test_lspci_capture_alone_judges_its_gpus() -> None:
    doc = doc_from_outputs({"lspci_vvv": pub("lspci", "EXCERPT-gpu-cx7")})
    gpu = [r for r in pcie.pcie_link(doc, exp("h100", 1)) if r.hca is None]
    assert [(r.gpu, r.status, r.reason) for r in gpu] == [(0, S.PASS, "GPU 0 (0000:19:00.0): Gen5 x16")]
    assert gpu[0].measured["gen_max"] == 5 and gpu[0].measured["width_idle"] == 16


# ---- replays ----------------------------------------------------------------------------------------------------

def _replays(doc: dict[str, Any], gpu: int, n: int | None) -> None:
    doc["nvidia_smi"]["q"]["gpus"][gpu]["pcie"]["replays"] = n


def _after(doc: dict[str, Any], **per_gpu: int | None) -> dict[str, Any]:
    smi = copy.deepcopy(doc["nvidia_smi"])
    for gpu, n in per_gpu.items():
        smi["q"]["gpus"][int(gpu[1:])]["pcie"]["replays"] = n
    doc["after"] = {"nvidia_smi": smi}
    return doc


@pytest.mark.parametrize(("before", "after", "status", "reason"), [
    (10, 90, S.WARN, "90 PCIe replays since reset, 80 during this run (limit 80 per run)"),
    (5, 60, S.PASS, "Gen5 x16 under load"),
    (10, 91, S.FAIL, "81 PCIe replays during the certification run (limit 80; 91 since reset)"),
    (75, 90, S.WARN, "90 PCIe replays since reset, 15 during this run (limit 80 per run)"),
    (0, 80, S.PASS, "Gen5 x16 under load"),
    (0, None, S.ERROR, "PCIe replay counter not readable after the load"),
])
def test_replays_over_the_run(before: int, after: int | None, status: S, reason: str) -> None:
    doc = _doc()
    _replays(doc, 0, before)
    _after(doc, g0=after)
    r = _gpu(pcie.pcie_link(doc, H200), 0)
    assert r.status is status and r.reason == f"{G0}: {reason}"
    assert r.measured["replays"] == before and r.measured["replays_after"] == after


def test_gpu_missing_from_the_after_snapshot_cannot_count_the_run() -> None:
    doc = _after(_doc())
    doc["after"]["nvidia_smi"]["query"] = doc["after"]["nvidia_smi"]["query"][:1]
    doc["after"]["nvidia_smi"]["q"]["gpus"] = doc["after"]["nvidia_smi"]["q"]["gpus"][:1]
    res = pcie.pcie_link(doc, H200)
    assert _gpu(res, 0).status is S.PASS
    assert _gpu(res, 1).status is S.ERROR
    assert _gpu(res, 1).reason == f"{G1}: PCIe replay counter not readable after the load"


@pytest.mark.parametrize(("before", "status"), [(80, S.PASS), (81, S.WARN)])
def test_replays_since_reset_without_a_snapshot_only_warn(before: int, status: S) -> None:
    doc = _doc()
    _replays(doc, 1, before)
    r = _gpu(pcie.pcie_link(doc, H200), 1)
    assert r.status is status
    if status is S.WARN:
        assert r.reason == (f"{G1}: 81 PCIe replays since reset (limit 80 per run; no snapshot after the load to "
                            "count this run's)")
    assert "replays_after" not in r.measured


def test_unknown_replay_count_says_nothing() -> None:
    doc = _doc()
    _replays(doc, 0, None)
    _after(doc, g0=500)
    assert _gpu(pcie.pcie_link(doc, H200), 0).status is S.PASS


# ---- NICs -------------------------------------------------------------------------------------------------------

def _nic_doc(**nic: Any) -> dict[str, Any]:
    e = {"bdf": "0000:1a:00.0", "kind": "nic", "vendor": "0x15b3", "desc": "", "source": "sysfs", "gen_current": 5,
         "gen_max": 5, "width_current": 16, "width_max": 16, **nic}
    return {"system": {"pcie_endpoints": [e]}}


def _nics(doc: dict[str, Any]) -> list[Any]:
    return [r for r in pcie.pcie_link(doc, exp("h100", 1)) if r.hca]


def test_nic_at_its_capability_passes() -> None:
    (r,) = _nics(_nic_doc())
    assert (r.status, r.reason, r.hca, r.gpu) == (S.PASS, "NIC 0000:1a:00.0: Gen5 x16", "0000:1a:00.0", None)
    assert r.evidence == "system.sysfs" and r.unit is None
    assert r.expected.equals == "Gen5 x16" and r.expected.source == "the endpoint's own capability"
    assert r.measured == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}


@pytest.mark.parametrize(("nic", "reason"), [
    ({"gen_current": None}, "link at GenNone x16, capable of Gen5 x16"),
    ({"width_current": None}, "link at Gen5 xNone, capable of Gen5 x16"),
    ({"gen_current": 4}, "link at Gen4 x16, capable of Gen5 x16"),
])
def test_nic_below_its_capability_fails(nic: dict[str, Any], reason: str) -> None:
    (r,) = _nics(_nic_doc(**nic))
    assert r.status is S.FAIL and r.reason == f"NIC 0000:1a:00.0: {reason}"


@pytest.mark.parametrize("nic", [{"gen_max": None}, {"width_max": None},
                                 {"vendor": "0x14e4", "desc": "Broadcom BCM5720", "width_current": 1}])
def test_nics_not_judged(nic: dict[str, Any]) -> None:
    assert _nics(_nic_doc(**nic)) == []


def test_lspci_nics_are_judged_once_with_sysfs_first() -> None:
    doc = doc_from_outputs({"lspci_vvv": pub("lspci", "EXCERPT-gpu-cx7")})
    res = _nics(doc)
    assert [(r.hca, r.status, r.evidence) for r in res] == [("0000:1a:00.0", S.PASS, "system.lspci"),
                                                          ("0000:1b:00.0", S.PASS, "system.lspci")]
    doc["system"]["pcie_endpoints"] = _nic_doc(width_current=8)["system"]["pcie_endpoints"]
    res = _nics(doc)
    assert [(r.hca, r.status, r.evidence) for r in res] == [("0000:1a:00.0", S.FAIL, "system.sysfs"),
                                                          ("0000:1b:00.0", S.PASS, "system.lspci")]


def test_mlx5_limited_line_fails_a_nic_without_link_readings() -> None:
    doc = doc_from_outputs({"kernel_log": pub("dmesg", "FAIL-xid94-xid64")})
    (r,) = _nics(doc)
    assert (r.status, r.hca, r.evidence) == (S.FAIL, "0000:9c:00.0", "raw.kernel_log")
    assert r.reason == "NIC 0000:9c:00.0: kernel reports bandwidth limited by 32.0 GT/s PCIe x8 at 0000:97:01.0"
    assert r.measured == "32.0 GT/s PCIe x8"
    doc["system"] = _nic_doc(bdf="0000:9c:00.0")["system"]
    (judged,) = _nics(doc)  # the endpoint's own readings decide
    assert judged.status is S.PASS and judged.evidence == "system.sysfs"


def test_non_nic_limited_line_is_no_nic_fault() -> None:
    assert _nics(doc_from_outputs({"kernel_log": pub("dmesg", "HEALTHY-non-NIC")})) == []


# The kernel's notice in its other forms (drivers/pci/pci.c __pcie_print_link_status): before 5.3 the speed reads
# "8 GT/s" without "PCIe"; journald and syslog prefixes stand before the driver name. Each is the same capped NIC.
CAPPED_FORMS = [
    "[    0.349668] mlx5_core 0001:08:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at "
    "0001:00:00.0 (capable of 126.016 Gb/s with 8 GT/s x16 link)",
    "Feb 14 05:03:41 gpu-1 kernel: mlx5_core 0001:08:00.0: 63.008 Gb/s available PCIe bandwidth, limited by "
    "8.0 GT/s PCIe x8 link at 0001:00:00.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)",
    "Wed Aug 12 17:30:58 2026 kern.info kernel: [    3.027370] mlx5_core 0001:08:00.0: 63.008 Gb/s available PCIe "
    "bandwidth, limited by 8.0 GT/s PCIe x8 link at 0001:00:00.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 "
    "link)",
]


@pytest.mark.parametrize("line", CAPPED_FORMS)
def test_every_form_of_the_limited_notice_fails_the_nic(line: str) -> None:
    (r,) = _nics(doc_from_outputs({"kernel_log": line}))
    assert (r.status, r.hca, r.evidence) == (S.FAIL, "0001:08:00.0", "raw.kernel_log")
    assert "limited by 8" in r.reason and "x8 at 0001:00:00.0" in r.reason


def test_enumeration_line_fails_an_address_lspci_names_a_connectx() -> None:
    doc = doc_from_outputs({"lspci_vvv": pub("lspci", "EXCERPT-gpu-cx7")})
    nic = next(e for e in doc["system"]["lspci"]["endpoints"] if e["kind"] == "nic")
    for e in doc["system"]["lspci"]["endpoints"]:
        e["gen_max"] = e["width_max"] = None  # no link readings: the kernel line alone speaks for it
    line = (f"[    1.0] pci {nic['bdf']}: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at "
            "0000:00:01.0 (capable of 126.016 Gb/s with 8 GT/s x16 link)")
    doc["kernel_log"] = kernel_log.parse(line)
    (r,) = [r for r in _nics(doc) if r.hca == nic["bdf"]]
    assert r.status is S.FAIL and r.evidence == "raw.kernel_log"


def test_the_unlimited_form_is_no_notice() -> None:
    line = "[   18.467950] mlx5_core 0000:05:00.0: 63.008 Gb/s available PCIe bandwidth (8 GT/s x8 link)"
    assert _nics(doc_from_outputs({"kernel_log": line})) == []
