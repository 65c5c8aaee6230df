"""Collectors' parsers (gridready/probe/hca.py) on the real ibstat, sysfs, perftest and topo outputs."""

from __future__ import annotations

from pathlib import Path

from gridready.probe import hca

REPO = Path(__file__).resolve().parents[3]

SYSFS = "sysfs-infiniband/sys-class-infiniband__8xH100-ndr__FAIL-mlx5_1-link_downed-255__gpud"


def test_ibstat_ib_ndr_reads_every_ca_and_port(public):
    p = hca.parse_ibstat((public / "ibstat/ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt").read_text())
    assert len(p["cas"]) == 12 and p["errors"] == []
    mlx0 = p["cas"]["mlx5_0"]
    assert mlx0["ca_type"] == "MT4129" and mlx0["firmware"] == "28.39.1002"
    want = {"state": "Active", "physical_state": "LinkUp", "rate": "400", "link_layer": "InfiniBand"}
    assert want.items() <= mlx0["ports"]["1"].items()
    down = sorted(ca for ca, v in p["cas"].items() if v["ports"]["1"]["state"] == "Down")
    assert down == ["mlx5_2", "mlx5_7", "mlx5_8"]


def test_ibstat_ibpanic_keeps_partial_output_and_the_error(public):
    p = hca.parse_ibstat((public / "ibstat/ibstat__A100__FAIL-ibpanic-exit255__gpud.txt").read_text())
    assert len(p["cas"]) == 8 and "mlx5_8" not in p["cas"]
    assert "mlx5_8" in p["errors"][0]


def test_sysfs_tree(public):
    d = hca.read_ib_sysfs(public / SYSFS)
    assert sorted(d) == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9",
                         "mlx5_bond_0"]
    p = d["mlx5_1"]["ports"]["1"]
    assert p["state"] == "4: ACTIVE" and p["phys_state"] == "5: LinkUp"
    assert p["rate"] == "400 Gb/sec (4X NDR)" and p["link_layer"] == "InfiniBand"
    assert p["counters"]["link_downed"] == 255
    assert d["mlx5_bond_0"]["ports"]["1"]["link_layer"] == "Ethernet"
    assert d["mlx5_0"]["fw_ver"] == "28.41.1000"


def test_sysfs_root_env_with_class_dir(tmp_path, monkeypatch, public):
    import shutil

    shutil.copytree(public / SYSFS, tmp_path / "class" / "infiniband")
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path))
    snap = hca.counters_snapshot()
    assert snap["counters"]["mlx5_1"]["1"]["link_downed"] == 255


def test_ib_write_bw_mb_per_sec_is_decimal(public):
    r = hca.parse_ib_write_bw((public / "perftest/ib_write_bw-loopback-8MiB__ib0-HDR__superbench.log").read_text())
    assert r["bytes"] == 8388608 and r["avg_gbits"] == 201.8  # 24056.72 x 2**20 bytes/s x 8 / 1e9


def test_ib_write_bw_report_gbits():
    text = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            " 8388608    27000            399.71             399.70               0.005956\n")
    assert hca.parse_ib_write_bw(text)["avg_gbits"] == 399.70


def test_topo_h200_nearest_nic_per_gpu(public):
    t = hca.parse_topo((public / "nvidia-smi/nvidia-smi-topo-m__8xH200-8xNIC-mlx5__drv570.211.01__unresolved-repo.txt")
                       .read_text())
    near = hca.nearest_nics(t)
    assert {g: v["nic"] for g, v in near.items()} == {
        0: "mlx5_4", 1: "mlx5_1", 2: "mlx5_0", 3: "mlx5_3", 4: "mlx5_6", 5: "mlx5_7", 6: "mlx5_5", 7: "mlx5_2"}
    assert all(v["link"] == "PIX" for v in near.values())


def test_topo_truncated_copy_reads_nic_rows(public):
    t = hca.parse_topo((public / "nvidia-smi/nvidia-smi-topo-m__8xH800-NV8-4xNIC__copy-truncated__llm-action.txt")
                       .read_text())
    near = hca.nearest_nics(t)
    assert near[1] == {"nic": "mlx5_0", "link": "PIX"} and near[7] == {"nic": "mlx5_2", "link": "PIX"}
    assert near[0]["link"] == "NODE"


def test_topo_without_nics(public):
    t = hca.parse_topo((public.parent / "h200x2/nvidia-smi-topo-m.txt").read_text())
    assert t["gpus"] == ["GPU0", "GPU1"] and hca.nearest_nics(t) == {}


def test_mlnx_qos_pfc():
    text = ("PFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n"
            "\tenabled     0   0   0   1   0   0   0   0\n")
    assert hca.parse_mlnx_qos(text) == {"trust": None, "pfc_enabled": [3], "dscp2prio": {}}


def test_collect_on_a_machine_without_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    data = hca.collect(gdr=True)
    assert data["sysfs"] == {} and "not found" in data["ibstat"]["error"]
    assert data["ib_write_bw"] == {}


def test_mlnx_qos_as_upstreams_printer_writes_it():
    """tests/fixtures/roce/mlnx_qos-upstream-wrapped.txt follows mlnx-tools' own pretty_print (README there): a
    priority's DSCPs wrap onto a second `prio:N` line, firmware DCBX, two PFC priorities."""
    text = (REPO / "tests/fixtures/roce/mlnx_qos-upstream-wrapped.txt").read_text()
    got = hca.parse_mlnx_qos(text)
    assert got["trust"] == "dscp" and got["pfc_enabled"] == [3, 4]
    assert sorted(got["dscp2prio"]) == list(range(64))
    assert got["dscp2prio"][46] == 3 and got["dscp2prio"][45] == 5 and got["dscp2prio"][26] == 3
    assert {p for d, p in got["dscp2prio"].items() if d // 8 != p} == {3}  # only DSCP 46 left the default map
