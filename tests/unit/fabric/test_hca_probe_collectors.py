"""HCA collectors (gridready/probe/hca.py) by value: sysfs trees, tool runs, command lines and the probe's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import hca
from tests.unit.fabric.sysfs_tree import plant_hca, write
from tests.unit.probe.fake_node import Done, Hangs, Processes

PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"
ROCE = PUBLIC.parent / "roce"
SYSFS = PUBLIC / "sysfs-infiniband/sys-class-infiniband__8xH100-ndr__FAIL-mlx5_1-link_downed-255__gpud"
IBSTAT_NDR = PUBLIC / "ibstat/ibstat__8xH100-ib-ndr__FAIL-3-ethernet-ports-down__gpud.txt"
PERFTEST = PUBLIC / "perftest/ib_write_bw-loopback-8MiB__ib0-HDR__superbench.log"
TOPO_H200 = PUBLIC / "nvidia-smi/nvidia-smi-topo-m__8xH200-8xNIC-mlx5__drv570.211.01__unresolved-repo.txt"

MLX5_0_COUNTERS = {
    "link_downed": 0, "link_error_recovery": 0, "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 15, "symbol_error": 0, "port_rcv_errors": 14,
    "port_rcv_remote_physical_errors": 0, "port_xmit_discards": 0, "port_xmit_data": 230442669431839,
    "port_rcv_data": 230539874932483,
}
NO_PCIE = {"address": None, "current_link_speed": None, "current_link_width": None, "max_link_speed": None,
           "max_link_width": None}


# ---------------------------------------------------------------- sysfs

def test_real_sysfs_tree_reads_every_field_of_a_device():
    d = hca.read_ib_sysfs(SYSFS)
    assert d["mlx5_0"] == {
        "fw_ver": "28.41.1000", "hca_type": "MT4129", "board_id": "MT_0000000838", "pcie": NO_PCIE, "netdevs": [],
        "ports": {"1": {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
                        "link_layer": "InfiniBand", "counters": MLX5_0_COUNTERS, "gids": {}, "gid_types": {}}},
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A root holding sys/class/infiniband (mlx5_0 with its PCI device and netdevs) and sys/class/net."""
    ib = tmp_path / "sys/class/infiniband"
    port = plant_hca(tmp_path, SYSFS / "mlx5_0", "pci0000:17/0000:1a:00.0",
                     ("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"), ["ens1f1np1", "ens1f0np0"],
                     [("fe80:0000:0000:0000:0e42:a1ff:fe5b:7c20", "IB/RoCE v1"),
                      ("0000:0000:0000:0000:0000:0000:0000:0000", "RoCE v2"),
                      ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
                      ("fe80:0000:0000:0000:0e42:a1ff:fe5b:7c21", "")]) / "ports/1"
    write(port / "counters/symbol_error", "n/a")
    write(ib / "mlx5_0/ports/README", "not a port")
    (ib / "not_a_device").mkdir()
    net = tmp_path / "sys/class/net/ens1f0np0"
    write(net / "mtu", "9000")
    for i in range(8):
        write(net / "ecn/roce_np/enable" / str(i), str(int(i == 3)))
    write(net / "ecn/roce_rp/enable/3", "1")
    write(net / "ecn/roce_rp/enable/4", "x")
    return tmp_path


def test_sysfs_device_with_pci_link_netdevs_and_gids(tree):
    d = hca.read_ib_sysfs(tree)
    assert list(d) == ["mlx5_0"]
    assert d["mlx5_0"]["pcie"] == {"address": "0000:1a:00.0", "current_link_speed": "32.0 GT/s PCIe",
                                   "current_link_width": "16", "max_link_speed": "32.0 GT/s PCIe",
                                   "max_link_width": "16"}
    assert d["mlx5_0"]["netdevs"] == ["ens1f0np0", "ens1f1np1"]
    assert list(d["mlx5_0"]["ports"]) == ["1"]
    port = d["mlx5_0"]["ports"]["1"]
    # an all-zero GID is an empty slot: skipped, the table read on
    assert port["gids"] == {"0": "fe80:0000:0000:0000:0e42:a1ff:fe5b:7c20",
                            "2": "0000:0000:0000:0000:0000:ffff:0a00:0001",
                            "3": "fe80:0000:0000:0000:0e42:a1ff:fe5b:7c21"}
    assert port["gid_types"] == {"0": "IB/RoCE v1", "2": "RoCE v2"}
    assert port["counters"] == {k: v for k, v in MLX5_0_COUNTERS.items() if k != "symbol_error"}


