"""RoCE, rail and whole-node HCA verdicts by value: what each spec setting checks and what the operator reads."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify.hca import judge_hcas, rail_gate, roce_gates
from gridready.spec import Nic, NodeGroup
from gridready.spec.fabric import FabricSettings

GID = "0000:0000:0000:0000:0000:ffff:0a00:0001"


def _r(result) -> dict[str, Any]:
    d = result.model_dump(mode="json")
    d.pop("node")
    return d


def _exp(floor=None, equals=None) -> dict[str, Any]:
    return {"floor": floor, "ceiling": None, "equals": equals, "source": "spec"}


def _res(gate, status, reason, *, hca="mlx5_0", evidence=None, measured=None, expected=None, unit=None,
         required=True) -> dict[str, Any]:
    return {"gate": gate, "gpu": None, "hca": hca, "status": status, "measured": measured, "expected": expected,
            "unit": unit, "reason": reason, "evidence": evidence, "required": required, "waived": False}


def _roce_nic(**kw) -> Nic:
    return Nic(name="mlx5_0", kind="roce", rate_gbps=400, **kw)


def _roce_data(gids=None, types=None, netdevs=("eth0",), nd=None, qos=None) -> dict[str, Any]:
    port = {"gids": {"3": GID} if gids is None else gids, "gid_types": {"3": "RoCE v2"} if types is None else types}
    return {"sysfs": {"mlx5_0": {"ports": {"1": port}, "netdevs": list(netdevs)}},
            "netdevs": {"eth0": nd or {}, "eth9": {"mtu": 9000}},
            "qos": {"eth0": {"parsed": qos}} if qos is not None else {}}


NONE = FabricSettings.model_validate({"roce": {"gid_type": None}})


# ---------------------------------------------------------------- GID

GEV = "hca.sysfs.mlx5_0.ports.1.gids"


def test_gid_of_the_spec_type_passes():
    assert [_r(r) for r in roce_gates("n1", _roce_nic(gid_index=3), _roce_data(), FabricSettings())] == [_res(
        "roce_gid", "pass", f"mlx5_0 GID[3] {GID} RoCE v2", evidence=GEV, measured={"gid": GID, "type": "RoCE v2"},
        expected=_exp(equals="RoCE v2"))]


def test_gid_of_another_type_fails():
    data = _roce_data(types={"3": "IB/RoCE v1"})
    assert [_r(r) for r in roce_gates("n1", _roce_nic(gid_index=3), data, FabricSettings())] == [_res(
        "roce_gid", "fail", f"mlx5_0 GID[3] {GID} IB/RoCE v1, expected a RoCE v2 GID", evidence=GEV,
        measured={"gid": GID, "type": "IB/RoCE v1"}, expected=_exp(equals="RoCE v2"))]


def test_empty_gid_fails_and_any_type_is_accepted_when_the_spec_names_none():
    data = _roce_data(gids={"0": GID}, types={})
    assert [_r(r) for r in roce_gates("n1", _roce_nic(gid_index=3), data, NONE)] == [_res(
        "roce_gid", "fail", "mlx5_0 GID[3] empty, expected a GID", evidence=GEV,
        measured={"gid": None, "type": None}, expected=_exp())]
    untyped = _roce_data(types={})
    g = roce_gates("n1", _roce_nic(gid_index=3), untyped, NONE)[0]
    assert (g.status, g.reason) == ("pass", f"mlx5_0 GID[3] {GID}")
    g = roce_gates("n1", _roce_nic(gid_index=3), untyped, FabricSettings())[0]
    assert (g.status, g.reason) == ("fail", f"mlx5_0 GID[3] {GID}, expected a RoCE v2 GID")


# ---------------------------------------------------------------- MTU

@pytest.mark.parametrize(("mtu", "status", "shown"), [
    (9000, "pass", "9000"), (4200, "pass", "4200"), (4199, "fail", "4199"), (None, "error", "unreadable"),
])
def test_mtu_against_the_spec(mtu, status, shown):
    data = _roce_data(nd={"mtu": mtu})
    assert [_r(r) for r in roce_gates("n1", _roce_nic(mtu=4200), data, NONE)] == [_res(
        "roce_mtu", status, f"mlx5_0 (eth0) MTU {shown} (spec 4200)", evidence="hca.netdevs.eth0", measured=mtu,
        expected=_exp(floor=4200))]


def test_spec_netdev_wins_over_the_hca_netdev_list():
    data = _roce_data(nd={"mtu": 1500}, netdevs=("eth0", "eth9"))
    g = roce_gates("n1", _roce_nic(mtu=4200, netdev="eth9"), data, NONE)[0]
    assert (g.status, g.reason, g.evidence) == ("pass", "mlx5_0 (eth9) MTU 9000 (spec 4200)", "hca.netdevs.eth9")
    g = roce_gates("n1", _roce_nic(mtu=4200), data, NONE)[0]
    assert (g.status, g.reason) == ("fail", "mlx5_0 (eth0) MTU 1500 (spec 4200)")
    g = roce_gates("n1", _roce_nic(mtu=4200), _roce_data(netdevs=()), NONE)[0]
    assert (g.status, g.reason) == ("error", "mlx5_0 (None) MTU unreadable (spec 4200)")


# ---------------------------------------------------------------- PFC and trust

def _qos_settings(**roce) -> FabricSettings:
    return FabricSettings.model_validate({"roce": {"gid_type": None, **roce}})


@pytest.mark.parametrize(("qos", "status", "shown"), [
    ({"pfc_enabled": [4, 3]}, "pass", "3, 4"),
    ({"pfc_enabled": [3]}, "fail", "3"),
    ({"pfc_enabled": [3, 4, 5]}, "fail", "3, 4, 5"),
    ({"pfc_enabled": []}, "fail", "none"),
])
def test_pfc_priorities_must_equal_the_spec(qos, status, shown):
    data = _roce_data(qos=qos)
    assert [_r(r) for r in roce_gates("n1", _roce_nic(), data, _qos_settings(pfc_priorities=[4, 3]))] == [_res(
        "roce_pfc", status, f"mlx5_0 (eth0) PFC priorities {shown} (spec 3, 4)", evidence="hca.qos.eth0",
        measured=sorted(qos["pfc_enabled"]), expected=_exp(equals=[3, 4]))]


def test_pfc_unreadable_is_an_error():
    assert [_r(r) for r in roce_gates("n1", _roce_nic(), _roce_data(), _qos_settings(pfc_priorities=[]))] == [_res(
        "roce_pfc", "error", "mlx5_0 (eth0) PFC priorities unreadable (mlnx_qos) (spec none)",
        evidence="hca.qos.eth0", expected=_exp(equals=[]))]


@pytest.mark.parametrize(("qos", "status", "shown"), [
    ({"trust": "dscp"}, "pass", "dscp"), ({"trust": "pcp"}, "fail", "pcp"),
    ({"trust": None}, "error", "unreadable (mlnx_qos)"), (None, "error", "unreadable (mlnx_qos)"),
])
def test_qos_trust_against_the_spec(qos, status, shown):
    data = _roce_data(qos=qos)
    assert [_r(r) for r in roce_gates("n1", _roce_nic(), data, _qos_settings(trust="dscp"))] == [_res(
        "roce_trust", status, f"mlx5_0 (eth0) QoS trust {shown} (spec dscp)", evidence="hca.qos.eth0",
        measured=(qos or {}).get("trust"), expected=_exp(equals="dscp"))]


# ---------------------------------------------------------------- ECN

def _ecn(np_: dict | None, rp: dict | None) -> dict[str, Any]:
    nd: dict[str, Any] = {"mtu": 9000}
    if np_ is not None:
        nd["ecn_roce_np"] = np_
    if rp is not None:
        nd["ecn_roce_rp"] = rp
    return _roce_data(nd=nd)


def _prios(*on: int) -> dict[str, int]:
    return {str(i): int(i in on) for i in range(8)}


@pytest.mark.parametrize(("np_", "rp", "status", "np_txt", "rp_txt", "m_np", "m_rp"), [
    (_prios(3), _prios(3), "pass", "3", "3", [3], [3]),
    (_prios(3, 5), None, "pass", "3, 5", "not exposed", [3, 5], None),  # older mlx5: judged on roce_np
    (_prios(3), _prios(), "fail", "3", "none", [3], []),
    (_prios(), _prios(3), "fail", "none", "3", [], [3]),
    (_prios(4), _prios(3), "fail", "4", "3", [4], [3]),
    ({}, _prios(3), "error", "unreadable", "3", None, [3]),
    (None, None, "error", "unreadable", "not exposed", None, None),
])
def test_ecn_needs_both_ends_on_the_spec_priorities(np_, rp, status, np_txt, rp_txt, m_np, m_rp):
    s = _qos_settings(ecn_priorities=[3])
    assert [_r(r) for r in roce_gates("n1", _roce_nic(), _ecn(np_, rp), s)] == [_res(
        "roce_ecn", status, f"mlx5_0 (eth0) ECN roce_np {np_txt}, roce_rp {rp_txt} (spec 3)",
        evidence="hca.netdevs.eth0", measured={"roce_np": m_np, "roce_rp": m_rp}, expected=_exp(equals=[3]))]


def test_roce_gates_come_in_spec_order_and_only_those_the_spec_names():
    s = _qos_settings(pfc_priorities=[3], ecn_priorities=[3], trust="dscp", gid_type="RoCE v2")
    data = _ecn(_prios(3), _prios(3))
    data["qos"] = {"eth0": {"parsed": {"pfc_enabled": [3], "trust": "dscp"}}}
    res = roce_gates("n1", _roce_nic(gid_index=3, mtu=4200), data, s)
    assert [(r.gate, r.status) for r in res] == [("roce_gid", "pass"), ("roce_mtu", "pass"), ("roce_pfc", "pass"),
                                                 ("roce_ecn", "pass"), ("roce_trust", "pass")]
    assert roce_gates("n1", _roce_nic(), data, NONE) == []


# ---------------------------------------------------------------- rail alignment

def _rail_group(rails: list[tuple[str, str, int | None]], gpus: int = 2, gdr: bool = True) -> NodeGroup:
    return NodeGroup.model_validate({
        "name": "g", "sku": "h100", "gpus_per_node": gpus, "platform": "passthrough", "gpudirect_rdma": gdr,
        "nics": [{"name": n, "kind": k, "rate_gbps": 400, **({"rail": r} if r is not None else {})}
                 for n, k, r in rails]})


def _topo(links: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {"topo": {"rc": 0, "parsed": {"gpus": list(links), "nics": {"NIC0": "mlx5_0", "NIC1": "mlx5_1"},
                                         "links": links}}}


RAILS = [("mlx5_0", "infiniband", 0), ("mlx5_1", "infiniband", 1)]
NO_RAILS = [("mlx5_0", "infiniband", None), ("mlx5_1", "infiniband", None)]
ALIGNED = {"GPU0": {"NIC0": "PIX", "NIC1": "SYS"}, "GPU1": {"NIC0": "SYS", "NIC1": "PXB"}}
RKW = {"hca": None, "evidence": "hca.topo"}


def test_rail_aligned_gpus_pass():
    assert _r(rail_gate("n1", _rail_group(RAILS), _topo(ALIGNED), FabricSettings())) == _res(
        "gpu_nic_rail", "pass", "every GPU is nearest to its rail NIC",
        measured={"GPU0": "mlx5_0 PIX", "GPU1": "mlx5_1 PXB"}, **RKW)


def test_gpu_nearest_to_another_rail_fails_naming_both_nics():
    crossed = {"GPU0": {"NIC0": "SYS", "NIC1": "PIX"}, "GPU1": {"NIC0": "SYS", "NIC1": "PXB"}}
    assert _r(rail_gate("n1", _rail_group(RAILS), _topo(crossed), FabricSettings())) == _res(
        "gpu_nic_rail", "fail", "GPU0 nearest mlx5_1 PIX, rail NIC mlx5_0",
        measured={"GPU0": "mlx5_1 PIX", "GPU1": "mlx5_1 PXB"}, **RKW)
    lonely = {"GPU0": {"NIC0": "PIX"}, "GPU1": {"GPU0": "NV18"}}
    g = rail_gate("n1", _rail_group(RAILS), _topo(lonely), FabricSettings())
    assert (g.status, g.reason) == ("fail", "GPU1 nearest none, rail NIC mlx5_1")


def test_ethernet_and_extra_gpus_have_no_rail_to_check():
    group = _rail_group([("mlx5_0", "infiniband", 0), ("mlx5_1", "ethernet", 1)], gpus=4)
    assert rail_gate("n1", group, _topo(ALIGNED), FabricSettings()).status == "pass"


@pytest.mark.parametrize(("links", "status", "reason"), [
    (ALIGNED, "pass", "every GPU is nearest to its rail NIC"),
    ({"GPU0": {"NIC0": "PHB"}, "GPU1": {"NIC1": "PXB"}}, "warn", "GPU0 has no NIC behind its PCIe switch (PHB)"),
    ({"GPU0": {"NIC0": "NODE"}, "GPU1": {"GPU0": "NV18"}}, "warn",
     "GPU0 has no NIC behind its PCIe switch (NODE); GPU1 has no NIC behind its PCIe switch (none)"),
])
def test_without_rails_each_gpu_needs_a_nic_behind_its_switch(links, status, reason):
    g = rail_gate("n1", _rail_group(NO_RAILS), _topo(links), FabricSettings())
    assert (g.status, g.reason) == (status, reason)


@pytest.mark.parametrize(("data", "settings", "expected"), [
    ({}, FabricSettings(rail_alignment=False),
     _res("gpu_nic_rail", "skipped", "rail alignment not checked (spec)", required=False, **RKW)),
    ({}, FabricSettings(), _res("gpu_nic_rail", "error", "nvidia-smi topo -m not readable", **RKW)),
    ({"topo": {"rc": 0, "parsed": {"links": {}}}}, FabricSettings(),
     _res("gpu_nic_rail", "error", "nvidia-smi topo -m not readable", **RKW)),
])
def test_rail_gate_skipped_by_the_spec_or_without_topology(data, settings, expected):
    assert _r(rail_gate("n1", _rail_group(RAILS), data, settings)) == expected


# ---------------------------------------------------------------- the node's HCA gates

UP = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)"}


def _node(**layers: str) -> dict[str, Any]:
    snap = {"counters": {h: {"1": {"link_downed": 0}} for h in layers}}
    return {"sysfs": {h: {"fw_ver": "28.41.1000", "hca_type": "MT4129", "netdevs": [f"{h}_if"],
                          "pcie": {"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16"},
                          "ports": {"1": {**UP, "link_layer": ll}}} for h, ll in layers.items()},
            "counters_before": snap, "counters_after": snap}


def _gates(res) -> list[tuple[str, str | None, str]]:
    return [(r.gate, r.hca, r.status) for r in res]


PORT = ("hca_present", "hca_port_state", "hca_phys_state", "hca_rate", "hca_link_layer")


def test_node_runs_every_hca_gate_in_order():
    group = _rail_group([("mlx5_0", "infiniband", None), ("mlx5_1", "roce", None), ("eth0", "ethernet", None)],
                        gdr=False)
    data = _node(mlx5_0="InfiniBand", mlx5_1="Ethernet", eth0="Ethernet")
    s = FabricSettings.model_validate({"roce": {"gid_type": None, "ecn_priorities": [3]}})
    res = judge_hcas("n1", group, data, s)
    assert _gates(res) == [
        *[(g, "mlx5_0", "pass") for g in PORT],
        ("hca_counters", "mlx5_0", "pass"), ("hca_pcie_link", "mlx5_0", "pass"), ("hca_gdr_bw", "mlx5_0", "skipped"),
        *[(g, "mlx5_1", "pass") for g in PORT],
        ("hca_counters", "mlx5_1", "pass"), ("hca_pcie_link", "mlx5_1", "pass"), ("hca_gdr_bw", "mlx5_1", "skipped"),
        ("roce_ecn", "mlx5_1", "error"),
        *[(g, "eth0", "pass") for g in PORT],
        ("hca_firmware", None, "pass"),
    ]
    assert {r.node for r in res} == {"n1"}


def test_node_with_gpudirect_adds_the_rail_gate_and_ibstat_failure_comes_first():
    data = _node(mlx5_0="InfiniBand")
    data["ibstat"] = {"rc": 255, "error": None, "parsed": {"cas": {}, "errors": ["ibpanic: x"]}}
    res = judge_hcas("n1", _rail_group([("mlx5_0", "infiniband", 0)], gpus=1), data)
    gates = [r.gate for r in res]
    assert gates[0] == "ibstat" and gates[-2:] == ["hca_firmware", "gpu_nic_rail"]
    assert res[-1].status == "error"


def test_missing_hca_gets_only_its_presence_gate():
    res = judge_hcas("n1", _rail_group(RAILS, gdr=False), _node(mlx5_0="InfiniBand"))
    assert [(g, h) for g, h, _ in _gates(res) if h == "mlx5_1"] == [("hca_present", "mlx5_1")]
    assert _gates(res)[-1] == ("hca_firmware", None, "pass")


def test_counter_snapshots_given_by_the_caller_win_over_the_probe():
    data = _node(mlx5_0="InfiniBand")
    grown = {"counters": {"mlx5_0": {"1": {"link_downed": 2}}}}
    res = judge_hcas("n1", _rail_group([("mlx5_0", "infiniband", None)], gdr=False), data,
                     counters_after=grown)
    g = next(r for r in res if r.gate == "hca_counters")
    assert (g.status, g.reason) == ("fail", "mlx5_0 port 1: link_downed +2 (limit 0)")
    res = judge_hcas("n1", _rail_group([("mlx5_0", "infiniband", None)], gdr=False), data,
                     counters_before={"counters": {"mlx5_0": {"1": {"link_downed": 5}}}}, floor_gbits=100.0)
    assert next(r for r in res if r.gate == "hca_counters").measured == {"link_downed": -5}
    assert next(r for r in res if r.gate == "hca_gdr_bw").expected.floor == 100.0


def test_only_ethernet_nics_have_no_firmware_or_rail_gate():
    res = judge_hcas("n1", _rail_group([("eth0", "ethernet", 0)], gpus=1), _node(eth0="Ethernet"))
    assert [r.gate for r in res] == list(PORT)


@pytest.mark.parametrize("data", [None, {}])
def test_no_probe_data_is_one_error(data):
    res = judge_hcas("n1", _rail_group(RAILS), data)
    assert [_r(r) for r in res] == [_res("hca_present", "error", "no HCA measurements from the probe", hca=None,
                                         evidence="hca")]
    assert judge_hcas("n1", _rail_group([]), data) == []
