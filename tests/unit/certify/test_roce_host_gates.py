"""Host side of lossless RoCE, judged from mlnx_qos and sysfs: every failure names the NIC (tests/fixtures/roce)."""

from __future__ import annotations

from pathlib import Path

from gridready.certify.hca import roce_gates
from gridready.probe.hca import parse_mlnx_qos, read_netdev
from gridready.spec import Nic
from gridready.spec.fabric import FabricSettings

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "roce"
NIC = Nic(name="mlx5_2", kind="roce", rate_gbps=400, netdev="enp58s0np0", mtu=4200)
LOSSLESS = FabricSettings.model_validate({"roce": {"pfc_priorities": [3], "ecn_priorities": [3], "trust": "dscp",
                                                   "gid_type": None}})  # fmt: skip


def _data(qos_file: str, mtu: int, np_: int, rp: int) -> dict:
    parsed = parse_mlnx_qos((FIX / qos_file).read_text())
    ecn = {"ecn_roce_np": {str(p): int(p == 3 and np_) for p in range(8)},
           "ecn_roce_rp": {str(p): int(p == 3 and rp) for p in range(8)}}  # fmt: skip
    return {"sysfs": {"mlx5_2": {"netdevs": ["enp58s0np0"], "ports": {"1": {}}}},
            "netdevs": {"enp58s0np0": {"mtu": mtu, **ecn}}, "qos": {"enp58s0np0": {"parsed": parsed}}}  # fmt: skip


def test_parse_mlnx_qos_reads_trust_pfc_and_the_dscp_map():
    q = parse_mlnx_qos((FIX / "mlnx_qos-dscp-pfc3.txt").read_text())
    assert q["trust"] == "dscp" and q["pfc_enabled"] == [3]
    assert q["dscp2prio"][26] == 3 and q["dscp2prio"][48] == 6 and len(q["dscp2prio"]) == 64


def test_a_lossless_port_passes_every_host_gate():
    res = {r.gate: r for r in roce_gates("n1", NIC, _data("mlnx_qos-dscp-pfc3.txt", 9000, 1, 1), LOSSLESS)}
    assert {g: r.status for g, r in res.items()} == {"roce_mtu": "pass", "roce_pfc": "pass", "roce_ecn": "pass",
                                                     "roce_trust": "pass"}  # fmt: skip


def test_a_port_as_shipped_fails_and_each_reason_names_the_nic():
    res = {r.gate: r for r in roce_gates("n1", NIC, _data("mlnx_qos-pcp-nopfc.txt", 1500, 1, 0), LOSSLESS)}
    assert {g: r.status for g, r in res.items()} == {"roce_mtu": "fail", "roce_pfc": "fail", "roce_ecn": "fail",
                                                     "roce_trust": "fail"}  # fmt: skip
    assert all(r.reason.startswith("mlx5_2 (enp58s0np0)") and r.hca == "mlx5_2" for r in res.values())
    assert "roce_rp none (spec 3)" in res["roce_ecn"].reason  # DCQCN reaction point off: the sender never slows down


def test_unreadable_qos_is_an_error_never_a_pass():
    data = _data("mlnx_qos-dscp-pfc3.txt", 9000, 1, 1)
    data["qos"] = {}
    data["netdevs"]["enp58s0np0"]["ecn_roce_np"] = {}
    res = {r.gate: r.status for r in roce_gates("n1", NIC, data, LOSSLESS)}
    assert res["roce_pfc"] == res["roce_trust"] == res["roce_ecn"] == "error"


def test_read_netdev_reads_both_dcqcn_ends(tmp_path):
    base = tmp_path / "class/net/enp58s0np0"
    for kind, val in (("roce_np", "1"), ("roce_rp", "0")):
        d = base / "ecn" / kind / "enable"
        d.mkdir(parents=True)
        (d / "3").write_text(val + "\n")
    (base / "mtu").write_text("4200\n")
    nd = read_netdev("enp58s0np0", tmp_path)
    assert nd["mtu"] == 4200 and nd["ecn_roce_np"] == {"3": 1} and nd["ecn_roce_rp"] == {"3": 0}