def test_gid_table_is_read_up_to_its_first_missing_slot_and_at_most_16(tree):
    gids = tree / "sys/class/infiniband/mlx5_0/ports/1/gids"
    (gids / "1").unlink()
    assert list(hca.read_ib_sysfs(tree)["mlx5_0"]["ports"]["1"]["gids"]) == ["0"]
    for i in range(1, 20):
        write(gids / str(i), f"fe80::{i}")
    assert list(hca.read_ib_sysfs(tree)["mlx5_0"]["ports"]["1"]["gids"]) == [str(i) for i in range(16)]


def test_sysfs_root_from_the_environment(tree, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tree))
    assert hca.sysfs_root() == tree
    assert list(hca.read_ib_sysfs()) == ["mlx5_0"]
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", "")
    assert hca.sysfs_root() == Path("/")
    monkeypatch.delenv("GRIDREADY_SYSFS_ROOT")
    assert hca.sysfs_root() == Path("/")


def test_class_dir_given_directly_and_missing_tree(tree, tmp_path):
    assert list(hca.read_ib_sysfs(tree / "sys/class/infiniband")) == ["mlx5_0"]
    assert list(hca.read_ib_sysfs(tree / "sys")) == ["mlx5_0"]  # <root>/class/infiniband
    assert hca.read_ib_sysfs(tmp_path / "absent") == {}


def test_netdev_mtu_and_ecn_of_both_ends(tree):
    assert hca.read_netdev("ens1f0np0", tree) == {
        "exists": True, "mtu": 9000, "ecn_roce_np": {str(i): int(i == 3) for i in range(8)},
        "ecn_roce_rp": {"3": 1, "4": None}}
    assert hca.read_netdev("ens1f1np1", tree) == {"exists": False, "mtu": None, "ecn_roce_np": {},
                                                   "ecn_roce_rp": {}}


def test_counters_snapshot_per_hca_and_port(tree, monkeypatch):
    monkeypatch.setattr(hca.time, "time", lambda: 1700000000.5)
    snap = hca.counters_snapshot(tree)
    assert snap["time"] == 1700000000.5
    assert snap["counters"] == {"mlx5_0": {"1": {k: v for k, v in MLX5_0_COUNTERS.items() if k != "symbol_error"}}}


# ---------------------------------------------------------------- ibstat

def test_ibstat_reads_ca_and_port_fields_of_the_real_output():
    p = hca.parse_ibstat(IBSTAT_NDR.read_text())
    ca = p["cas"]["mlx5_0"]
    assert {k: v for k, v in ca.items() if k != "ports"} == {"ca_type": "MT4129", "firmware": "28.39.1002",
                                                              "ports_count": "1"}
    assert list(ca["ports"]) == ["1"]
    port = ca["ports"]["1"]
    assert set(port) == {"state", "physical_state", "rate", "base_lid", "sm_lid", "port_guid", "link_layer"}
    assert (port["state"], port["physical_state"], port["rate"], port["link_layer"]) == (
        "Active", "LinkUp", "400", "InfiniBand")


