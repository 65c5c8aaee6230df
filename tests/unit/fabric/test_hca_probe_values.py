"""HCA probe (gridready/probe/hca.py) by value, beyond test_hca_probe_collectors.py: the real gpud sysfs tree and
ibstat captures, nvidia-smi topo matrices, perftest and mlnx_qos outputs, field by field, and malformed input."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import hca
from tests.unit.fabric.sysfs_tree import plant_hca, write

FIX = Path(__file__).resolve().parents[2] / "fixtures"
PUBLIC = FIX / "public"
SYSFS = PUBLIC / "sysfs-infiniband/sys-class-infiniband__8xH100-ndr__FAIL-mlx5_1-link_downed-255__gpud"
IBSTAT = PUBLIC / "ibstat"
PERFTEST = PUBLIC / "perftest/ib_write_bw-loopback-8MiB__ib0-HDR__superbench.log"
TOPO = PUBLIC / "nvidia-smi"
TOPO_H200 = TOPO / "nvidia-smi-topo-m__8xH200-8xNIC-mlx5__drv570.211.01__unresolved-repo.txt"
TOPO_H800 = TOPO / "nvidia-smi-topo-m__8xH800-NV8-4xNIC__copy-truncated__llm-action.txt"
ROCE = FIX / "roce"

BOND_COUNTERS = {"link_downed": 0, "link_error_recovery": 0, "local_link_integrity_errors": 0,
                 "excessive_buffer_overrun_errors": 15, "symbol_error": 0, "port_rcv_errors": 14,
                 "port_rcv_remote_physical_errors": 0, "port_xmit_discards": 0, "port_xmit_data": 230442669431839,
                 "port_rcv_data": 230539874932483}
NO_PCIE = {"address": None, "current_link_speed": None, "current_link_width": None, "max_link_speed": None,
           "max_link_width": None}
BOND_0 = {"fw_ver": "32.38.3056", "hca_type": "MT41692", "board_id": "MT_0000000884", "pcie": NO_PCIE, "netdevs": [],
          "ports": {"1": {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "200 Gb/sec (2X NDR)",
                          "link_layer": "Ethernet", "counters": BOND_COUNTERS, "gids": {}, "gid_types": {}}}}


# ---------------------------------------------------------------- sysfs: the real gpud tree

def test_real_tree_lists_every_device_and_the_roce_bond() -> None:
    d = hca.read_ib_sysfs(SYSFS)
    assert list(d) == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"]
    assert d["mlx5_bond_0"] == BOND_0
    assert d["mlx5_1"]["ports"]["1"]["counters"] == {**BOND_COUNTERS, "link_downed": 255,
                                                     "port_rcv_data": 205128687774249}


@pytest.mark.parametrize("layout", ["sys/class/infiniband", "class/infiniband"])
def test_real_tree_under_a_root(tmp_path: Path, layout: str) -> None:
    shutil.copytree(SYSFS / "mlx5_bond_0", tmp_path / layout / "mlx5_bond_0")
    assert hca.read_ib_sysfs(tmp_path) == {"mlx5_bond_0": BOND_0}
    assert hca.counters_snapshot(tmp_path)["counters"] == {"mlx5_bond_0": {"1": BOND_COUNTERS}}


def test_counters_snapshot_has_the_time_and_counters_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hca.time, "time", lambda: 1733100000.25)
    snap = hca.counters_snapshot(SYSFS)
    assert list(snap) == ["time", "counters"] and snap["time"] == 1733100000.25
    assert snap["counters"]["mlx5_bond_0"] == {"1": BOND_COUNTERS}


@pytest.fixture
def roce_root(tmp_path: Path) -> Path:
    """The real mlx5_bond_0 as a RoCE port: its PCI function, two netdevs and a GID table of four entries."""
    plant_hca(tmp_path, SYSFS / "mlx5_bond_0", "pci0000:9a/0000:9b:00.0",
              ("16.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16"), ["bond0", "eth2"],
              [("fe80:0000:0000:0000:ba3f:d2ff:fe6e:2778", "IB/RoCE v1"),
               ("fe80:0000:0000:0000:ba3f:d2ff:fe6e:2778", "RoCE v2"),
               ("0000:0000:0000:0000:0000:0000:0000:0000", "IB/RoCE v1"),
               ("0000:0000:0000:0000:0000:ffff:0a0a:0105", "RoCE v2")])
    net = tmp_path / "sys/class/net/bond0"
    write(net / "mtu", "4200")
    for prio in range(8):
        write(net / "ecn/roce_np/enable" / str(prio), "1" if prio == 3 else "0")
        write(net / "ecn/roce_rp/enable" / str(prio), "1" if prio == 3 else "0")
    return tmp_path


def test_roce_port_pci_link_netdevs_and_gid_table(roce_root: Path) -> None:
    d = hca.read_ib_sysfs(roce_root)
    assert d == {"mlx5_bond_0": {
        **BOND_0,
        "pcie": {"address": "0000:9b:00.0", "current_link_speed": "16.0 GT/s PCIe", "current_link_width": "8",
                 "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"},
        "netdevs": ["bond0", "eth2"],
        "ports": {"1": {**BOND_0["ports"]["1"],
                        "gids": {"0": "fe80:0000:0000:0000:ba3f:d2ff:fe6e:2778",
                                 "1": "fe80:0000:0000:0000:ba3f:d2ff:fe6e:2778",
                                 "3": "0000:0000:0000:0000:0000:ffff:0a0a:0105"},
                        "gid_types": {"0": "IB/RoCE v1", "1": "RoCE v2", "3": "RoCE v2"}}}}}


def test_a_gid_without_a_type_file_has_no_type(roce_root: Path) -> None:
    (roce_root / "sys/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/types/3").unlink()
    port = hca.read_ib_sysfs(roce_root)["mlx5_bond_0"]["ports"]["1"]
    assert (list(port["gids"]), port["gid_types"]) == (["0", "1", "3"], {"0": "IB/RoCE v1", "1": "RoCE v2"})


def test_netdev_values_and_a_missing_netdev(roce_root: Path) -> None:
    ecn = {str(p): int(p == 3) for p in range(8)}
    assert hca.read_netdev("bond0", roce_root) == {"exists": True, "mtu": 4200, "ecn_roce_np": ecn,
                                                    "ecn_roce_rp": ecn}
    assert hca.read_netdev("eth2", roce_root) == {"exists": False, "mtu": None, "ecn_roce_np": {},
                                                   "ecn_roce_rp": {}}


def test_sysfs_root_defaults_to_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRIDREADY_SYSFS_ROOT", raising=False)
    assert hca.sysfs_root() == Path("/")


# ---------------------------------------------------------------- ibstat

@pytest.mark.parametrize(("name", "n_cas", "first", "errors"), [
    ("ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt", 12,
     ("mlx5_0", "MT4129", "28.39.1002", {"state": "Active", "physical_state": "LinkUp", "rate": "400",
                                         "base_lid": "75", "sm_lid": "334", "port_guid": "0x946dae0300cde72c",
                                         "link_layer": "InfiniBand"}), []),
    ("ibstat__8xH100-roce-400G__all-active__gpud.txt", 12,
     ("mlx5_0", "MT4129", "28.39.1002", {"state": "Active", "physical_state": "LinkUp", "rate": "400",
                                         "base_lid": "0", "sm_lid": "0", "port_guid": "0xa288c2fffee3142a",
                                         "link_layer": "Ethernet"}), []),
    ("ibstat__A100__FAIL-ibpanic-exit255__gpud.txt", 8,
     ("mlx5_0", "MT4124", "20.41.1000", {"state": "Active", "physical_state": "LinkUp", "rate": "200",
                                         "base_lid": "13247", "sm_lid": "1", "port_guid": "0x00155dfffd3411eb",
                                         "link_layer": "InfiniBand"}),
     ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]),
])
def test_real_ibstat_outputs(name: str, n_cas: int, first: tuple[str, str, str, dict[str, str]],
                             errors: list[str]) -> None:
    p = hca.parse_ibstat((IBSTAT / name).read_text())
    ca, ca_type, fw, port = first
    assert (len(p["cas"]), next(iter(p["cas"])), p["errors"]) == (n_cas, ca, errors)
    assert p["cas"][ca] == {"ca_type": ca_type, "ports_count": "1", "firmware": fw, "ports": {"1": port}}


def test_real_ibstat_every_port_state() -> None:
    p = hca.parse_ibstat((IBSTAT / "ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt").read_text())
    down = {ca: c["ports"]["1"]["rate"] for ca, c in p["cas"].items() if c["ports"]["1"]["state"] != "Active"}
    assert len(down) == 3 and set(down.values()) == {"40"}
    assert sum(c["ports"]["1"]["link_layer"] == "InfiniBand" for c in p["cas"].values()) == 8


@pytest.mark.parametrize(("text", "want"), [
    ("", {"cas": {}, "errors": []}),
    # `ibstat mlx5_0 1` prints one port's fields without a CA line: nothing to file them under
    ("State: Active\nPhysical state: LinkUp\nRate: 400\nLink layer: InfiniBand\n", {"cas": {}, "errors": []}),
    ("Port 1:\n\tState: Down\nCA 'mlx5_3'\n\tCA type: MT4129", {"cas": {"mlx5_3": {"ca_type": "MT4129", "ports": {}}},
                                                                 "errors": []}),
    # a port field before any `Port N:` line lands on the CA; CA fields after a Port line stay on the CA
    ("CA 'mlx5_0'\n\tState: Active\n\tPort 1:\n\t\tFirmware version: 28.39.1002\n\t\tCA type: MT4129\n"
     "\t\tNumber of ports: 1\n\t\tRate: 400",
     {"cas": {"mlx5_0": {"state": "Active", "firmware": "28.39.1002", "ca_type": "MT4129", "ports_count": "1",
                         "ports": {"1": {"rate": "400"}}}}, "errors": []}),
    # a value holding colons is kept whole
    ("CA 'mlx5_2'\n\tPort 1:\n\t\tPort GUID: fe80::1:2",
     {"cas": {"mlx5_2": {"ports": {"1": {"port_guid": "fe80::1:2"}}}}, "errors": []}),
    ("ibpanic: [7] main: can't init UMAD library\nibwarn: [7] umad_init: can't read ABI version\n"
     "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\nmlx5_9: Query Failed",
     {"cas": {"mlx5_0": {"ports": {"1": {"state": "Down"}}}},
      "errors": ["ibpanic: [7] main: can't init UMAD library", "ibwarn: [7] umad_init: can't read ABI version",
                 "mlx5_9: Query Failed"]}),
    ("CA 'a'\n\tPort 1:\n\t\tRate: 100\n\nCA 'b'\n\n\tRate: 200\n\tPort 2:\n\n\t\tRate: 400",
     {"cas": {"a": {"ports": {"1": {"rate": "100"}}}, "b": {"rate": "200", "ports": {"2": {"rate": "400"}}}},
      "errors": []}),
])
def test_ibstat_field_placement_and_errors(text: str, want: dict[str, Any]) -> None:
    assert hca.parse_ibstat(text) == want


def _fake_run(outputs: dict[str, dict[str, Any]], calls: list[tuple[list[str], float]]) -> Any:
    def run(argv: list[str], timeout: float = 60.0, **kw: Any) -> dict[str, Any]:
        calls.append((list(argv), timeout))
        return {"argv": argv, "rc": 0, "stdout": "", "stderr": "", "error": None, **outputs.get(argv[0], {})}
    return run


def test_run_ibstat_reads_stdout_then_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], float]] = []
    text = (IBSTAT / "ibstat__A100__FAIL-ibpanic-exit255__gpud.txt").read_text()
    out, _, panic = text.rstrip("\n").rpartition("\n")
    monkeypatch.setattr(hca, "run", _fake_run({"ibstat": {"rc": 255, "stdout": out, "stderr": panic}}, calls))
    res = hca.run_ibstat()
    assert calls == [(["ibstat"], 60.0)]
    assert res == {"argv": ["ibstat"], "rc": 255, "stdout": out, "stderr": panic, "error": None,
                   "parsed": hca.parse_ibstat(text)}
    assert res["parsed"]["cas"]["mlx5_7"]["ports"]["1"]["link_layer"] == "InfiniBand"  # stdout's last line


# ---------------------------------------------------------------- ib_write_bw

def test_real_loopback_log() -> None:
    assert hca.parse_ib_write_bw(PERFTEST.read_text()) == {"bytes": 8388608, "iterations": 20000,
                                                          "peak_gbits": 201.8, "avg_gbits": 201.8}


# no other ib_write_bw capture exists: these result lines copy the real loopback log's layout (#bytes #iterations
# BW peak, BW average, MsgRate), under its MB/s header or the Gb/s one perftest prints with --report_gbits
MB = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
GB = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"


@pytest.mark.parametrize(("lines", "want"), [
    ([MB, " 8388608    20000            24056.74            24001.37\t\t   0.003007"],
     (8388608, 20000, 201.8, 201.34)),
    ([GB, " 65536      5000             97.53              96.125      0.183"], (65536, 5000, 97.53, 96.12)),
    ([GB, " 65536      5000             97.53              96.12"], (65536, 5000, 97.53, 96.12)),  # no MsgRate
    ([GB, " 65536      5000             n/a                96.12       0.183",
      " 131072     2500             190.506            189.25      0.181"], (131072, 2500, 190.51, 189.25)),
    ([GB, " 131072     2500             190.506            189.25      0.181", " 65536      5000      97.53"],
     (131072, 2500, 190.51, 189.25)),
    ([GB, " client     2500             190.506            189.25      0.181"], (None, None, None, None)),
    ([GB, " 65536      5000.0           97.53              96.12       0.183"], (None, None, None, None)),
    ([" 65536      5000             97.53              96.12       0.183"], (None, None, None, None)),
])
def test_ib_write_bw_lines(lines: list[str], want: tuple[Any, ...]) -> None:
    got = hca.parse_ib_write_bw("\n".join(lines))
    assert got == dict(zip(("bytes", "iterations", "peak_gbits", "avg_gbits"), want, strict=True))


# ---------------------------------------------------------------- nvidia-smi topo -m

def test_real_h200_topology_and_nearest_nics() -> None:
    t = hca.parse_topo(TOPO_H200.read_text())
    assert (t["gpus"], t["nics"]) == ([f"GPU{i}" for i in range(8)], {f"NIC{i}": f"mlx5_{i}" for i in range(8)})
    assert t["links"]["GPU7"] == {"NIC0": "SYS", "NIC1": "SYS", "NIC2": "PIX", "NIC3": "SYS", "NIC4": "SYS",
                                  "NIC5": "NODE", "NIC6": "NODE", "NIC7": "NODE"}
    assert hca.nearest_nics(t) == {g: {"nic": f"mlx5_{n}", "link": "PIX"}
                                   for g, n in enumerate([4, 1, 0, 3, 6, 7, 5, 2])}


def test_real_h800_copy_with_nic_columns_cut_reads_links_from_the_nic_rows() -> None:
    t = hca.parse_topo(TOPO_H800.read_text())
    assert t["nics"] == {f"NIC{i}": f"mlx5_{i}" for i in range(4)}
    assert t["links"]["GPU1"] == {"NIC0": "PIX", "NIC1": "NODE", "NIC2": "SYS", "NIC3": "SYS"}
    assert t["links"]["GPU7"] == {"NIC0": "SYS", "NIC1": "SYS", "NIC2": "PIX", "NIC3": "PIX"}
    assert hca.nearest_nics(t) == {0: {"nic": "mlx5_0", "link": "NODE"}, 1: {"nic": "mlx5_0", "link": "PIX"},
                                   2: {"nic": "mlx5_0", "link": "NODE"}, 3: {"nic": "mlx5_1", "link": "PIX"},
                                   4: {"nic": "mlx5_2", "link": "NODE"}, 5: {"nic": "mlx5_2", "link": "NODE"},
                                   6: {"nic": "mlx5_2", "link": "NODE"}, 7: {"nic": "mlx5_2", "link": "PIX"}}


@pytest.mark.parametrize(("path", "gpus"), [
    (FIX / "h200x1/topo-m.txt", ["GPU0"]),  # one GPU, no NIC: the header's second cell is "CPU Affinity"
    (TOPO / "nvidia-smi-topo-m__8xH100__NVLink-only-no-NIC-columns__ml-engineering.txt", [f"GPU{i}" for i in range(8)]),
])
def test_real_topologies_without_nics(path: Path, gpus: list[str]) -> None:
    t = hca.parse_topo(path.read_text())
    assert t == {"gpus": gpus, "nics": {}, "links": {g: {} for g in gpus}}
    assert hca.nearest_nics(t) == {}


def test_gpu_rows_alone_give_the_links_of_the_whole_matrix() -> None:
    text = TOPO_H200.read_text()
    cut = "\n".join(ln for ln in text.splitlines() if not re.match(r"NIC\d+\t", ln))  # the NIC rows dropped
    assert cut.count("\n") < text.count("\n") and hca.parse_topo(cut) == hca.parse_topo(text)


def test_sixteen_gpus_in_numeric_order() -> None:
    names = [f"GPU{i}" for i in range(16)]
    rows = ["\t" + "\t".join([*names, "NIC0", "CPU Affinity"])]
    rows += [f"{g}\t" + "\t".join(" X " if h == g else "NV6" for h in names) + f"\t{'PIX' if g == 'GPU11' else 'SYS'}"
             f"\t0-23" for g in names]
    rows += ["NIC0\t" + "\t".join("PIX" if g == "GPU11" else "SYS" for g in names) + "\t X ", "NIC Legend:",
             "  NIC0: mlx5_0"]
    t = hca.parse_topo("\n".join(rows))
    assert t["gpus"] == names and list(t["links"]) == names
    assert t["links"]["GPU11"] == {"NIC0": "PIX"} and t["links"]["GPU2"] == {"NIC0": "SYS"}
    assert hca.nearest_nics(t)[11] == {"nic": "mlx5_0", "link": "PIX"}


@pytest.mark.parametrize("strip", [str.lstrip, str.strip])
def test_a_copy_trimmed_of_leading_whitespace_reads_the_same(strip: Callable[[str], str]) -> None:
    """Logs and tickets often trim lines: the header without its leading tab is still the header."""
    text = TOPO_H200.read_text()
    trimmed = "\n".join(strip(ln) for ln in text.splitlines())
    assert trimmed.splitlines()[0].startswith("GPU0") and hca.parse_topo(trimmed) == hca.parse_topo(text)


def test_empty_topology() -> None:
    assert hca.parse_topo("") == {"gpus": [], "nics": {}, "links": {}}
    assert hca.parse_topo("Legend:\n\n  X    = Self\n") == {"gpus": [], "nics": {}, "links": {}}


@pytest.mark.parametrize(("links", "nics", "want"), [
    ({"GPU0": {"NIC10": "PIX", "NIC2": "PIX", "NIC1": "PXB"}}, {}, {0: {"nic": "NIC2", "link": "PIX"}}),
    ({"GPU3": {"NIC10": "NODE", "NIC9": "NODE"}}, {"NIC9": "mlx5_9", "NIC10": "mlx5_10"},
     {3: {"nic": "mlx5_9", "link": "NODE"}}),
    ({"GPU1": {"mlx5_1": "SYS", "mlx5_0": "PHB", "NIC4": "NV4"}}, {"NIC0": "mlx5_7"},
     {1: {"nic": "mlx5_0", "link": "PHB"}}),
    ({"GPU0": {"NIC0": "NV18"}, "GPU2": {}}, {}, {}),
])
def test_nearest_nic_ranking_and_ties(links: dict[str, dict[str, str]], nics: dict[str, str],
                                      want: dict[int, dict[str, str]]) -> None:
    assert hca.nearest_nics({"gpus": list(links), "nics": nics, "links": links}) == want


def test_run_topo_argv_and_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], float]] = []
    text = TOPO_H800.read_text()
    monkeypatch.setattr(hca, "run", _fake_run({"nvidia-smi": {"stdout": text}}, calls))
    res = hca.run_topo()
    assert calls == [(["nvidia-smi", "topo", "-m"], 60.0)]
    assert res == {"argv": ["nvidia-smi", "topo", "-m"], "rc": 0, "stdout": text, "stderr": "", "error": None,
                   "parsed": hca.parse_topo(text)}
    assert res["parsed"]["gpus"] == [f"GPU{i}" for i in range(8)]


@pytest.mark.parametrize("rc", [1, None, 255])
def test_run_topo_failure_is_not_parsed(monkeypatch: pytest.MonkeyPatch, rc: int | None) -> None:
    monkeypatch.setattr(hca, "run", _fake_run({"nvidia-smi": {"rc": rc, "stdout": TOPO_H800.read_text()}}, []))
    assert hca.run_topo()["parsed"] is None


# ---------------------------------------------------------------- gdr_only

def test_gdr_only_pairs_each_hca_with_its_nearest_gpu_on_the_real_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    text = TOPO_H200.read_text()
    seen: list[tuple[str, int | None]] = []
    monkeypatch.setattr(hca, "run", _fake_run({"nvidia-smi": {"stdout": text}}, []))
    monkeypatch.setattr(hca, "run_ib_write_bw", lambda h, gpu: seen.append((h, gpu)) or {"hca": h, "gpu": gpu})
    got = hca.gdr_only(["mlx5_0", "mlx5_4", "mlx5_2", "mlx5_bond_0"])
    assert seen == [("mlx5_0", 2), ("mlx5_4", 0), ("mlx5_2", 7), ("mlx5_bond_0", None)]
    assert got == {"ib_write_bw": {h: {"hca": h, "gpu": g} for h, g in seen}}


@pytest.mark.parametrize("topo_out", [{"rc": 9}, {"stdout": ""}])
def test_gdr_only_without_a_topology_uses_host_memory(monkeypatch: pytest.MonkeyPatch,
                                                      topo_out: dict[str, Any]) -> None:
    seen: list[tuple[str, int | None]] = []
    monkeypatch.setattr(hca, "run", _fake_run({"nvidia-smi": topo_out}, []))
    monkeypatch.setattr(hca, "run_ib_write_bw", lambda h, gpu: seen.append((h, gpu)) or {"gpu": gpu})
    assert hca.gdr_only(["mlx5_0"]) == {"ib_write_bw": {"mlx5_0": {"gpu": None}}}
    assert seen == [("mlx5_0", None)]


# ---------------------------------------------------------------- mlnx_qos

@pytest.mark.parametrize(("name", "trust", "pfc", "moved"), [
    ("mlnx_qos-dscp-pfc3.txt", "dscp", [3], {}),
    ("mlnx_qos-pcp-nopfc.txt", "pcp", [], {}),
    ("mlnx_qos-upstream-wrapped.txt", "dscp", [3, 4], {46: 3}),  # priority 3's ninth DSCP on a line of its own
])
def test_real_mlnx_qos(name: str, trust: str, pfc: list[int], moved: dict[int, int]) -> None:
    got = hca.parse_mlnx_qos((ROCE / name).read_text())
    assert got == {"trust": trust, "pfc_enabled": pfc, "dscp2prio": {d: d // 8 for d in range(64)} | moved}


@pytest.mark.parametrize(("text", "want"), [
    ("", {"trust": None, "pfc_enabled": [], "dscp2prio": {}}),
    ("Priority trust state: pcp\n", {"trust": "pcp", "pfc_enabled": [], "dscp2prio": {}}),
    ("\tenabled     0   0   0   1   0   0   0   0\n", {"trust": None, "pfc_enabled": [], "dscp2prio": {}}),  # no header
    # an `enabled` row outside the PFC block, and a second one inside, are not read
    ("enabled 1 1 1 1 1 1 1 1\nPFC configuration:\n\tpriority 0 1 2 3 4 5 6 7\n\tenabled 0 0 0 1 0 0 0 0\n"
     "\tenabled 1 1 1 1 1 1 1 1\n", {"trust": None, "pfc_enabled": [3], "dscp2prio": {}}),
    # a truncated mapping line without `dscp:` is skipped
    ("\tprio:2\n\tprio:3 dscp:24,26,\n", {"trust": None, "pfc_enabled": [], "dscp2prio": {24: 3, 26: 3}}),
])
def test_mlnx_qos_partial_outputs(text: str, want: dict[str, Any]) -> None:
    assert hca.parse_mlnx_qos(text) == want


def test_mb_per_sec_is_perftest_mebibytes() -> None:
    """perftest's MB/sec is 2**20 bytes a second: the real log's own MsgRate x message size says so (3007 messages of
    8 MiB a second are 24056 x 2**20 bytes, not 24056 x 10**6), so 24056.72 MB/sec is 201.8 Gb/s, not 192.45."""
    text = PERFTEST.read_text()
    row = next(ln.split() for ln in text.splitlines() if ln.split()[:1] == ["8388608"])
    size, mb_per_s, msg_rate = int(row[0]), float(row[3]), float(row[4])
    assert abs(msg_rate * 1e6 * size / mb_per_s - 2**20) / 2**20 < 2e-4
    assert hca.parse_ib_write_bw(text)["avg_gbits"] == round(msg_rate * 1e6 * size * 8 / 1e9, 1)
