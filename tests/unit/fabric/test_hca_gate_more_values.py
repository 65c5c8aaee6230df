"""More HCA verdicts by value: port 1 preferred, counter snapshots that do not line up, firmware read from ibstat,
the rate-fraction floor's rounding, Ethernet rails, and which HCAs a node's results keep in or take out of
NCCL's list."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify.hca import (
    counter_gate,
    firmware_gate,
    gdr_gate,
    hca_verdicts,
    passing_hcas,
    port_gates,
    rail_gate,
)
from gridready.certify.result import GateResult
from gridready.probe import hca as hca_probe
from gridready.spec import Nic, NodeGroup
from gridready.spec.fabric import FabricSettings


def _r(result) -> dict[str, Any]:
    d = result.model_dump(mode="json")
    d.pop("node")
    return d


def _res(gate, status, reason, *, hca="mlx5_0", evidence=None, measured=None, expected=None, unit=None,
         required=True) -> dict[str, Any]:
    return {"gate": gate, "gpu": None, "hca": hca, "status": status, "measured": measured, "expected": expected,
            "unit": unit, "reason": reason, "evidence": evidence, "required": required, "waived": False}


CKW = {"evidence": "hca.counters.mlx5_0"}
NDR_IBSTAT = "ibstat/ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt"


# ---------------------------------------------------------------- port 1 wins over a lower-named port

UP_SYSFS = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}
UP_IBSTAT = {"state": "Active", "physical_state": "LinkUp", "rate": "400", "link_layer": "InfiniBand"}


DOWN_IBSTAT = {"state": "Down", "physical_state": "Disabled", "rate": "10", "link_layer": "InfiniBand"}


@pytest.mark.parametrize(("data", "evidence", "at", "reason"), [
    ({"sysfs": {"mlx5_0": {"ports": {"0": {"state": "1: DOWN"}, "1": UP_SYSFS}}}},
     "hca.sysfs.mlx5_0.ports.1", 1, "mlx5_0 port 1 state 4: ACTIVE"),
    ({"ibstat": {"rc": 0, "parsed": {"cas": {"mlx5_0": {"ports": {"0": DOWN_IBSTAT, "1": UP_IBSTAT}}}, "errors": []}}},
     "hca.ibstat.mlx5_0.port1", 2, "mlx5_0 port 1 physical state LinkUp"),
], ids=["sysfs", "ibstat"])
def test_port_1_is_judged_even_when_a_lower_named_port_is_listed(data, evidence, at, reason):
    res = port_gates("n1", Nic(name="mlx5_0", rate_gbps=400), data)
    assert [(r.gate, r.status, r.evidence) for r in res] == [
        (g, "pass", evidence)
        for g in ("hca_present", "hca_port_state", "hca_phys_state", "hca_rate", "hca_link_layer")]
    assert res[at].reason == reason


# ---------------------------------------------------------------- counters: snapshots that do not line up

def test_counters_of_a_port_missing_from_the_first_snapshot_are_unreadable():
    before = {"counters": {"mlx5_0": {"2": {"link_downed": 0, "symbol_error": 0}}}}
    after = {"counters": {"mlx5_0": {"1": {"link_downed": 4, "symbol_error": 99}}}}
    assert _r(counter_gate("n1", "mlx5_0", before, after, FabricSettings())) == _res(
        "hca_counters", "error", "mlx5_0 port 1: no error counters readable", **CKW)


def test_only_counters_read_in_both_snapshots_are_compared():
    before = {"counters": {"mlx5_0": {"1": {"symbol_error": 2}}}}
    after = {"counters": {"mlx5_0": {"1": {"symbol_error": 3, "link_downed": 7}}}}  # link_downed new: not judged
    assert _r(counter_gate("n1", "mlx5_0", before, after, FabricSettings())) == _res(
        "hca_counters", "pass", "mlx5_0 port 1: error counters steady over the run", measured={"symbol_error": 1},
        **CKW)
    before = {"counters": {"mlx5_0": {"1": {"symbol_error": 2, "link_downed": 0}}}}
    after = {"counters": {"mlx5_0": {"1": {"symbol_error": 3}}}}  # link_downed gone after the run: not judged
    assert counter_gate("n1", "mlx5_0", before, after, FabricSettings()).measured == {"symbol_error": 1}


# ---------------------------------------------------------------- firmware read from ibstat alone

def test_firmware_and_ca_type_come_from_ibstat_without_sysfs(public):
    text = (public / NDR_IBSTAT).read_text()
    data = {"ibstat": {"rc": 0, "stdout": text, "parsed": hca_probe.parse_ibstat(text)}}
    nics = [Nic(name="mlx5_0", rate_gbps=400), Nic(name="mlx5_1", kind="roce", rate_gbps=100)]
    s = FabricSettings(firmware={"MT4129": "28.41.1000", "MT4125": "22.38.1002"})
    assert _r(firmware_gate("n1", nics, data, s)) == _res(
        "hca_firmware", "fail", "firmware below the spec: mlx5_0 28.39.1002 < 28.41.1000", hca=None,
        measured={"mlx5_0": "28.39.1002", "mlx5_1": "22.38.1002"},
        expected={"floor": None, "ceiling": None, "equals": {"MT4129": "28.41.1000", "MT4125": "22.38.1002"},
                  "source": "spec"})


def test_every_hca_below_the_firmware_minimum_is_listed():
    up = {"1": {"state": "ACTIVE"}}
    data = {"sysfs": {h: {"fw_ver": fw, "hca_type": "MT4129", "ports": up}
                      for h, fw in (("mlx5_0", "28.39.1002"), ("mlx5_1", "28.41.1000"), ("mlx5_2", "28.40.1000"))}}
    nics = [Nic(name=h, rate_gbps=400) for h in ("mlx5_0", "mlx5_1", "mlx5_2")]
    g = firmware_gate("n1", nics, data, FabricSettings(firmware={"MT4129": "28.41.1000"}))
    assert (g.status, g.reason) == (
        "fail", "firmware below the spec: mlx5_0 28.39.1002 < 28.41.1000, mlx5_2 28.40.1000 < 28.41.1000")


# ---------------------------------------------------------------- rails: an Ethernet NIC's rail is not checked

def test_rail_of_an_ethernet_nic_is_ignored():
    group = NodeGroup.model_validate({
        "name": "g", "sku": "h100", "gpus_per_node": 2, "platform": "passthrough", "gpudirect_rdma": True,
        "nics": [{"name": "mlx5_0", "kind": "infiniband", "rate_gbps": 400, "rail": 0},
                 {"name": "mlx5_1", "kind": "ethernet", "rate_gbps": 100, "rail": 1}]})
    links = {"GPU0": {"NIC0": "PIX", "NIC1": "SYS"}, "GPU1": {"NIC0": "PXB", "NIC1": "SYS"}}
    data = {"topo": {"rc": 0, "parsed": {"gpus": list(links), "nics": {"NIC0": "mlx5_0", "NIC1": "mlx5_1"},
                                         "links": links}}}
    assert _r(rail_gate("n1", group, data, FabricSettings())) == _res(
        "gpu_nic_rail", "pass", "every GPU is nearest to its rail NIC", hca=None, evidence="hca.topo",
        measured={"GPU0": "mlx5_0 PIX", "GPU1": "mlx5_0 PXB"})


# ---------------------------------------------------------------- GDR floor from the rate fraction

def test_rate_fraction_floor_is_rounded_to_one_decimal():
    run = {"rc": 0, "error": None, "gpu": 2, "parsed": {"avg_gbits": 23.77}}
    nic = Nic(name="mlx5_0", kind="roce", rate_gbps=25)
    g = gdr_gate("n1", nic, {"ib_write_bw": {"mlx5_0": run}}, FabricSettings(hca_bw_fraction=0.95), None)
    assert _r(g) == _res(
        "hca_gdr_bw", "fail", "mlx5_0 GPU2 ib_write_bw 23.77 Gb/s vs floor 23.8 (95% of rate)",
        evidence="hca.ib_write_bw.mlx5_0", measured=23.77, unit="Gb/s",
        expected={"floor": 23.8, "ceiling": None, "equals": None, "source": "95% of rate"})


# ---------------------------------------------------------------- which HCAs pass, which are taken out

def _g(gate: str, hca: str | None, status: str, node: str = "n1", **kw: Any) -> GateResult:
    return GateResult(gate=gate, node=node, hca=hca, status=status, reason="r", **kw)


def test_failed_counters_take_the_hca_out_but_unread_counters_do_not():
    res = [_g("hca_present", "mlx5_0", "pass"), _g("hca_counters", "mlx5_0", "fail"),
           _g("hca_present", "mlx5_1", "pass"), _g("hca_counters", "mlx5_1", "error"),
           _g("hca_present", "mlx5_2", "pass"), _g("hca_pcie_link", "mlx5_2", "error")]
    assert hca_verdicts(res, "n1") == (["mlx5_1"], ["mlx5_0", "mlx5_2"])
    assert passing_hcas(res, "n1") == ["mlx5_1"]


def test_waived_failures_take_the_hca_out_waived_warnings_do_not():
    res = [_g("hca_present", "mlx5_0", "pass"), _g("hca_rate", "mlx5_0", "error", waived=True),
           _g("hca_present", "mlx5_1", "pass"), _g("hca_firmware", "mlx5_1", "warn", waived=True)]
    assert hca_verdicts(res, "n1") == (["mlx5_1"], ["mlx5_0"])


def test_verdicts_read_only_the_nodes_own_hca_results():
    res = [_g("hca_present", "mlx5_0", "pass", node="n2"), _g("hca_rate", "mlx5_0", "fail", node="n2"),
           _g("hca_present", "mlx5_1", "pass", node="n2"), _g("ibstat", None, "fail"),
           _g("hca_present", "mlx5_3", "pass")]
    assert hca_verdicts(res, "n1") == (["mlx5_3"], [])
    assert hca_verdicts(res[:3], "n1") == (None, [])
    assert passing_hcas(res[:3], "n1") == []
    assert hca_verdicts(res, "n2") == (["mlx5_1"], ["mlx5_0"])


@pytest.mark.parametrize("present", ["skipped", "warn", None])
def test_only_a_passed_presence_gate_counts_an_hca_as_passed(present):
    res = [_g("hca_rate", "mlx5_0", "pass"), _g("hca_link_layer", "mlx5_0", "pass")]
    if present is not None:
        res.append(_g("hca_present", "mlx5_0", present, required=False))
    assert hca_verdicts(res, "n1") == ([], [])