def test_ibstat_errors_and_lines_outside_a_ca():
    text = "\n".join([
        "Port 1:", "State: Active", "ibwarn: [3] umad_init: can't read ABI version",
        "CA 'mlx5_0'", "\tCA type: MT4129", "\tFirmware version: 28.39.1002", "\tHardware version: 0",
        "\tPort 1:", "\t\tState: Down", "\t\tPhysical state: Disabled", "\t\tCapability mask: 0xa751e848",
        "\t\tRate: 400", "", "CA 'mlx5_1'", "\tCA type: MT4129", "\tFirmware version: 28.39.1003",
        "\tNumber of ports: 2",
        "\tPort 2:", "\t\tLink layer: Ethernet", "Port 3:", "\t\tLink layer: InfiniBand",
        "ibpanic: [1] main: stat of IB device 'mlx5_8' failed: No such file or directory",
        "src/query: Query FAILED for port",
    ])
    assert hca.parse_ibstat(text) == {
        "cas": {
            "mlx5_0": {"ca_type": "MT4129", "firmware": "28.39.1002",
                       "ports": {"1": {"state": "Down", "physical_state": "Disabled", "rate": "400"}}},
            "mlx5_1": {"ca_type": "MT4129", "firmware": "28.39.1003", "ports_count": "2",
                       "ports": {"2": {"link_layer": "Ethernet"}, "3": {"link_layer": "InfiniBand"}}},
        },
        "errors": ["ibwarn: [3] umad_init: can't read ABI version",
                   "ibpanic: [1] main: stat of IB device 'mlx5_8' failed: No such file or directory",
                   "src/query: Query FAILED for port"],
    }


# ---------------------------------------------------------------- running tools (the node's processes: fake_node)

RUN_KW = {"capture_output": True, "text": True, "check": False}


def test_run_missing_tool_is_data(monkeypatch):
    node = Processes().install(monkeypatch, hca)
    assert hca.run(["ibstat", "-l"]) == {"argv": ["ibstat", "-l"], "rc": None, "stdout": "", "stderr": "",
                                         "error": "ibstat not found"}
    assert node.runs == []


def test_run_records_exit_code_and_both_streams_with_the_caller_s_keywords(monkeypatch, tmp_path):
    argv = ["mlnx_qos", "-i", "ens1f0np0"]
    node = Processes({"mlnx_qos"}, {tuple(argv): Done(3, "out\n", "bad\n")}).install(monkeypatch, hca)
    assert hca.run(argv, timeout=7.5, cwd=tmp_path) == {"argv": argv, "rc": 3, "stdout": "out\n", "stderr": "bad\n",
                                                        "error": None}
    assert node.runs == [(tuple(argv), {**RUN_KW, "timeout": 7.5, "cwd": tmp_path})]


@pytest.mark.parametrize(("partial", "stdout"), [(b"half", "half"), ("half", "half"), (None, "")])
def test_run_default_timeout_is_a_minute_and_keeps_partial_output(monkeypatch, partial, stdout):
    node = Processes({"ibstat"}, {("ibstat",): Hangs(partial)}).install(monkeypatch, hca)
    assert hca.run(["ibstat"]) == {"argv": ["ibstat"], "rc": None, "stdout": stdout, "stderr": "",
                                   "error": "timed out after 60.0s"}
    assert node.runs == [(("ibstat",), {**RUN_KW, "timeout": 60.0})]


def test_run_timeout_names_the_given_limit(monkeypatch):
    Processes({"sh"}, {("sh",): Hangs(b"partial\n")}).install(monkeypatch, hca)
    assert hca.run(["sh"], timeout=0.8) == {"argv": ["sh"], "rc": None, "stdout": "partial\n", "stderr": "",
                                            "error": "timed out after 0.8s"}


def _fake_run(outputs: dict[str, dict[str, Any]], calls: list):
    def run(argv, timeout=60.0, **kw):
        calls.append((list(argv), timeout))
        return {"argv": argv, "rc": 0, "stdout": "", "stderr": "", "error": None, **outputs.get(argv[0], {})}
    return run


def test_run_ibstat_parses_stdout_and_stderr(monkeypatch):
    calls: list = []
    out = {"ibstat": {"rc": 255, "stdout": IBSTAT_NDR.read_text(), "stderr": "ibpanic: [1] main: boom"}}
    monkeypatch.setattr(hca, "run", _fake_run(out, calls))
    res = hca.run_ibstat()
    assert calls == [(["ibstat"], 60.0)] and res["rc"] == 255
    assert res["parsed"]["errors"] == ["ibpanic: [1] main: boom"] and len(res["parsed"]["cas"]) == 12


