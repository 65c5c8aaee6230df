"""HCA gate verdicts by value: status, reason an operator reads, measured/expected, unit, HCA and evidence key."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify.hca import (
    counter_gate,
    firmware_gate,
    gdr_gate,
    ibstat_gate,
    pcie_gate,
    port_gates,
)
from gridready.spec import Nic
from gridready.spec.fabric import FabricSettings

IB400 = Nic(name="mlx5_0", kind="infiniband", rate_gbps=400)


def _r(result) -> dict[str, Any]:
    d = result.model_dump(mode="json")
    d.pop("node")
    return d


def _exp(floor=None, ceiling=None, equals=None, source="spec") -> dict[str, Any]:
    return {"floor": floor, "ceiling": ceiling, "equals": equals, "source": source}


def _res(gate, status, reason, *, hca="mlx5_0", evidence=None, measured=None, expected=None, unit=None,
         required=True) -> dict[str, Any]:
    return {"gate": gate, "gpu": None, "hca": hca, "status": status, "measured": measured, "expected": expected,
            "unit": unit, "reason": reason, "evidence": evidence, "required": required, "waived": False}


def _sysfs(ports: dict[str, dict], fw="28.41.1000", ca="MT4129") -> dict[str, Any]:
    return {"sysfs": {"mlx5_0": {"fw_ver": fw, "hca_type": ca, "ports": ports}}}


# ---------------------------------------------------------------- port gates

def _port_results(view_ev: str, where: str, state, phys, rate, layer, statuses, reasons, rate_val, want="InfiniBand"):
    kw = {"evidence": view_ev}
    return [
        _res("hca_present", "pass", "mlx5_0 present", **kw),
        _res("hca_port_state", statuses[0], f"{where} state {reasons[0]}", measured=state,
             expected=_exp(equals="ACTIVE"), **kw),
        _res("hca_phys_state", statuses[1], f"{where} physical state {reasons[1]}", measured=phys,
             expected=_exp(equals="LinkUp"), **kw),
        _res("hca_rate", statuses[2], f"{where} rate {reasons[2]} (spec 400 Gb/s)", measured=rate_val,
             expected=_exp(floor=400), unit="Gb/s", **kw),
        _res("hca_link_layer", statuses[3], f"{where} link layer {reasons[3]}", measured=layer,
             expected=_exp(equals=want), **kw),
    ]


def test_sysfs_port_all_up_passes_every_port_gate():
    port = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand"}
    got = [_r(r) for r in port_gates("n1", IB400, _sysfs({"1": port, "2": {"state": "1: DOWN"}}))]
    assert got == _port_results(
        "hca.sysfs.mlx5_0.ports.1", "mlx5_0 port 1", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)",
        "InfiniBand", ["pass"] * 4,
        ["4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"], 400.0)


def test_sysfs_port_down_fails_each_gate_with_what_was_expected():
    port = {"state": "1: DOWN", "phys_state": "3: Disabled", "rate": "200 Gb/sec (4X HDR)",
            "link_layer": "Ethernet"}
    got = [_r(r) for r in port_gates("n1", IB400, _sysfs({"1": port}))]
    assert got == _port_results(
        "hca.sysfs.mlx5_0.ports.1", "mlx5_0 port 1", "1: DOWN", "3: Disabled", "200 Gb/sec (4X HDR)",
        "Ethernet", ["fail"] * 4,
        ["1: DOWN, expected ACTIVE", "3: Disabled, expected LinkUp", "200 Gb/sec (4X HDR)",
         "Ethernet, spec says InfiniBand"], 200.0)


def test_unreadable_port_files_are_errors_never_passes():
    got = [_r(r) for r in port_gates("n1", IB400, _sysfs({"1": {"counters": {}}}))]
    assert got == _port_results(
        "hca.sysfs.mlx5_0.ports.1", "mlx5_0 port 1", None, None, None, None, ["error"] * 4,
        ["unreadable, expected ACTIVE", "unreadable, expected LinkUp", "unreadable",
         "unreadable, spec says InfiniBand"], None)


def test_empty_port_files_are_errors_never_failures():
    """probe/hca._read gives "" for an empty sysfs file: unreadable, as a missing one (it read as a failure)."""
    port = {"state": "", "phys_state": "", "rate": "", "link_layer": "", "counters": {}}
    got = [_r(r) for r in port_gates("n1", IB400, _sysfs({"1": port}))]
    assert got == _port_results(
        "hca.sysfs.mlx5_0.ports.1", "mlx5_0 port 1", "", "", None, None, ["error"] * 4,
        ["unreadable, expected ACTIVE", "unreadable, expected LinkUp", "unreadable",
         "unreadable, spec says InfiniBand"], None)


@pytest.mark.parametrize(("rate", "status", "value"), [
    ("400 Gb/sec (4X NDR)", "pass", 400.0),
    ("800", "pass", 800.0),
    ("399.9", "fail", 399.9),
    ("  200 Gb/sec", "fail", 200.0),
    ("N/A", "error", None),
])
def test_rate_against_the_spec_floor(rate, status, value):
    port = {"state": "ACTIVE", "phys_state": "LinkUp", "rate": rate, "link_layer": "InfiniBand"}
    g = port_gates("n1", IB400, _sysfs({"1": port}))[3]
    assert (g.gate, g.status, g.measured) == ("hca_rate", status, value)
    assert g.reason == f"mlx5_0 port 1 rate {rate} (spec 400 Gb/s)"


@pytest.mark.parametrize(("kind", "layer", "status"), [
    ("roce", "Ethernet", "pass"), ("ethernet", "Ethernet", "pass"), ("roce", "InfiniBand", "fail"),
    ("infiniband", "InfiniBand", "pass"),
])
def test_link_layer_per_nic_kind(kind, layer, status):
    nic = Nic(name="mlx5_0", kind=kind, rate_gbps=400)
    port = {"state": "ACTIVE", "phys_state": "LinkUp", "rate": "400", "link_layer": layer}
    assert port_gates("n1", nic, _sysfs({"1": port}))[4].status == status


@pytest.mark.parametrize(("state", "phys", "statuses"), [
    ("Active", "Link Up", ("pass", "pass")),       # ibstat spelling
    ("4: ACTIVE", "5: LinkUp", ("pass", "pass")),  # sysfs spelling
    ("2: INIT", "5: LinkUp", ("fail", "pass")),
    ("Active", "Polling", ("pass", "fail")),
])
def test_state_words_from_sysfs_and_ibstat(state, phys, statuses):
    port = {"state": state, "phys_state": phys, "rate": "400", "link_layer": "InfiniBand"}
    res = port_gates("n1", IB400, _sysfs({"1": port}))
    assert (res[1].status, res[2].status) == statuses


def test_lowest_port_is_judged_when_there_is_no_port_1():
    port = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400", "link_layer": "InfiniBand"}
    res = port_gates("n1", IB400, _sysfs({"3": {"state": "1: DOWN"}, "2": port}))
    assert {r.evidence for r in res} == {"hca.sysfs.mlx5_0.ports.2"}
    assert res[1].reason == "mlx5_0 port 2 state 4: ACTIVE" and res[1].status == "pass"


def _ibstat(cas: dict, errors: list[str] | None = None) -> dict[str, Any]:
    return {"ibstat": {"rc": 0, "parsed": {"cas": cas, "errors": errors or []}}}


def test_ibstat_view_when_sysfs_has_no_ports():
    p = {"state": "Down", "physical_state": "Polling", "rate": "400", "link_layer": "InfiniBand"}
    up = {"state": "Active", "physical_state": "LinkUp", "rate": "400", "link_layer": "InfiniBand"}
    data = _ibstat({"mlx5_0": {"ca_type": "MT4129", "firmware": "28.41.1000", "ports": {"2": up, "1": p}}})
    data["sysfs"] = {"mlx5_0": {"ports": {}}}
    got = [_r(r) for r in port_gates("n1", IB400, data)]
    assert got == _port_results(
        "hca.ibstat.mlx5_0.port1", "mlx5_0 port 1", "Down", "Polling", "400", "InfiniBand",
        ["fail", "fail", "pass", "pass"],
        ["Down, expected ACTIVE", "Polling, expected LinkUp", "400", "InfiniBand"], 400.0)
    data["ibstat"]["parsed"]["cas"]["mlx5_0"]["ports"] = {"3": p, "2": up}
    res = port_gates("n1", IB400, data)
    assert {r.evidence for r in res} == {"hca.ibstat.mlx5_0.port2"} and res[1].status == "pass"


def test_missing_hca_fails_presence_only_and_quotes_ibstat():
    data = _ibstat({"mlx5_1": {"ports": {"1": {}}}}, ["ibpanic: [1] main: 'mlx5_8' IB device can't be found"])
    assert [_r(r) for r in port_gates("n1", IB400, data)] == [_res(
        "hca_present", "fail", "mlx5_0 is in the spec but not on the node "
        "(ibstat: ibpanic: [1] main: 'mlx5_8' IB device can't be found)", evidence="hca")]
    assert [_r(r) for r in port_gates("n1", IB400, {"sysfs": {"mlx5_0": {"ports": {}}}})] == [_res(
        "hca_present", "fail", "mlx5_0 is in the spec but not on the node", evidence="hca")]


# ---------------------------------------------------------------- counters

def _snap(port: dict[str, int], pname="1") -> dict[str, Any]:
    return {"counters": {"mlx5_0": {pname: port}}}


CKW = {"evidence": "hca.counters.mlx5_0"}


@pytest.mark.parametrize(("before", "after"), [
    (None, _snap({"link_downed": 0})), (_snap({"link_downed": 0}), None), ({}, {}),
    (_snap({"link_downed": 0}), {"counters": {"mlx5_1": {"1": {"link_downed": 0}}}}),
])
def test_counters_without_both_snapshots_are_an_error(before, after):
    assert _r(counter_gate("n1", "mlx5_0", before, after, FabricSettings())) == _res(
        "hca_counters", "error", "mlx5_0: no counter snapshots before and after the run", **CKW)


def test_counters_with_no_limited_counter_readable_are_an_error():
    b, a = _snap({"port_xmit_data": 1}), _snap({"port_xmit_data": 9})
    assert _r(counter_gate("n1", "mlx5_0", b, a, FabricSettings())) == _res(
        "hca_counters", "error", "mlx5_0 port 1: no error counters readable", **CKW)


@pytest.mark.parametrize(("b", "a", "status", "tail"), [
    ({"symbol_error": 5, "link_downed": 3}, {"symbol_error": 15, "link_downed": 3}, "pass", None),  # at the limit
    ({"symbol_error": 5, "link_downed": 3}, {"symbol_error": 16, "link_downed": 3}, "fail",
     "symbol_error +11 (limit 10)"),
    ({"symbol_error": 5, "link_downed": 3}, {"symbol_error": 5, "link_downed": 4}, "fail",
     "link_downed +1 (limit 0)"),
    ({"port_xmit_discards": 0}, {"port_xmit_discards": 100}, "pass", None),
    ({"port_xmit_discards": 0}, {"port_xmit_discards": 101}, "fail", "port_xmit_discards +101 (limit 100)"),
])
def test_counter_growth_against_its_limit(b, a, status, tail):
    g = counter_gate("n1", "mlx5_0", _snap(b), _snap(a), FabricSettings())
    deltas = {c: a[c] - b[c] for c in a}
    if status == "pass":
        assert _r(g) == _res("hca_counters", "pass", "mlx5_0 port 1: error counters steady over the run",
                             measured=deltas, **CKW)
    else:
        assert _r(g) == _res("hca_counters", "fail", f"mlx5_0 port 1: {tail}", measured=deltas,
                             expected=_exp(ceiling=0), **CKW)


def test_saturated_counters_fail_even_without_growth_and_are_listed_after_growth():
    b = {"link_downed": 255, "link_error_recovery": 255, "symbol_error": 65535, "port_rcv_errors": 0}
    a = {"link_downed": 255, "link_error_recovery": 255, "symbol_error": 65535, "port_rcv_errors": 11}
    g = counter_gate("n1", "mlx5_0", _snap(b, "2"), _snap(a, "2"), FabricSettings())
    fix = "(flaps can no longer be seen; clear it after repair)"
    assert _r(g) == _res(
        "hca_counters", "fail",
        f"mlx5_0 port 2: port_rcv_errors +11 (limit 10); link_downed saturated at 255 {fix}; "
        f"link_error_recovery saturated at 255 {fix}; symbol_error saturated at 65535 {fix}",
        measured={"link_downed": 0, "link_error_recovery": 0, "symbol_error": 0, "port_rcv_errors": 11,
                  "link_downed_total": 255, "link_error_recovery_total": 255, "symbol_error_total": 65535},
        expected=_exp(ceiling=0), **CKW)


def test_counter_port_1_is_preferred_and_limits_come_from_the_spec():
    b = {"counters": {"mlx5_0": {"1": {"symbol_error": 0}, "0": {"symbol_error": 0}}}}
    a = {"counters": {"mlx5_0": {"1": {"symbol_error": 3}, "0": {"symbol_error": 99}}}}
    strict = FabricSettings(counter_limits={"symbol_error": 2})
    assert counter_gate("n1", "mlx5_0", b, a, strict).reason == "mlx5_0 port 1: symbol_error +3 (limit 2)"
    assert counter_gate("n1", "mlx5_0", b, a, FabricSettings()).status == "pass"
    # a counter at 254 is one below saturation: still counting
    near = _snap({"link_downed": 254})
    assert counter_gate("n1", "mlx5_0", near, near, FabricSettings()).status == "pass"


# ---------------------------------------------------------------- firmware

def _fw_data(fws: dict[str, tuple[str | None, str | None]]) -> dict[str, Any]:
    up = {"1": {"state": "ACTIVE"}}
    return {"sysfs": {h: {"fw_ver": fw, "hca_type": ca, "ports": up} for h, (fw, ca) in fws.items()}}


def _nics(*names: str) -> list[Nic]:
    return [Nic(name=n, kind="infiniband", rate_gbps=400) for n in names]


def test_firmware_unreadable_is_an_error():
    data = _fw_data({"mlx5_0": (None, "MT4129")})
    assert _r(firmware_gate("n1", _nics("mlx5_0", "mlx5_9"), data, FabricSettings())) == _res(
        "hca_firmware", "error", "no HCA firmware version readable", hca=None, evidence="hca.sysfs")


def test_firmware_below_the_spec_minimum_fails_naming_the_hca():
    data = _fw_data({"mlx5_0": ("28.41.1000", "MT4129"), "mlx5_1": ("28.42.1000", "MT4129"),
                     "mlx5_2": ("20.1.1", "MT4123")})
    s = FabricSettings(firmware={"MT4129": "28.42.1000"})
    assert _r(firmware_gate("n1", _nics("mlx5_0", "mlx5_1", "mlx5_2"), data, s)) == _res(
        "hca_firmware", "fail", "firmware below the spec: mlx5_0 28.41.1000 < 28.42.1000", hca=None,
        measured={"mlx5_0": "28.41.1000", "mlx5_1": "28.42.1000", "mlx5_2": "20.1.1"},
        expected=_exp(equals={"MT4129": "28.42.1000"}))


def test_firmware_versions_compare_numerically_and_equal_passes():
    data = _fw_data({"mlx5_0": ("28.100.0", "MT4129"), "mlx5_1": ("28.100.0", "MT4129")})
    s = FabricSettings(firmware={"MT4129": "28.42.1000"})
    assert _r(firmware_gate("n1", _nics("mlx5_0", "mlx5_1"), data, s)) == _res(
        "hca_firmware", "pass", "HCA firmware consistent and at the spec's minimum", hca=None,
        measured={"mlx5_0": "28.100.0", "mlx5_1": "28.100.0"})
    eq = FabricSettings(firmware={"MT4129": "28.100.0"})
    assert firmware_gate("n1", _nics("mlx5_0", "mlx5_1"), data, eq).status == "pass"


def test_mixed_firmware_within_a_ca_type_warns():
    data = _fw_data({"mlx5_0": ("28.41.1000", "MT4129"), "mlx5_1": ("28.39.1002", "MT4129"),
                     "mlx5_2": ("20.1.1", "MT4123"), "mlx5_3": ("1.0", None), "mlx5_4": ("1.1", None)})
    assert _r(firmware_gate("n1", _nics("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"), data,
                            FabricSettings())) == _res(
        "hca_firmware", "warn",
        "mixed firmware within a CA type: MT4129: 28.39.1002, 28.41.1000; ?: 1.0, 1.1", hca=None,
        measured={"mlx5_0": "28.41.1000", "mlx5_1": "28.39.1002", "mlx5_2": "20.1.1", "mlx5_3": "1.0",
                  "mlx5_4": "1.1"})


def test_one_firmware_per_ca_type_passes_without_a_spec_minimum():
    data = _fw_data({"mlx5_0": ("28.41.1000", "MT4129"), "mlx5_1": ("20.1.1", "MT4123")})
    assert _r(firmware_gate("n1", _nics("mlx5_0", "mlx5_1"), data, FabricSettings())) == _res(
        "hca_firmware", "pass", "HCA firmware consistent", hca=None,
        measured={"mlx5_0": "28.41.1000", "mlx5_1": "20.1.1"})


# ---------------------------------------------------------------- PCIe

def _pcie(speed, width) -> dict[str, Any]:
    return {"sysfs": {"mlx5_0": {"pcie": {"current_link_speed": speed, "current_link_width": width}}}}


PKW = {"evidence": "hca.sysfs.mlx5_0.pcie"}


@pytest.mark.parametrize(("speed", "width", "status", "reason", "measured"), [
    ("32.0 GT/s PCIe", "16", "pass", "mlx5_0 PCIe 32 GT/s x16", "32GT/s x16"),
    ("64.0 GT/s PCIe", "32", "pass", "mlx5_0 PCIe 64 GT/s x32", "64GT/s x32"),
    ("16.0 GT/s PCIe", "16", "fail", "mlx5_0 PCIe 16 GT/s x16, expected 32 GT/s x16", "16GT/s x16"),
    ("32.0 GT/s PCIe", "8", "fail", "mlx5_0 PCIe 32 GT/s x8, expected 32 GT/s x16", "32GT/s x8"),
    ("32 GT/s", "15", "fail", "mlx5_0 PCIe 32 GT/s x15, expected 32 GT/s x16", "32GT/s x15"),
])
def test_pcie_link_against_gen5_x16(speed, width, status, reason, measured):
    assert _r(pcie_gate("n1", IB400, _pcie(speed, width), FabricSettings())) == _res(
        "hca_pcie_link", status, reason, measured=measured, expected=_exp(equals="32GT/s x16"), **PKW)


@pytest.mark.parametrize(("gen", "speed", "status"), [
    (4, "16.0 GT/s PCIe", "pass"), (4, "8.0 GT/s PCIe", "fail"), (6, "32.0 GT/s PCIe", "fail"),
    (9, "32.0 GT/s PCIe", "pass"), (9, "16.0 GT/s PCIe", "fail"),  # unknown generation: Gen5 speed
])
def test_pcie_generation_from_the_spec(gen, speed, status):
    assert pcie_gate("n1", IB400, _pcie(speed, "16"), FabricSettings(hca_pcie_gen=gen)).status == status


@pytest.mark.parametrize("data", [_pcie(None, "16"), _pcie("32.0 GT/s PCIe", None), _pcie("Unknown", "16"),
                                  _pcie("32.0 GT/s PCIe", ""), {}, {"sysfs": {"mlx5_0": {}}}])
def test_pcie_unreadable_is_an_error(data):
    assert _r(pcie_gate("n1", IB400, data, FabricSettings())) == _res(
        "hca_pcie_link", "error", "mlx5_0: PCIe link speed/width not readable", **PKW)


# ---------------------------------------------------------------- GDR bandwidth

GKW = {"evidence": "hca.ib_write_bw.mlx5_0", "unit": "Gb/s"}
RATE90 = _exp(floor=360.0, source="90% of rate")


def _bw(run: dict | None) -> dict[str, Any]:
    return {"ib_write_bw": {} if run is None else {"mlx5_0": run}}


def test_gdr_not_measured_is_skipped_not_required():
    assert _r(gdr_gate("n1", IB400, {}, FabricSettings(), None)) == _res(
        "hca_gdr_bw", "skipped", "mlx5_0: GDR bandwidth not measured", required=False, expected=RATE90, **GKW)


def test_gdr_missing_run_for_the_hca_is_an_error():
    assert _r(gdr_gate("n1", IB400, _bw(None), FabricSettings(), None)) == _res(
        "hca_gdr_bw", "error", "mlx5_0: no ib_write_bw run", expected=RATE90, **GKW)


def test_gdr_without_perftest_is_skipped():
    run = {"rc": None, "error": "ib_write_bw not found (perftest)", "parsed": None}
    assert _r(gdr_gate("n1", IB400, _bw(run), FabricSettings(), None)) == _res(
        "hca_gdr_bw", "skipped", "mlx5_0: ib_write_bw not found (perftest)", required=False, expected=RATE90, **GKW)


@pytest.mark.parametrize(("run", "why"), [
    ({"rc": 1, "error": None, "parsed": {"avg_gbits": None}}, "exit 1, no result line"),
    ({"rc": None, "error": "timed out after 35s", "parsed": None}, "timed out after 35s"),
    ({"rc": 0, "error": "device not found", "parsed": {}}, "device not found"),
])
def test_gdr_run_without_a_result_is_an_error(run, why):
    assert _r(gdr_gate("n1", IB400, _bw(run), FabricSettings(), None)) == _res(
        "hca_gdr_bw", "error", f"mlx5_0: ib_write_bw failed ({why})", expected=RATE90, **GKW)


@pytest.mark.parametrize(("gpu", "bw", "status", "where", "pct"), [
    (0, 360.0, "pass", " GPU0", "90%"),
    (3, 359.9, "fail", " GPU3", "90%"),
    (None, 392.5, "pass", " (host memory)", "98%"),
])
def test_gdr_bandwidth_against_the_rate_floor(gpu, bw, status, where, pct):
    run = {"rc": 0, "error": None, "gpu": gpu, "parsed": {"avg_gbits": bw}}
    assert _r(gdr_gate("n1", IB400, _bw(run), FabricSettings(), None)) == _res(
        "hca_gdr_bw", status, f"mlx5_0{where} ib_write_bw {bw:g} Gb/s vs floor 360 ({pct} of rate)",
        measured=bw, expected=RATE90, **GKW)


def test_gdr_spec_floor_overrides_the_rate_fraction():
    run = {"rc": 0, "error": None, "gpu": 1, "parsed": {"avg_gbits": 370.0}}
    exp = _exp(floor=380.0, source="spec floors.hca_write_bw_gbits")
    assert _r(gdr_gate("n1", IB400, _bw(run), FabricSettings(), 380.0)) == _res(
        "hca_gdr_bw", "fail", "mlx5_0 GPU1 ib_write_bw 370 Gb/s vs floor 380 (92% of rate)", measured=370.0,
        expected=exp, **GKW)
    half = FabricSettings(hca_bw_fraction=0.5)
    g = gdr_gate("n1", Nic(name="mlx5_0", rate_gbps=333), _bw(run), half, None)
    assert g.status == "pass" and g.expected.floor == 166.5 and g.expected.source == "50% of rate"


# ---------------------------------------------------------------- ibstat itself

@pytest.mark.parametrize("data", [
    {}, {"ibstat": {}}, {"ibstat": {"rc": None, "error": "ibstat not found", "parsed": {"errors": ["x"]}}},
    {"ibstat": {"rc": 0, "error": None, "parsed": {"cas": {}, "errors": []}}},
])
def test_ibstat_absent_or_clean_adds_no_gate(data):
    assert ibstat_gate("n1", data) is None


@pytest.mark.parametrize(("ib", "reason"), [
    ({"rc": 255, "error": None, "parsed": {"errors": ["ibpanic: [1] main: stat of IB device 'mlx5_8' failed"]}},
     "ibstat exit 255: ibpanic: [1] main: stat of IB device 'mlx5_8' failed"),
    ({"rc": 0, "error": None, "parsed": {"errors": ["ibwarn: a", "ibwarn: b"]}}, "ibstat exit 0: ibwarn: a"),
    ({"rc": 1, "error": "boom", "parsed": None}, "ibstat exit 1: boom"),
    ({"rc": None, "error": "timed out after 60s", "parsed": {"errors": ["ibwarn: x"]}}, "ibstat exit None: ibwarn: x"),
])
def test_ibstat_failing_fails_the_node(ib, reason):
    assert _r(ibstat_gate("n1", {"ibstat": ib})) == _res("ibstat", "fail", reason, hca=None, evidence="hca.ibstat")


def test_ibstat_that_did_not_complete_is_an_error():
    """A timeout without output added no gate: with sysfs unread, the NICs then read as absent from the node."""
    ib = {"rc": None, "error": "timed out after 60s", "parsed": None}
    assert _r(ibstat_gate("n1", {"ibstat": ib})) == _res("ibstat", "error", "ibstat did not complete: timed out "
                                                         "after 60s", hca=None, evidence="hca.ibstat")
