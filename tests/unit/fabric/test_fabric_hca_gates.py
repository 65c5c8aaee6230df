"""HCA gates on the real ibstat/sysfs fixtures: failures name the HCA and its port."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from gridready.certify.hca import hca_verdicts, judge_hcas, passing_hcas, rail_gate
from gridready.probe import hca
from gridready.spec.fabric import FabricSettings

from .conftest import group

SYSFS = "sysfs-infiniband/sys-class-infiniband__8xH100-ndr__FAIL-mlx5_1-link_downed-255__gpud"
NDR8 = [(f"mlx5_{i}", "infiniband", 400) for i in (0, 1, 4, 5, 6, 7, 8, 9)]


def _bad(results):
    return [r for r in results if r.blocks_certification]


def _ibstat_data(path: Path) -> dict:
    text = path.read_text()
    return {"ibstat": {"rc": 0, "stdout": text, "parsed": hca.parse_ibstat(text)}}


def _writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    dst.chmod(dst.stat().st_mode | stat.S_IWUSR)
    return dst


def test_ibstat_ndr_fails_exactly_the_down_ports_it_is_asked_about(public):
    data = _ibstat_data(public / "ibstat/ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt")
    ib = [(f"mlx5_{i}", "infiniband", 400) for i in (0, 3, 4, 5, 6, 9, 10, 11)]
    front = [(f"mlx5_{i}", "ethernet", 100) for i in (1, 2, 7, 8)]
    res = judge_hcas("n1", group(ib + front), data)
    failing = {(r.gate, r.hca) for r in _bad(res) if r.gate.startswith("hca_port")}
    assert failing == {("hca_port_state", "mlx5_2"), ("hca_port_state", "mlx5_7"), ("hca_port_state", "mlx5_8")}
    msg = next(r.reason for r in res if r.gate == "hca_port_state" and r.hca == "mlx5_7")
    assert "mlx5_7 port 1" in msg and "Down" in msg
    # only the 8 NDR HCAs listed: their port gates pass (no sysfs: counters/PCIe are errors, never passes)
    only_ib = judge_hcas("n1", group(ib), data)
    assert not [r for r in only_ib if r.gate.startswith(("hca_port", "hca_rate", "hca_link")) and r.status != "pass"]
    assert {r.status for r in only_ib if r.gate == "hca_counters"} == {"error"}


def test_roce_fixture_link_layer(public):
    data = _ibstat_data(public / "ibstat/ibstat__8xH100-roce-400G__all-active__gpud.txt")
    roce = [(f"mlx5_{i}", "roce", 400) for i in (0, 3, 4, 5, 6, 9, 10, 11)]
    res = judge_hcas("n1", group(roce), data)
    assert {r.status for r in res if r.gate == "hca_link_layer"} == {"pass"}
    as_ib = judge_hcas("n1", group([(n, "infiniband", r) for n, _, r in roce]), data)
    bad = [r for r in as_ib if r.gate == "hca_link_layer" and r.status == "fail"]
    assert len(bad) == 8 and "spec says InfiniBand" in bad[0].reason


def test_ibpanic_names_the_missing_device(public):
    data = _ibstat_data(public / "ibstat/ibstat__A100__FAIL-ibpanic-exit255__gpud.txt")
    data["ibstat"]["rc"] = 255
    res = judge_hcas("n1", group([(f"mlx5_{i}", "infiniband", 200) for i in range(9)]), data)
    missing = [r for r in res if r.gate == "hca_present" and r.status == "fail"]
    assert [r.hca for r in missing] == ["mlx5_8"] and "ibpanic" in missing[0].reason
    assert any(r.gate == "ibstat" and r.status == "fail" for r in res)


def test_sysfs_saturated_link_downed_fails_mlx5_1_only(public):
    tree = public / SYSFS
    snap = hca.counters_snapshot(tree)
    data = {"sysfs": hca.read_ib_sysfs(tree), "counters_before": snap, "counters_after": snap}
    res = judge_hcas("n1", group(NDR8), data)
    bad = [r for r in res if r.gate == "hca_counters" and r.status == "fail"]
    assert [r.hca for r in bad] == ["mlx5_1"]
    assert "mlx5_1 port 1" in bad[0].reason and "link_downed saturated at 255" in bad[0].reason
    assert {r.status for r in res if r.gate in ("hca_port_state", "hca_phys_state", "hca_rate")} == {"pass"}
    assert next(r for r in res if r.gate == "hca_firmware").status == "pass"
    # the fixture has no PCI device links: the PCIe gate cannot pass on missing data
    assert {r.status for r in res if r.gate == "hca_pcie_link"} == {"error"}


def test_counter_growth_during_the_run_fails_the_port(public, tmp_path):
    tree = _writable_copy(public / SYSFS, tmp_path / "ib")
    before = hca.counters_snapshot(tree)
    (tree / "mlx5_5/ports/1/counters/symbol_error").write_text("40")
    (tree / "mlx5_6/ports/1/counters/link_downed").write_text("1")
    after = hca.counters_snapshot(tree)
    res = judge_hcas("n1", group(NDR8), {"sysfs": hca.read_ib_sysfs(tree)}, counters_before=before,
                     counters_after=after)
    bad = {r.hca: r.reason for r in res if r.gate == "hca_counters" and r.status == "fail"}
    assert set(bad) == {"mlx5_1", "mlx5_5", "mlx5_6"}
    assert "symbol_error +40" in bad["mlx5_5"] and "link_downed +1 (limit 0)" in bad["mlx5_6"]


def test_half_rate_port_and_pcie_downtrain(public, tmp_path):
    tree = _writable_copy(public / SYSFS, tmp_path / "ib")
    (tree / "mlx5_7/ports/1/rate").write_text("200 Gb/sec (4X HDR)")
    data = {"sysfs": hca.read_ib_sysfs(tree)}
    for info in data["sysfs"].values():
        info["pcie"] = {"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16"}
    data["sysfs"]["mlx5_4"]["pcie"] = {"current_link_speed": "16.0 GT/s PCIe", "current_link_width": "8"}
    res = judge_hcas("n1", group(NDR8), data)
    rate = [r for r in res if r.gate == "hca_rate" and r.status == "fail"]
    assert [r.hca for r in rate] == ["mlx5_7"] and "mlx5_7 port 1 rate 200" in rate[0].reason
    pcie = [r for r in res if r.gate == "hca_pcie_link" and r.status == "fail"]
    assert [r.hca for r in pcie] == ["mlx5_4"] and "16 GT/s x8" in pcie[0].reason
    assert "mlx5_7" not in passing_hcas(res, "n1") and "mlx5_0" in passing_hcas(res, "n1")
    # a waiver keeps the node certified, never the port in NCCL's list (serve's NCCL_IB_HCA)
    waived = [r.model_copy(update={"waived": True}) if r.gate == "hca_rate" else r for r in res]
    assert "mlx5_7" not in passing_hcas(waived, "n1") and "mlx5_0" in passing_hcas(waived, "n1")
    passed, failed = hca_verdicts(waived, "n1")
    assert "mlx5_7" in failed and "mlx5_7" not in passed and "mlx5_4" in failed


def test_firmware_minimum_and_mixed(public):
    tree = public / SYSFS
    data = {"sysfs": hca.read_ib_sysfs(tree)}
    res = judge_hcas("n1", group(NDR8), data, FabricSettings(firmware={"MT4129": "28.42.1000"}))
    fw = next(r for r in res if r.gate == "hca_firmware")
    assert fw.status == "fail" and "28.41.1000 < 28.42.1000" in fw.reason
    data["sysfs"]["mlx5_9"]["fw_ver"] = "28.39.1002"
    fw = next(r for r in judge_hcas("n1", group(NDR8), data) if r.gate == "hca_firmware")
    assert fw.status == "warn" and "mixed" in fw.reason


def test_gdr_bandwidth(public):
    text = (public / "perftest/ib_write_bw-loopback-8MiB__ib0-HDR__superbench.log").read_text()
    run = {"hca": "mlx5_0", "gpu": 0, "rc": 0, "error": None, "parsed": hca.parse_ib_write_bw(text)}
    data = {"sysfs": hca.read_ib_sysfs(public / SYSFS), "ib_write_bw": {"mlx5_0": run}}
    hdr = judge_hcas("n1", group([("mlx5_0", "infiniband", 200)]), data)
    assert next(r for r in hdr if r.gate == "hca_gdr_bw").status == "pass"  # 201.8 >= 0.9 x 200
    ndr = judge_hcas("n1", group([("mlx5_0", "infiniband", 400)]), data)
    g = next(r for r in ndr if r.gate == "hca_gdr_bw")
    assert g.status == "fail" and g.measured == 201.8 and g.expected.floor == 360
    missing = {"sysfs": data["sysfs"], "ib_write_bw": {"mlx5_0": {"rc": None, "error": "ib_write_bw not found"}}}
    g = next(r for r in judge_hcas("n1", group([("mlx5_0", "infiniband", 400)]), missing) if r.gate == "hca_gdr_bw")
    assert g.status == "skipped" and not g.blocks_certification


def test_rail_alignment_from_topo(public):
    t = hca.parse_topo((public / "nvidia-smi/nvidia-smi-topo-m__8xH200-8xNIC-mlx5__drv570.211.01__unresolved-repo.txt")
                       .read_text())
    data = {"topo": {"rc": 0, "parsed": t}}
    by_name = [(f"mlx5_{i}", "infiniband", 400) for i in range(8)]
    wrong = rail_gate("n1", group(by_name, rails=True), data, FabricSettings())
    assert wrong.status == "fail" and "GPU0 nearest mlx5_4 PIX, rail NIC mlx5_0" in wrong.reason
    wired = [(n, "infiniband", 400) for n in ("mlx5_4", "mlx5_1", "mlx5_0", "mlx5_3", "mlx5_6", "mlx5_7",
                                               "mlx5_5", "mlx5_2")]
    assert rail_gate("n1", group(wired, rails=True), data, FabricSettings()).status == "pass"
    assert rail_gate("n1", group(by_name), data, FabricSettings()).status == "pass"
    assert rail_gate("n1", group(by_name), {}, FabricSettings()).status == "error"


def test_roce_gid_mtu_ecn_pfc():
    nic = {"name": "mlx5_0", "kind": "roce", "rate_gbps": 400, "netdev": "enp25s0np0", "gid_index": 3, "mtu": 4200}
    from gridready.spec import NodeGroup

    g = NodeGroup.model_validate({"name": "g", "sku": "h100", "nics": [nic], "gpudirect_rdma": False})
    port = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)", "link_layer": "Ethernet",
            "counters": {"link_downed": 0}, "gids": {"3": "0000:0000:0000:0000:0000:ffff:0a00:0001"},
            "gid_types": {"3": "RoCE v2"}}
    data = {"sysfs": {"mlx5_0": {"fw_ver": "28.41.1000", "hca_type": "MT4129", "ports": {"1": port},
                                 "pcie": {"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16"}}},
            "netdevs": {"enp25s0np0": {"mtu": 9000, "ecn_roce_np": {str(i): int(i == 3) for i in range(8)}}},
            "qos": {"enp25s0np0": {"parsed": {"pfc_enabled": [3]}}}}
    s = FabricSettings.model_validate({"roce": {"pfc_priorities": [3], "ecn_priorities": [3]}})
    res = {r.gate: r for r in judge_hcas("n1", g, data, s)}
    assert all(res[k].status == "pass" for k in ("roce_gid", "roce_mtu", "roce_pfc", "roce_ecn")), res
    port["gid_types"]["3"] = "IB/RoCE v1"
    data["netdevs"]["enp25s0np0"]["mtu"] = 1500
    data["qos"]["enp25s0np0"]["parsed"]["pfc_enabled"] = []
    res = {r.gate: r for r in judge_hcas("n1", g, data, s)}
    assert {k: res[k].status for k in ("roce_gid", "roce_mtu", "roce_pfc")} == {
        "roce_gid": "fail", "roce_mtu": "fail", "roce_pfc": "fail"}


def test_no_probe_data_is_an_error_not_a_pass():
    res = judge_hcas("n1", group(NDR8), None)
    assert [r.status for r in res] == ["error"]