@pytest.mark.parametrize(("rc", "parsed"), [(0, True), (1, False), (None, False)])
def test_run_topo_parses_only_a_clean_exit(monkeypatch, rc, parsed):
    calls: list = []
    monkeypatch.setattr(hca, "run", _fake_run({"nvidia-smi": {"rc": rc, "stdout": TOPO_H200.read_text()}}, calls))
    res = hca.run_topo()
    assert calls == [(["nvidia-smi", "topo", "-m"], 60.0)]
    assert res["parsed"] == (hca.parse_topo(TOPO_H200.read_text()) if parsed else None)


# ---------------------------------------------------------------- ib_write_bw

def test_ib_write_bw_real_mb_output_in_gbits():
    assert hca.parse_ib_write_bw(PERFTEST.read_text()) == {"bytes": 8388608, "iterations": 20000,
                                                          "peak_gbits": 201.8, "avg_gbits": 201.8}


@pytest.mark.parametrize(("text", "want"), [
    ("", {"bytes": None, "iterations": None, "peak_gbits": None, "avg_gbits": None}),
    (" 8388608 5000 24065.33 24056.72 0.000359\n",  # a result line before any header: no unit, ignored
     {"bytes": None, "iterations": None, "peak_gbits": None, "avg_gbits": None}),
    (" #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n"
     " 65536 100 1000.00 500.00 0.1\n 131072 200 2000.00 1000.004 0.1\n",
     {"bytes": 131072, "iterations": 200, "peak_gbits": 16.78, "avg_gbits": 8.39}),
    (" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
     " 8388608 27000 399.714 399.705 0.005956\n 8388608 x 1 2\n 8388608 27000 n/a 1\n 1 2 3\n",
     {"bytes": 8388608, "iterations": 27000, "peak_gbits": 399.71, "avg_gbits": 399.7}),
])
def test_ib_write_bw_result_lines(text, want):
    assert hca.parse_ib_write_bw(text) == want


IB_WRITE_BW = ["ib_write_bw", "-d", "mlx5_3", "-s", "8388608", "-D", "5", "-p", "18600", "--report_gbits"]
SERVER_KW = {"stdout": Processes.PIPE, "stderr": Processes.STDOUT, "text": True}  # the server's output is piped


@pytest.mark.parametrize(("gpu", "hangs"), [(2, False), (None, True), (0, False)])
def test_ib_write_bw_loopback_server_then_client(monkeypatch, gpu, hangs):
    """perftest's loopback (its README: the server is started with no host, the client names it): the server on
    the HCA, a second's pause for it to listen, the client to `localhost` with the same flags; the server waited
    for 10 s, killed if still running. Figures from the client's report, in Gb/s."""
    argv = [*IB_WRITE_BW, *([f"--use_cuda={gpu}"] if gpu is not None else [])]
    out = "x" * 5000 + PERFTEST.read_text()
    node = Processes({"ib_write_bw"}, {(*argv, "localhost"): Done(0, out)}, server_hangs=hangs)
    node.install(monkeypatch, hca)
    res = hca.run_ib_write_bw("mlx5_3", gpu)
    assert node.popens == [(tuple(argv), SERVER_KW)]
    assert node.events == ["popen", "sleep", "run"] and node.sleeps == [1.0]
    assert node.runs == [((*argv, "localhost"), {**RUN_KW, "timeout": 35})]
    server = node.servers[0]
    assert server.waits == [10] and server.killed is hangs
    assert res == {"hca": "mlx5_3", "gpu": gpu, "rc": 0, "error": None,
                   "parsed": {"bytes": 8388608, "iterations": 20000, "peak_gbits": 201.8, "avg_gbits": 201.8},
                   "stdout": out[-4000:]}
    assert len(res["stdout"]) == 4000 and res["stdout"].endswith(PERFTEST.read_text()[-100:])


def test_ib_write_bw_size_duration_and_port_are_passed(monkeypatch):
    client = ("ib_write_bw", "-d", "mlx5_0", "-s", "65536", "-D", "2", "-p", "18700", "--report_gbits",
              "--use_cuda=1", "localhost")
    node = Processes({"ib_write_bw"}, {client: Done(1, "oops", "ignored")}).install(monkeypatch, hca)
    res = hca.run_ib_write_bw("mlx5_0", 1, size=65536, seconds=2, port=18700)
    assert node.popens == [(client[:-1], SERVER_KW)] and node.runs == [(client, {**RUN_KW, "timeout": 32})]
    assert res == {"hca": "mlx5_0", "gpu": 1, "rc": 1, "error": None, "stdout": "oops",
                   "parsed": {"bytes": None, "iterations": None, "peak_gbits": None, "avg_gbits": None}}


def test_ib_write_bw_client_timed_out_keeps_what_it_printed(monkeypatch):
    client = (*IB_WRITE_BW[:3], "-s", "4096", "-D", "1", "-p", "18600", "--report_gbits", "localhost")
    partial = PERFTEST.read_text().encode()
    node = Processes({"ib_write_bw"}, {client: Hangs(partial)}, server_hangs=True).install(monkeypatch, hca)
    res = hca.run_ib_write_bw("mlx5_3", None, size=4096, seconds=1)
    assert node.runs == [(client, {**RUN_KW, "timeout": 31})]
    assert node.servers[0].killed is True
    assert (res["rc"], res["error"]) == (None, "timed out after 31s")
    assert res["parsed"] == {"bytes": 8388608, "iterations": 20000, "peak_gbits": 201.8, "avg_gbits": 201.8}
    assert res["stdout"] == partial.decode()[-4000:]


def test_ib_write_bw_without_perftest(monkeypatch):
    node = Processes({"ibstat"}).install(monkeypatch, hca)
    assert hca.run_ib_write_bw("mlx5_0", 4) == {"hca": "mlx5_0", "gpu": 4, "rc": None,
                                                "error": "ib_write_bw not found (perftest)", "parsed": None}
    assert node.events == []


# ---------------------------------------------------------------- topo and QoS

def test_topo_matrix_with_nic_legend():
    text = ("\x1b[4m\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
            "GPU0\t X \tNV18\tPXB\tSYS\t0-47\t0\n"
            "GPU1\tNV18\t X \tSYS\tPIX\t48-95\t1\n"
            "NIC0\tPXB\tSYS\t X \tSYS\n"
            "NIC1\tSYS\tPIX\tSYS\t X \n\n"
            "Legend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_3\n")
    t = hca.parse_topo(text)
    assert t == {"gpus": ["GPU0", "GPU1"], "nics": {"NIC0": "mlx5_0", "NIC1": "mlx5_3"},
                 "links": {"GPU0": {"NIC0": "PXB", "NIC1": "SYS"}, "GPU1": {"NIC0": "SYS", "NIC1": "PIX"}}}
    assert hca.nearest_nics(t) == {0: {"nic": "mlx5_0", "link": "PXB"}, 1: {"nic": "mlx5_3", "link": "PIX"}}


def test_topo_links_given_only_on_nic_rows_and_space_separated():
    text = ("        GPU10   mlx5_0  mlx5_1\n"
            "GPU10    X      NODE    SYS\n"
            "mlx5_0  PIX     X       SYS\n"
            "mlx5_1  SYS     SYS     X\n"
            "GPU2    SYS     PHB     SYS\n")
    t = hca.parse_topo(text)
    assert t["gpus"] == ["GPU2", "GPU10"] and t["nics"] == {}
    assert t["links"] == {"GPU2": {"mlx5_0": "PHB", "mlx5_1": "SYS"}, "GPU10": {"mlx5_0": "NODE", "mlx5_1": "SYS"}}


def test_topo_real_h200_rows():
    t = hca.parse_topo(TOPO_H200.read_text())
    assert t["gpus"] == [f"GPU{i}" for i in range(8)]
    assert t["nics"] == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}
    assert t["links"]["GPU0"] == {"NIC0": "NODE", "NIC1": "NODE", "NIC2": "SYS", "NIC3": "NODE", "NIC4": "PIX",
                                  "NIC5": "SYS", "NIC6": "SYS", "NIC7": "SYS"}


def test_topo_copy_with_trailing_tabs_reads_like_the_clean_copy():
    """A space-separated copy whose lines kept a trailing tab: trailing whitespace is not a cell separator."""
    clean = ("        GPU0    GPU1    NIC0\n"
             "GPU0     X      NV18    PXB\n"
             "GPU1    NV18     X      SYS\n"
             "NIC0    PXB     SYS      X\n")
    want = {"gpus": ["GPU0", "GPU1"], "nics": {}, "links": {"GPU0": {"NIC0": "PXB"}, "GPU1": {"NIC0": "SYS"}}}
    assert hca.parse_topo(clean) == want
    assert hca.parse_topo(clean.replace("\n", "\t\n")) == want


def test_topo_first_row_is_never_read_as_the_header():
    """GPU0's row (` X ` in its second cell) is no header, even unindented: a matrix cut above its first row has
    no columns to read, so no link is guessed."""
    assert hca.parse_topo("GPU0\t X \tPIX\nNIC0\tPIX\t X \n") == {"gpus": [], "nics": {}, "links": {}}
    assert hca.parse_topo("GPU0     X      PIX\n") == {"gpus": [], "nics": {}, "links": {}}


def test_topo_header_that_lost_its_leading_tab():
    text = "GPU0\tGPU1\tNIC0\nGPU0\t X \tNV18\tPIX\nGPU1\tNV18\t X \tNODE\n"
    assert hca.parse_topo(text) == {"gpus": ["GPU0", "GPU1"], "nics": {},
                                    "links": {"GPU0": {"NIC0": "PIX"}, "GPU1": {"NIC0": "NODE"}}}


@pytest.mark.parametrize(("name", "trust", "pfc"), [("mlnx_qos-dscp-pfc3.txt", "dscp", [3]),
                                                     ("mlnx_qos-pcp-nopfc.txt", "pcp", [])])
def test_mlnx_qos_real_outputs(name, trust, pfc):
    got = hca.parse_mlnx_qos((ROCE / name).read_text())
    assert got == {"trust": trust, "pfc_enabled": pfc, "dscp2prio": {d: d // 8 for d in range(64)}}


def test_mlnx_qos_trust_empty_and_buffer_row_is_not_pfc():
    text = "Priority Trust State:   \nPFC configuration:\n\tpriority 0 1 2 3\n\tbuffer 1 1 0 0\n\tenabled 0 1 0 1\n"
    assert hca.parse_mlnx_qos(text) == {"trust": None, "pfc_enabled": [1, 3], "dscp2prio": {}}
    text = "enabled 1 1 1\nPFC configuration:\n\tenabled 0 0 0 1\n\tenabled 1 1 1 1\nprio:2 dscp:x,18,\n"
    assert hca.parse_mlnx_qos(text) == {"trust": None, "pfc_enabled": [3], "dscp2prio": {18: 2}}


# ---------------------------------------------------------------- collect, gdr, main

TOPO_2 = ("\tGPU0\tGPU1\tNIC0\tNIC1\n" "GPU0\t X \tNV18\tPIX\tSYS\n" "GPU1\tNV18\t X \tSYS\tPIX\n"
          "NIC Legend:\n  NIC0: mlx5_1\n  NIC1: mlx5_0\n")


@pytest.fixture
def tools(monkeypatch):
    calls: list = []
    bw: list = []
    out = {"ibstat": {"stdout": IBSTAT_NDR.read_text()}, "nvidia-smi": {"stdout": TOPO_2},
           "mlnx_qos": {"stdout": (ROCE / "mlnx_qos-dscp-pfc3.txt").read_text()}}
    monkeypatch.setattr(hca, "run", _fake_run(out, calls))
    monkeypatch.setattr(hca, "run_ib_write_bw", lambda h, gpu: bw.append((h, gpu)) or {"hca": h, "gpu": gpu})
    monkeypatch.setattr(hca.time, "time", lambda: 42.0)
    return calls, bw, out


def test_collect_everything_the_gates_read(tree, monkeypatch, tools):
    calls, bw, out = tools
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tree))
    data = hca.collect(gdr=True, qos=True)
    assert list(data) == ["sysfs_root", "started", "sysfs", "counters_before", "ibstat", "topo", "netdevs", "qos",
                          "ib_write_bw", "counters_after"]
    assert (data["sysfs_root"], data["started"]) == (str(tree), 42.0)
    assert data["sysfs"] == hca.read_ib_sysfs(tree)
    assert data["counters_before"] == data["counters_after"] == hca.counters_snapshot(tree)
    assert data["ibstat"]["parsed"] == hca.parse_ibstat(out["ibstat"]["stdout"] + "\n")
    assert data["topo"]["parsed"] == hca.parse_topo(TOPO_2)
    assert data["netdevs"] == {"ens1f0np0": hca.read_netdev("ens1f0np0", tree),
                               "ens1f1np1": hca.read_netdev("ens1f1np1", tree)}
    qos = hca.parse_mlnx_qos(out["mlnx_qos"]["stdout"])
    assert {n: (q["argv"], q["parsed"]) for n, q in data["qos"].items()} == {
        "ens1f0np0": (["mlnx_qos", "-i", "ens1f0np0"], qos), "ens1f1np1": (["mlnx_qos", "-i", "ens1f1np1"], qos)}
    assert {tuple(sorted(q)) for q in data["qos"].values()} == {("argv", "error", "parsed", "rc", "stderr", "stdout")}
    assert bw == [("mlx5_0", 1)] and data["ib_write_bw"] == {"mlx5_0": {"hca": "mlx5_0", "gpu": 1}}
    assert [c[0][0] for c in calls] == ["ibstat", "nvidia-smi", "mlnx_qos", "mlnx_qos"]


def test_collect_defaults_skip_qos_and_bandwidth(tree, monkeypatch, tools):
    _calls, bw, out = tools
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tree))
    data = hca.collect()
    assert "qos" not in data and "ib_write_bw" not in data and bw == []
    out["mlnx_qos"]["rc"] = 127
    out["nvidia-smi"]["rc"] = 9
    data = hca.collect(gdr=True, hcas=["mlx5_0", "mlx5_7"], qos=True)
    assert {n: q["parsed"] for n, q in data["qos"].items()} == {"ens1f0np0": None, "ens1f1np1": None}
    assert bw == [("mlx5_0", None), ("mlx5_7", None)]  # no topology: host memory


def test_gdr_only_pairs_each_hca_with_its_nearest_gpu(tools):
    calls, _bw, out = tools
    assert hca.gdr_only(["mlx5_0", "mlx5_1", "mlx5_9"]) == {"ib_write_bw": {
        "mlx5_0": {"hca": "mlx5_0", "gpu": 1}, "mlx5_1": {"hca": "mlx5_1", "gpu": 0},
        "mlx5_9": {"hca": "mlx5_9", "gpu": None}}}
    assert calls == [(["nvidia-smi", "topo", "-m"], 60.0)]
    out["nvidia-smi"]["rc"] = 1
    assert hca.gdr_only(["mlx5_0"]) == {"ib_write_bw": {"mlx5_0": {"hca": "mlx5_0", "gpu": None}}}


@pytest.mark.parametrize(("argv", "call"), [
    (["snapshot"], ("snapshot",)),
    (["gdr", "mlx5_0", "mlx5_1"], ("gdr", ["mlx5_0", "mlx5_1"])),
    ([], ("collect", False, False)),
    (["collect", "--gdr"], ("collect", True, False)),
    (["collect", "--qos", "--gdr"], ("collect", True, True)),
    (["collect", "--qos"], ("collect", False, True)),
])
def test_main_prints_one_json_line(monkeypatch, capsys, argv, call):
    seen: list = []
    monkeypatch.setattr(hca, "counters_snapshot", lambda: seen.append(("snapshot",)) or {"time": 1.0})
    monkeypatch.setattr(hca, "gdr_only", lambda hcas: seen.append(("gdr", hcas)) or {"ib_write_bw": {}})
    monkeypatch.setattr(hca, "collect", lambda gdr, qos: seen.append(("collect", gdr, qos)) or {"sysfs": {}})
    assert hca.main(argv) == 0
    assert seen == [call]
    printed = capsys.readouterr().out
    assert printed.endswith("}\n") and printed.count("\n") == 1
    assert json.loads(printed) == {"snapshot": {"time": 1.0}, "gdr": {"ib_write_bw": {}},
                                   "collect": {"sysfs": {}}}[call[0]]
