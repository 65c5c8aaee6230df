"""What each collector of gridready.probe.collect writes into probe.json (the contract gridready/certify reads), in
process: the node's tools answered by a recording stand-in (fake_node.Node) with real captures from tests/fixtures,
the step runners (dcgm, nccl-tests, nvbandwidth, gpu_burn, hca, NVML, sysfs) replaced by recorders."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import (
    SCHEMA,
    collect,
    dcgm,
    gpu_burn,
    hca,
    kernel_log,
    lspci,
    nccl_tests,
    nvbandwidth,
    nvml,
    nvsmi,
    profiles,
    sysfs,
)
from gridready.probe.collect import SERVICES, TOOLS, Probe, nccl_env, os_release
from gridready.probe.profiles import PROFILES
from tests.unit.probe.fake_node import (
    SMI_NVLINK_S,
    SMI_Q_TEXT,
    SMI_Q_XML,
    SMI_QUERY_CSV,
    SMI_TOPO,
    Clock,
    Node,
    result,
)
from tests.unit.probe.line_budget import line_budget

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
QUERY = ("nvidia-smi", f"--query-gpu={nvsmi.QUERY_FIELDS}", "--format=csv")
QUERY_MIN = ("nvidia-smi", f"--query-gpu={nvsmi.QUERY_FIELDS_MIN}", "--format=csv")
Q_X = ("nvidia-smi", "-q", "-x")
Q = ("nvidia-smi", "-q")
NVL_S = ("nvidia-smi", "nvlink", "-s")
NVL_E = ("nvidia-smi", "nvlink", "-e")
TOPO = ("nvidia-smi", "topo", "-m")
NVL_E_TEXT = "GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: Replay Errors: 3\n\t Link 0: Recovery Errors: 1\n"
BOOT_LOG = ("[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02)\n"
            "[    5.100000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04\n"
            "[    9.000000] usb 1-1: new device\n"
            "[  100.000000] NVRM: Xid (PCI:0000:19:00): 79, pid=1, GPU has fallen off the bus.\n")
WRAPPED_LOG = "[ 9000.000000] NVRM: Xid (PCI:0000:19:00): 13, pid=7, Graphics Exception\n[ 9001.0] eth0: up\n"


def opts(**over: Any) -> dict[str, Any]:
    """The options __main__.parse_args gives for no flags, overridden per test."""
    base: dict[str, Any] = {"profile": "quick", "dcgm_level": None, "algo": "ring", "nccl_min_bytes": 1 << 30,
                            "nccl_max_bytes": 8 << 30, "best_of": 2, "timeout": 900.0, "skip": [],
                            "nccl_tests_dir": None, "out": "-", "collectives": ["all_reduce"], "dcgm_precision": "h",
                            "dcgm_outlier_pcnt": 0.0, "nccl_check_iters": 1}
    return {**base, **over}


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> Node:
    n = Node()
    monkeypatch.setattr(collect, "run", n.run)
    monkeypatch.setattr(collect, "which", n.which)
    return n


def probe(node: Node, **over: Any) -> Probe:
    return Probe(opts(**over))


# ---- os-release and the NCCL environment ---------------------------------------------------------------------

def test_os_release_keeps_id_and_version_only(tmp_path: Path) -> None:
    f = tmp_path / "os-release"
    f.write_text('NAME="Ubuntu"\nID= ubuntu \nID_LIKE=debian\n# VERSION_ID=1\nVERSION_ID="22.04"\n'
                 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nVERSION_ID\n')
    assert os_release(str(f)) == {"id": "ubuntu", "version_id": "22.04"}
    # the value is everything after the first "=", quotes stripped and nothing else
    f.write_text('ID="XOS"\nVERSION_ID="9=X"\n')
    assert os_release(str(f)) == {"id": "XOS", "version_id": "9=X"}


def test_os_release_unreadable_is_empty(tmp_path: Path) -> None:
    assert os_release(str(tmp_path / "absent")) == {}
    assert os_release(str(tmp_path)) == {}  # a directory: IsADirectoryError is an OSError


def test_os_release_reads_etc_by_default() -> None:
    assert os_release() == os_release("/etc/os-release")


@pytest.mark.parametrize(("algo", "env"), [
    ("ring", {"NCCL_NVLS_ENABLE": "0"}),
    ("nvls", {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}),
    ("tree", {"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Tree"}),
])
def test_nccl_env_per_algorithm(algo: str, env: dict[str, str]) -> None:
    assert nccl_env(algo) == env


# ---- the document's head, err, step, run -----------------------------------------------------------------------

def test_head_of_the_document(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    node.tools = {"nvidia-smi", "lspci", "dmesg"}
    monkeypatch.setattr(collect.socket, "gethostname", lambda: "gpu-7")
    o = opts(profile="standard")
    p = Probe(o)
    d = p.doc
    assert d["schema"] == SCHEMA == "gridready.probe/1"
    assert d["host"] == "gpu-7" and d["profile"] == "standard" and d["options"] is o
    assert ISO.match(d["started"])
    assert d["python"] == collect.platform.python_version() and d["kernel"] == collect.platform.release()
    assert d["os"] == os_release("/etc/os-release")
    assert d["tools"] == {"nvidia-smi": "/usr/bin/nvidia-smi", "dcgmi": None, "all_reduce_perf": None,
                          "nvbandwidth": None, "gpu_burn": None, "lspci": "/usr/bin/lspci", "dmesg": "/usr/bin/dmesg",
                          "journalctl": None, "systemctl": None, "nv-fabricmanager": None}
    assert list(d["tools"]) == list(TOOLS)
    assert d["errors"] == [] and d["timings_s"] == {} and d["raw"] == {}
    assert p.prof == PROFILES["standard"] and p.prof is not PROFILES["standard"]
    assert p.bus_of_index == {}


def test_err_keeps_the_first_2000_characters(node: Node) -> None:
    p = probe(node)
    p.err("dcgm", "x" * 1999 + "yz" + "w" * 10)
    p.err("kernel_log", "short")
    assert p.doc["errors"] == [{"collector": "dcgm", "error": "x" * 1999 + "y"},
                               {"collector": "kernel_log", "error": "short"}]


def test_step_times_a_collector_to_the_hundredth(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    p = probe(node)
    monkeypatch.setattr(collect, "time", Clock(10.0, 11.23456, 20.0, 20.007))
    ran: list[str] = []
    p.step("nvml", lambda: ran.append("nvml"))

    def boom() -> None:
        raise KeyError("index")

    p.step("dcgm", boom)
    assert ran == ["nvml"]
    assert p.doc["timings_s"] == {"nvml": 1.23, "dcgm": 0.01}
    assert p.doc["errors"] == [{"collector": "dcgm", "error": "KeyError: 'index'"}]


def test_step_skips_a_named_collector(node: Node) -> None:
    p = probe(node, skip=["torch", "dcgm"])
    ran: list[str] = []
    p.step("torch", lambda: ran.append("torch"))
    p.step("nvml", lambda: ran.append("nvml"))
    assert ran == ["nvml"]
    assert p.doc["timings_s"]["torch"] is None and isinstance(p.doc["timings_s"]["nvml"], float)
    q = Probe({k: v for k, v in opts().items() if k != "skip"})  # no skip key: every step runs
    q.step("torch", lambda: ran.append("torch2"))
    assert ran == ["nvml", "torch2"]


def test_run_runs_every_step_in_order(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    p = probe(node, skip=["hca"])
    order: list[str] = []
    names = {"nvidia_smi": "nvidia_smi", "nvml": "nvml", "system": "system", "kernel_log": "kernel",
             "services": "services", "dcgm": "dcgm", "nccl_tests": "nccl_tests", "nvbandwidth": "nvbandwidth",
             "hca": "hca", "gpu_burn": "gpu_burn", "torch": "torch", "sdc": "sdc", "goodput": "goodput",
             "health_after": "health_after"}
    for step, attr in names.items():
        setattr(p, attr, lambda s=step: order.append(s))
    monkeypatch.setattr(collect, "time", Clock(*[float(i) for i in range(100, 127)], 127.4567))
    monkeypatch.setattr(collect.sys, "argv", ["probe", "--profile", "quick"])
    doc = p.run()
    assert doc is p.doc
    assert order == [s for s in names if s != "hca"]
    assert list(doc["timings_s"]) == list(names)
    assert doc["timings_s"]["hca"] is None and doc["timings_s"]["nvml"] == 1.0
    assert doc["wall_s"] == 27.46  # 13 timed steps take two readings each, between the run's first and last
    assert ISO.match(doc["finished"]) and doc["argv"] == ["probe", "--profile", "quick"]


# ---- _tool -------------------------------------------------------------------------------------------------------

def test_tool_absent_records_nothing(node: Node) -> None:
    p = probe(node)
    assert p._tool("lspci_vvv", ["lspci", "-vvv"]) is None
    assert p.doc["raw"] == {} and p.doc["errors"] == []
    assert node.calls == [(("lspci", "-vvv"), 60, None)]


def test_tool_ok_keeps_the_output(node: Node) -> None:
    node.answers[("lspci", "-vvv")] = result([], "00:00.0 Host bridge\n")
    p = probe(node)
    assert p._tool("lspci_vvv", ["lspci", "-vvv"], timeout=7) == "00:00.0 Host bridge\n"
    assert p.doc["raw"] == {"lspci_vvv": "00:00.0 Host bridge\n"} and p.doc["errors"] == []
    assert node.calls == [(("lspci", "-vvv"), 7, None)]


def test_tool_failure_is_an_error_with_the_stderr_tail(node: Node) -> None:
    node.answers[("dmesg", "-x")] = result([], "partial", rc=1, stderr="a" * 100 + "b" * 400)
    p = probe(node)
    assert p._tool("dmesg", ["dmesg", "-x"]) is None
    assert p.doc["raw"] == {"dmesg": "partial"}
    assert p.doc["errors"] == [{"collector": "dmesg", "error": "dmesg -x: rc=1 timed_out=False " + "b" * 400}]


def test_tool_timeout_is_an_error(node: Node) -> None:
    node.answers[("dcgmi", "diag")] = result([], "half", rc=None, timed_out=True)
    node.answers[("dcgmi", "discovery")] = result([], "late", rc=0, timed_out=True)
    p = probe(node)
    assert p._tool("dcgmi", ["dcgmi", "diag"]) is None
    assert p._tool("disc", ["dcgmi", "discovery"]) == "late"  # rc 0: the output stands, the timeout is recorded
    assert p.doc["errors"] == [{"collector": "dcgmi", "error": "dcgmi diag: rc=None timed_out=True "},
                               {"collector": "disc", "error": "dcgmi discovery: rc=0 timed_out=True "}]


# ---- nvidia-smi --------------------------------------------------------------------------------------------------

def test_nvidia_smi_absent(node: Node) -> None:
    p = probe(node)
    p.nvidia_smi()
    assert p.doc["nvidia_smi"] == {"present": False} and node.calls == []


def test_nvidia_smi_reads_every_view(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    node.answers.update({QUERY: result([], SMI_QUERY_CSV), Q_X: result([], SMI_Q_XML),
                         NVL_S: result([], SMI_NVLINK_S), NVL_E: result([], NVL_E_TEXT), TOPO: result([], SMI_TOPO)})
    p = probe(node)
    p.nvidia_smi()
    smi = p.doc["nvidia_smi"]
    assert node.argvs() == [QUERY, Q_X, NVL_S, NVL_E, TOPO]
    assert [c[1] for c in node.calls] == [60] * 5
    assert smi["present"] is True
    assert smi["query"] == nvsmi.parse_query_csv(SMI_QUERY_CSV)
    assert [r["index"] for r in smi["query"]] == [0, 1]
    assert p.bus_of_index == {0: "00000000:00:06.0", 1: "00000000:00:07.0"}
    assert smi["q"] == nvsmi.parse_q_xml(SMI_Q_XML)
    assert smi["nvlink_status"] == nvsmi.parse_nvlink_status(SMI_NVLINK_S)
    assert smi["nvlink_errors"] == nvsmi.parse_nvlink_errors(NVL_E_TEXT)
    assert p.doc["raw"] == {"nvidia_smi_query": SMI_QUERY_CSV, "nvidia_smi_q_x": SMI_Q_XML,
                            "nvidia_smi_nvlink_s": SMI_NVLINK_S, "nvidia_smi_nvlink_e": NVL_E_TEXT,
                            "nvidia_smi_topo": SMI_TOPO}
    assert p.doc["errors"] == []


def test_nvidia_smi_falls_back_to_the_short_query(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    short = "index, name, pci.bus_id\n3, NVIDIA H200, 00000000:1A:00.0\n4, NVIDIA H200, \n"
    node.answers.update({QUERY: result([], "", rc=6, stderr="Field unknown"), QUERY_MIN: result([], short)})
    p = probe(node)
    p.nvidia_smi()
    smi = p.doc["nvidia_smi"]
    assert node.argvs()[:2] == [QUERY, QUERY_MIN]
    assert smi["query"] == nvsmi.parse_query_csv(short) and len(smi["query"]) == 2
    assert p.bus_of_index == {3: "00000000:1A:00.0"}  # a row without a bus id maps nothing
    assert smi["q"] is None and smi["nvlink_status"] is None and smi["nvlink_errors"] is None
    assert p.doc["raw"]["nvidia_smi_query"] == short
    assert [e["collector"] for e in p.doc["errors"]] == ["nvidia_smi_query"]


def test_nvidia_smi_without_any_query(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    node.answers.update({QUERY: result([], "", rc=9), QUERY_MIN: result([], "", rc=9),
                         NVL_S: result([], ""), NVL_E: result([], "")})
    p = probe(node)
    p.nvidia_smi()
    smi = p.doc["nvidia_smi"]
    assert smi["query"] == [] and p.bus_of_index == {}
    # an empty but successful nvlink answer is parsed (a GPU without NVLink), not taken as missing
    assert smi["nvlink_status"] == nvsmi.parse_nvlink_status("")
    assert smi["nvlink_errors"] == nvsmi.parse_nvlink_errors("")


def test_smi_q_prefers_the_xml(node: Node) -> None:
    node.answers.update({Q_X: result([], SMI_Q_XML), Q: result([], SMI_Q_TEXT)})
    p = probe(node)
    assert p._nvidia_smi_q() == nvsmi.parse_q_xml(SMI_Q_XML)
    assert node.calls == [(Q_X, 60, None)]
    assert p.doc["raw"] == {"nvidia_smi_q_x": SMI_Q_XML}


@pytest.mark.parametrize("xml", [
    result([], "", rc=255, stderr="-x is not supported"),
    result([], SMI_Q_XML, rc=0, timed_out=True),
    result([], SMI_Q_XML, rc=None, timed_out=True),
])
def test_smi_q_reads_the_text_where_the_xml_fails(node: Node, xml: dict[str, Any]) -> None:
    node.answers.update({Q_X: xml, Q: result([], SMI_Q_TEXT)})
    p = probe(node)
    assert p._nvidia_smi_q() == {**nvsmi.parse_q(SMI_Q_TEXT), "format": "text"}
    assert node.argvs() == [Q_X, Q]
    assert "nvidia_smi_q_x" not in p.doc["raw"] and p.doc["raw"]["nvidia_smi_q"] == SMI_Q_TEXT
    assert p.doc["errors"] == []


def test_smi_q_unreadable_xml_is_an_error_then_the_text(node: Node) -> None:
    node.answers.update({Q_X: result([], "<html>no</html>"), Q: result([], SMI_Q_TEXT)})
    p = probe(node)
    with pytest.raises(ValueError) as exc:
        nvsmi.parse_q_xml("<html>no</html>")
    assert p._nvidia_smi_q() == {**nvsmi.parse_q(SMI_Q_TEXT), "format": "text"}
    assert p.doc["raw"]["nvidia_smi_q_x"] == "<html>no</html>"
    assert p.doc["errors"] == [{"collector": "nvidia_smi_q_x", "error": f"{exc.value}; reading the -q text instead"}]


def test_smi_q_none_without_any_answer(node: Node) -> None:
    node.answers.update({Q_X: result([], "", rc=1), Q: result([], "")})
    assert probe(node)._nvidia_smi_q() is None


# ---- NVML, system, services --------------------------------------------------------------------------------------

def test_nvml(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "available", lambda: False)
    monkeypatch.setattr(nvml, "collect", lambda: {"gpus": [{"index": 0}]})
    p = probe(node)
    p.nvml()
    assert p.doc["nvml"] == {"present": False}
    monkeypatch.setattr(nvml, "available", lambda: True)
    p.nvml()
    assert p.doc["nvml"] == {"present": True, "gpus": [{"index": 0}]}


def _fake_sysfs(monkeypatch: pytest.MonkeyPatch, mods: list[str] | None) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sysfs, "cmdline", lambda: "ro intel_iommu=on iommu=pt")
    monkeypatch.setattr(sysfs, "iommu", lambda: {"groups": 42})
    def iommu_mode(c: str | None, g: int) -> str:
        seen.append((c, g))
        return "passthrough"

    monkeypatch.setattr(sysfs, "iommu_mode", iommu_mode)
    monkeypatch.setattr(sysfs, "modules", lambda: mods)
    monkeypatch.setattr(sysfs, "pci_endpoints", lambda: [{"bdf": "0000:19:00.0"}])
    monkeypatch.setattr(sysfs, "cpu_hypervisor", lambda: True)
    monkeypatch.setattr(sysfs, "simulated", lambda: False)
    monkeypatch.setattr(sysfs, "dmi", lambda: {"sys_vendor": "Dell Inc."})
    return seen


@pytest.mark.parametrize(("mods", "peermem"), [
    (["nvidia", "nvidia_peermem"], True),
    (["nv_peer_mem", "mlx5_core"], True),
    (["nvidia", "nvidia_uvm", "peermem"], False),
    ([], False),
])
def test_system_section(node: Node, monkeypatch: pytest.MonkeyPatch, mods: list[str], peermem: bool) -> None:
    seen = _fake_sysfs(monkeypatch, mods)
    p = probe(node)
    p.system()
    assert seen == [("ro intel_iommu=on iommu=pt", 42)]
    assert p.doc["system"] == {
        "cmdline": "ro intel_iommu=on iommu=pt", "iommu_groups": 42, "iommu_mode": "passthrough", "modules": mods,
        "peermem_loaded": peermem, "pcie_endpoints": [{"bdf": "0000:19:00.0"}], "cpu_hypervisor": True,
        "simulated_sysfs": False, "dmi": {"sys_vendor": "Dell Inc."}}
    assert p.doc["errors"] == [] and node.calls == []


def test_system_without_proc_modules_and_with_lspci(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sysfs(monkeypatch, None)
    lspci_text = (FIXTURES / "public" / "lspci").glob("*")
    text = next(f for f in sorted(lspci_text) if f.is_file()).read_text(errors="replace")
    node.tools = {"lspci"}
    node.answers[("lspci", "-vvv")] = result([], text)
    p = probe(node)
    p.system()
    assert p.doc["system"]["modules"] is None and p.doc["system"]["peermem_loaded"] is None
    assert p.doc["errors"] == [{"collector": "system.modules", "error": "cannot read /proc/modules"}]
    assert p.doc["system"]["lspci"] == lspci.parse(text)
    assert node.calls == [(("lspci", "-vvv"), 60, None)] and p.doc["raw"]["lspci_vvv"] == text


def test_system_lspci_failing_is_none(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sysfs(monkeypatch, ["nvidia"])
    node.tools = {"lspci"}
    node.answers[("lspci", "-vvv")] = result([], "", rc=1)
    p = probe(node)
    p.system()
    assert p.doc["system"]["lspci"] is None


def test_services(node: Node) -> None:
    node.tools = {"systemctl"}
    node.answers[("systemctl", "is-active", "nvidia-fabricmanager")] = result([], "active\n")
    node.answers[("systemctl", "is-active", "nvidia-persistenced")] = result([], "inactive\n", rc=3)
    node.answers[("systemctl", "is-active", "nvidia-dcgm")] = result([], "  \n", rc=4)
    p = probe(node)
    p.services()
    assert node.argvs() == [("systemctl", "is-active", s) for s in SERVICES]
    assert {c[1] for c in node.calls} == {15}
    assert p.doc["services"] == {"manager": "systemd", "state": {
        "nvidia-fabricmanager": "active", "nvidia-persistenced": "inactive", "nvidia-dcgm": None}}


def test_services_without_systemd(node: Node) -> None:
    p = probe(node)
    p.services()
    assert p.doc["services"] == {"manager": None, "state": {}} and node.calls == []


# ---- kernel log ----------------------------------------------------------------------------------------------

DMESG_ISO = ("dmesg", "--time-format", "iso")
JOURNAL = ("journalctl", "-k", "-b", "--no-pager", "-q")


def test_kernel_dmesg_from_boot_is_enough(node: Node) -> None:
    node.answers[DMESG_ISO] = result([], BOOT_LOG)
    p = probe(node)
    p.kernel()
    assert node.argvs() == [DMESG_ISO] and node.calls[0][1] == 60
    assert p.doc["kernel_log"] == {"source": "dmesg --time-format iso", **kernel_log.parse(BOOT_LOG)}
    assert p.doc["kernel_log"]["from_boot"] is True
    assert p.doc["raw"]["kernel_log"] == "\n".join(BOOT_LOG.splitlines()[1:2] + BOOT_LOG.splitlines()[3:4])
    assert p.doc["errors"] == []


@pytest.mark.parametrize("first", [result([], "", rc=1), result([], " \n\n"), result([], "", absent=True),
                                   result([], BOOT_LOG, rc=1)])
def test_kernel_plain_dmesg_where_the_iso_form_fails(node: Node, first: dict[str, Any]) -> None:
    node.answers[DMESG_ISO] = first
    node.answers[("dmesg",)] = result([], BOOT_LOG)
    p = probe(node)
    p.kernel()
    assert node.argvs() == [DMESG_ISO, ("dmesg",)]
    assert p.doc["kernel_log"]["source"] == "dmesg"


def test_kernel_wrapped_dmesg_asks_the_journal(node: Node) -> None:
    node.answers[DMESG_ISO] = result([], WRAPPED_LOG)
    node.answers[("dmesg",)] = result([], BOOT_LOG)
    node.answers[JOURNAL] = result([], BOOT_LOG + "[  200.0] NVRM: GPU at PCI:0000:19:00: limited by x\n")
    p = probe(node)
    p.kernel()
    assert node.argvs() == [DMESG_ISO, JOURNAL]  # plain dmesg only where the first form failed
    assert p.doc["kernel_log"]["source"] == "journalctl -k -b --no-pager -q"
    assert p.doc["kernel_log"]["from_boot"] is True
    assert p.doc["raw"]["kernel_log"].endswith("limited by x")


@pytest.mark.parametrize("journal", [result([], "", rc=1), result([], WRAPPED_LOG)])
def test_kernel_wrapped_dmesg_stands_without_a_boot_journal(node: Node, journal: dict[str, Any]) -> None:
    node.answers[DMESG_ISO] = result([], WRAPPED_LOG)
    node.answers[JOURNAL] = journal
    p = probe(node)
    p.kernel()
    assert p.doc["kernel_log"] == {"source": "dmesg --time-format iso", **kernel_log.parse(WRAPPED_LOG)}
    assert p.doc["kernel_log"]["from_boot"] is False
    assert p.doc["raw"]["kernel_log"] == WRAPPED_LOG.splitlines()[0]


def test_kernel_log_unreadable(node: Node) -> None:
    node.answers[DMESG_ISO] = result([], "", rc=1)
    node.answers[JOURNAL] = result([], "\n")
    p = probe(node)
    p.kernel()
    assert node.argvs() == [DMESG_ISO, ("dmesg",), JOURNAL]
    assert p.doc["kernel_log"] == {"source": None}
    assert p.doc["errors"] == [{"collector": "kernel_log",
                                "error": "no readable kernel log (dmesg / journalctl -k empty or failing)"}]
    assert "kernel_log" not in p.doc["raw"]


def test_kernel_raw_keeps_the_gpu_lines_only(node: Node) -> None:
    kept = ["[  120.5] nvidia-nvswitch1: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV "
            "error (First)",
            "[    2.1] pci 0000:19:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x4 link at "
            "0000:17:03.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
            "[    5.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04"]
    dropped = ["[    0.0] Linux version 6.8.0-49-generic", "[    3.0] xid lowercase is not NVIDIA's",
               "[    4.0] LIMITED BY nothing", "[    6.0] nvrm lowercase"]
    node.answers[DMESG_ISO] = result([], "\n".join([dropped[0], kept[0], dropped[1], kept[1], dropped[2], kept[2],
                                                    dropped[3]]) + "\n")
    p = probe(node)
    p.kernel()
    assert p.doc["raw"]["kernel_log"] == "\n".join(kept)


def test_kernel_raw_keeps_the_last_200000_characters(node: Node) -> None:
    line = "[ 1.0] NVRM: " + "z" * 86  # 100 characters
    text = "[    0.000000] Linux version 6.8.0\n" + "\n".join([line] * 2500) + "\n"
    node.answers[DMESG_ISO] = result([], text)
    p = probe(node)
    p.kernel()
    kept = "\n".join([line] * 2500)
    assert p.doc["raw"]["kernel_log"] == kept[-200_000:] and len(p.doc["raw"]["kernel_log"]) == 200_000


# ---- after the load --------------------------------------------------------------------------------------------

def test_health_after_reads_the_snapshot_again(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    node.answers.update({QUERY: result([], SMI_QUERY_CSV), Q_X: result([], SMI_Q_XML),
                         NVL_E: result([], NVL_E_TEXT), DMESG_ISO: result([], BOOT_LOG)})
    p = probe(node)
    p.doc["kernel_log"] = {"source": "dmesg --time-format iso"}
    p.health_after()
    a = p.doc["after"]
    assert ISO.match(a.pop("taken"))
    assert a == {"nvidia_smi": {"present": True, "query": nvsmi.parse_query_csv(SMI_QUERY_CSV),
                                "q": nvsmi.parse_q_xml(SMI_Q_XML),
                                "nvlink_errors": nvsmi.parse_nvlink_errors(NVL_E_TEXT)},
                 "kernel_log": {"source": "dmesg --time-format iso", **kernel_log.parse(BOOT_LOG)}}
    assert node.argvs() == [QUERY, Q_X, NVL_E, DMESG_ISO] and {c[1] for c in node.calls} == {60}
    assert p.doc["raw"] == {"after_nvidia_smi_q_x": SMI_Q_XML} and p.doc["errors"] == []


def test_health_after_failing_tools(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    node.answers.update({QUERY: result([], SMI_QUERY_CSV, rc=15), Q_X: result([], SMI_Q_XML, rc=15),
                         NVL_E: result([], NVL_E_TEXT, rc=3), ("dmesg",): result([], "", rc=1)})
    p = probe(node)
    p.doc["kernel_log"] = {"source": "dmesg"}
    p.health_after()
    assert p.doc["after"]["nvidia_smi"] == {"present": True, "query": [], "q": None, "nvlink_errors": None}
    assert "kernel_log" not in p.doc["after"] and p.doc["raw"] == {}
    assert p.doc["errors"] == [
        {"collector": "after.nvidia_smi", "error": "nvidia-smi -q -x unreadable after the load"},
        {"collector": "after.kernel_log", "error": "dmesg: rc=1, 0 bytes after the load"}]


def test_health_after_unreadable_xml_and_blank_log(node: Node) -> None:
    node.tools = {"nvidia-smi"}
    node.answers.update({QUERY: result([], SMI_QUERY_CSV), Q_X: result([], "<x/>"), NVL_E: result([], ""),
                         JOURNAL: result([], "  \n")})
    p = probe(node)
    p.doc["kernel_log"] = {"source": "journalctl -k -b --no-pager -q"}
    p.health_after()
    with pytest.raises(ValueError) as exc:
        nvsmi.parse_q_xml("<x/>")
    assert p.doc["after"]["nvidia_smi"]["q"] is None
    assert p.doc["raw"] == {"after_nvidia_smi_q_x": "<x/>"}
    assert node.argvs()[-1] == JOURNAL
    assert p.doc["errors"] == [
        {"collector": "after.nvidia_smi_q_x", "error": str(exc.value)},
        {"collector": "after.nvidia_smi", "error": "nvidia-smi -q -x unreadable after the load"},
        {"collector": "after.kernel_log", "error": "journalctl -k -b --no-pager -q: rc=0, 3 bytes after the load"}]


@pytest.mark.parametrize("klog", [None, {"source": None}, {"source": ""}])
def test_health_after_without_tools_or_log(node: Node, klog: dict[str, Any] | None) -> None:
    p = probe(node)
    if klog is not None:
        p.doc["kernel_log"] = klog
    p.health_after()
    assert list(p.doc["after"]) == ["taken"] and node.calls == [] and p.doc["errors"] == []


# ---- DCGM --------------------------------------------------------------------------------------------------------

def _dcgm_result(level: int) -> dict[str, Any]:
    return {"level": level, "run": result(["dcgmi"], "{json}", rc=226, timed_out=False), "parsed": {"overall": "Fail"},
            "parse_error": None, "parameters": {"diagnostic.precision": "h"},
            "retries": [{"plugin": "software", "run": result(["dcgmi"], "", rc=0), "parsed": {"overall": "Pass"}},
                        {"plugin": "pcie", "run": result(["dcgmi"], "", rc=None, timed_out=True)}]}


@pytest.mark.parametrize(("profile", "flag", "level"), [
    ("quick", None, 1), ("standard", None, 3), ("burn-in", None, 4), ("quick", 2, 2), ("burn-in", "3", 3)])
def test_dcgm_runs_the_profile_level(node: Node, monkeypatch: pytest.MonkeyPatch, profile: str, flag: Any,
                                     level: int) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake(lvl: int, timeout_s: float, precision: str | None = None, outlier_pcnt: float = 0.0) -> dict[str, Any]:
        calls.append((lvl, timeout_s, precision, outlier_pcnt))
        return _dcgm_result(lvl)

    monkeypatch.setattr(dcgm, "collect", fake)
    node.tools = {"dcgmi"}
    p = probe(node, profile=profile, dcgm_level=flag, timeout=300, dcgm_precision="hs", dcgm_outlier_pcnt="2.5")
    p.dcgm()
    assert calls == [(level, 300.0, "hs", 2.5)]
    assert all(isinstance(c, float) for c in calls[0][1::2])
    assert p.doc["raw"] == {"dcgmi_diag": "{json}"}
    assert p.doc["dcgm"] == {"present": True, "level": level, "rc": 226, "parameters": {"diagnostic.precision": "h"},
                             "timed_out": False, "parsed": {"overall": "Fail"}, "parse_error": None,
                             "retries": [{"plugin": "software", "rc": 0, "parsed": {"overall": "Pass"}},
                                         {"plugin": "pcie", "rc": None, "parsed": None}]}


def test_dcgm_defaults_and_absent(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    def fake(lvl: int, timeout_s: float, precision: str | None = None, outlier_pcnt: float = 0.0) -> dict[str, Any]:
        calls.append((lvl, timeout_s, precision, outlier_pcnt))
        return _dcgm_result(lvl)

    monkeypatch.setattr(dcgm, "collect", fake)
    p = Probe({"profile": "standard", "timeout": 60})
    p.dcgm()
    assert p.doc["dcgm"] == {"present": False, "level": 3} and calls == []
    node.tools = {"dcgmi"}
    p.dcgm()
    assert calls == [(3, 60.0, None, 0.0)] and isinstance(calls[0][3], float)


# ---- nccl-tests ----------------------------------------------------------------------------------------------

class NcclRecorder:
    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    def __call__(self, gpus: int, min_bytes: int, max_bytes: int, env: dict[str, str], timeout_s: float,
                 json_path: str, binary: str | None = None, check_iters: int = 1) -> dict[str, Any]:
        self.calls.append({"gpus": gpus, "min": min_bytes, "max": max_bytes, "env": env, "timeout": timeout_s,
                           "json": json_path, "dir_exists": os.path.isdir(os.path.dirname(json_path)),
                           "binary": binary, "check": check_iters})
        return self.answers[len(self.calls) - 1]


def _nccl_res(stdout: str, rc: int | None = 0, timed_out: bool = False, js: Any = None,
              parsed: Any = None) -> dict[str, Any]:
    return {"run": result(["all_reduce_perf"], stdout, rc=rc, timed_out=timed_out), "json": js, "parsed": parsed}


def test_nccl_tests_best_of_each_collective(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = NcclRecorder([_nccl_res("ar1", js={"j": 1}, parsed={"t": 1}), _nccl_res("ar2", parsed={"t": 2}),
                        _nccl_res("ag1", rc=1, parsed={"t": 3}), _nccl_res("never")])
    found: list[tuple[str, Any]] = []
    def find_binary(name: str, d: str | None = None) -> str | None:
        found.append((name, d))
        return None if name == "alltoall_perf" else f"/opt/nccl-tests/{name}"

    monkeypatch.setattr(nccl_tests, "find_binary", find_binary)
    monkeypatch.setattr(nccl_tests, "collect", rec)
    p = probe(node, collectives=["all_reduce", "alltoall", "all_gather"], best_of="2", algo="nvls", timeout=120,
              nccl_min_bytes=1024, nccl_max_bytes=4096, nccl_tests_dir="/opt/nccl-tests", nccl_check_iters="3")
    p.bus_of_index = {0: "a", 1: "b", 2: "c", 3: "d"}
    p.nccl_tests()
    assert found == [("all_reduce_perf", "/opt/nccl-tests"), ("alltoall_perf", "/opt/nccl-tests"),
                     ("all_gather_perf", "/opt/nccl-tests")]
    assert [c["binary"] for c in rec.calls] == ["/opt/nccl-tests/all_reduce_perf"] * 2 + [
        "/opt/nccl-tests/all_gather_perf"]  # all_gather's first run failed: no second
    for c in rec.calls:
        assert (c["gpus"], c["min"], c["max"], c["timeout"], c["check"]) == (4, 1024, 4096, 120.0, 3)
        assert c["env"] == {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}
        assert os.path.basename(c["json"]) == "nccl.json" and c["dir_exists"]
        assert not os.path.exists(os.path.dirname(c["json"]))  # the temporary folder is gone afterwards
    assert len({os.path.dirname(c["json"]) for c in rec.calls}) == 3
    assert p.doc["tools"]["all_reduce_perf"] == "/opt/nccl-tests/all_reduce_perf"
    assert p.doc["tools"]["alltoall_perf"] is None
    assert p.doc["raw"] == {"all_reduce_perf": "ar1\nar2", "all_gather_perf": "ag1"}
    ar_runs = [{"rc": 0, "timed_out": False, "parsed": {"j": 1}}, {"rc": 0, "timed_out": False, "parsed": {"t": 2}}]
    assert p.doc["nccl_tests"] == {
        "present": True, "env": {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}, "algo": "nvls",
        "collectives": {"all_reduce": {"runs": ar_runs},
                        "all_gather": {"runs": [{"rc": 1, "timed_out": False, "parsed": {"t": 3}}]}},
        "runs": ar_runs}


def test_nccl_tests_stop_at_a_timeout(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = NcclRecorder([_nccl_res("t", rc=None, timed_out=True), _nccl_res("never")])
    monkeypatch.setattr(nccl_tests, "find_binary", lambda name, d=None: f"/usr/bin/{name}")
    monkeypatch.setattr(nccl_tests, "collect", rec)
    p = probe(node, collectives=["reduce_scatter"], best_of=3, gpus=2)
    p.nccl_tests()
    assert len(rec.calls) == 1 and rec.calls[0]["gpus"] == 2 and rec.calls[0]["check"] == 1
    assert p.doc["nccl_tests"]["collectives"] == {
        "reduce_scatter": {"runs": [{"rc": None, "timed_out": True, "parsed": None}]}}
    assert p.doc["nccl_tests"]["runs"] == []  # no all_reduce asked


@pytest.mark.parametrize(("best_of", "runs"), [(0, 1), (-2, 1), (1, 1), (3, 3)])
def test_nccl_tests_at_least_one_run(node: Node, monkeypatch: pytest.MonkeyPatch, best_of: int, runs: int) -> None:
    rec = NcclRecorder([_nccl_res(f"r{i}") for i in range(5)])
    monkeypatch.setattr(nccl_tests, "find_binary", lambda name, d=None: f"/usr/bin/{name}")
    monkeypatch.setattr(nccl_tests, "collect", rec)
    p = Probe({k: v for k, v in opts(best_of=best_of, algo="tree").items()
               if k not in ("collectives", "nccl_check_iters", "nccl_tests_dir")})
    p.nccl_tests()
    assert len(rec.calls) == runs
    assert rec.calls[0]["gpus"] == 1  # no GPU known: still one rank
    assert rec.calls[0]["env"] == {"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Tree"}
    assert rec.calls[0]["check"] == 1 and rec.calls[0]["binary"] == "/usr/bin/all_reduce_perf"
    assert p.doc["nccl_tests"]["runs"] == [{"rc": 0, "timed_out": False, "parsed": None}] * runs


def test_nccl_tests_skipped_on_one_gpu(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_tests, "find_binary", lambda name, d=None: pytest.fail("no binary looked up"))
    p = probe(node, gpus=4)
    p.bus_of_index = {0: "00000000:19:00.0"}  # nvidia-smi's count wins over the option
    p.nccl_tests()
    assert p.doc["nccl_tests"] == {"present": False, "skipped": "one GPU: a collective has no peer"}
    q = probe(node, gpus="1")
    q.nccl_tests()
    assert q.doc["nccl_tests"]["skipped"] == "one GPU: a collective has no peer"


def test_nccl_tests_without_binaries(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_tests, "find_binary", lambda name, d=None: None)
    p = probe(node, collectives=[], gpus=2)
    p.nccl_tests()
    assert p.doc["nccl_tests"] == {"present": False}
    assert p.doc["tools"]["all_reduce_perf"] is None  # an empty list of collectives means all_reduce


# ---- nvbandwidth, gpu_burn, hca ---------------------------------------------------------------------------------

def test_nvbandwidth(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    def fake(t: float) -> dict[str, Any]:
        calls.append(t)
        return {"present": True, "rc": 0, "raw": "R", "tests": {"a": 1}}

    monkeypatch.setattr(nvbandwidth, "collect", fake)
    p = probe(node, timeout=45)
    p.nvbandwidth()
    assert p.doc["nvbandwidth"] == {"present": False} and calls == []
    node.tools = {"nvbandwidth"}
    p.nvbandwidth()
    assert calls == [45.0] and isinstance(calls[0], float)
    assert p.doc["nvbandwidth"] == {"present": True, "rc": 0, "tests": {"a": 1}}
    assert p.doc["raw"]["nvbandwidth"] == "R"
    monkeypatch.setattr(nvbandwidth, "collect", lambda t: {"present": True, "rc": 1})
    p.nvbandwidth()
    assert p.doc["raw"]["nvbandwidth"] == "" and p.doc["nvbandwidth"] == {"present": True, "rc": 1}


@pytest.mark.parametrize(("profile", "tool", "expected"), [
    ("quick", True, None), ("burn-in", False, None), ("burn-in", True, (600, 700.0))])
def test_gpu_burn_only_in_burn_in_where_installed(node: Node, monkeypatch: pytest.MonkeyPatch, profile: str,
                                                 tool: bool, expected: tuple[int, float] | None) -> None:
    calls: list[tuple[int, float]] = []
    def fake(s: int, t: float) -> dict[str, Any]:
        calls.append((s, t))
        return {"present": True, "rc": 0, "stdout_tail": "100.0%  proc'd: 1 errors: 0", "parsed": {"ok": True}}

    monkeypatch.setattr(gpu_burn, "collect", fake)
    node.tools = {"gpu_burn"} if tool else set()
    p = probe(node, profile=profile, timeout=100)
    p.gpu_burn()
    if expected is None:
        assert calls == [] and "gpu_burn" not in p.doc
        return
    assert calls == [expected]
    assert p.doc["gpu_burn"] == {"present": True, "rc": 0, "parsed": {"ok": True}}
    assert p.doc["raw"]["gpu_burn"] == "100.0%  proc'd: 1 errors: 0"


def test_hca(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hca, "collect", lambda gdr=False, hcas=None, qos=False: {"ports": [], "args": (gdr, hcas, qos)})
    p = probe(node)
    p.hca()
    assert p.doc["hca"] == {"ports": [], "args": (False, None, False)}


# ---- the PCIe link sampled during copies ---------------------------------------------------------------------

def test_sample_link_reads_nvml_and_the_gpus_sysfs_entry(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "available", lambda: True)
    monkeypatch.setattr(nvml, "pcie", lambda i: {"gen_current": 5, "index": i})
    eps = [{"bdf": "0000:18:00.0", "gen_current": 1, "gen_max": 1, "width_current": 1, "width_max": 1},
           {"bdf": "0000:1a:00.0", "kind": "gpu", "gen_current": 4, "gen_max": 5, "width_current": 8,
            "width_max": 16, "vendor": "0x10de"}]
    monkeypatch.setattr(sysfs, "pci_endpoints", lambda: eps)
    p = probe(node)
    p.bus_of_index = {1: "00000000:1A:00.0"}
    assert p._sample_link(1) == {"nvml": {"gen_current": 5, "index": 1},
                                 "sysfs": {"gen_current": 4, "gen_max": 5, "width_current": 8, "width_max": 16}}
    assert p._sample_link(0) == {"nvml": {"gen_current": 5, "index": 0}}
    monkeypatch.setattr(nvml, "available", lambda: False)
    p.bus_of_index = {2: "00000000:1B:00.0"}
    assert p._sample_link(2) == {}


# ---- torch, SDC, goodput (a stand-in torch: only what collect reads) ----------------------------------------

class FakeDist:
    """torch.distributed: is_available() (https://docs.pytorch.org/docs/stable/distributed.html)."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def is_available(self) -> bool:
        return self.ok


class FakeTorch:
    """The attributes of `torch` collect reads: __version__, version.cuda, cuda.is_available(),
    cuda.device_count(), __config__.show() (a string), distributed (docs.pytorch.org/docs/stable/)."""

    def __init__(self, gpus: int, cuda: bool = True, dist: FakeDist | None = None, config: Any = "build") -> None:
        self.__version__ = "2.11.0+cu130"
        self.version = type("version", (), {"cuda": "13.0"})()
        self.cuda = type("cuda", (), {"is_available": staticmethod(lambda: cuda),
                                      "device_count": staticmethod(lambda: gpus)})()

        def show() -> str:
            if isinstance(config, Exception):
                raise config
            return str(config)

        self.__config__ = type("config", (), {"show": staticmethod(show)})()
        if dist is not None:
            self.distributed = dist


class Recorder:
    def __init__(self, answer: Any = None, fail: dict[str, Exception] | None = None) -> None:
        self.answer = answer
        self.fail = fail or {}
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kw: Any) -> Any:
        self.calls.append((args, kw))
        if (exc := self.fail.get(kw.get("collective", "all_reduce"))) is not None:
            raise exc
        return self.answer(*args, **kw) if callable(self.answer) else self.answer


def _torch_modules(monkeypatch: pytest.MonkeyPatch, fake: Any, bench: Recorder, sweep: Recorder) -> None:
    """The fake torch, and stand-ins for the two probe modules that import it (collect imports them lazily)."""
    import gridready.probe as pkg

    monkeypatch.setitem(sys.modules, "torch", fake)
    tb = type(sys)("gridready.probe.torch_bench")
    tb.run_all = bench  # type: ignore[attr-defined]
    ta = type(sys)("gridready.probe.torch_allreduce")
    ta.sweep = sweep  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gridready.probe.torch_bench", tb)
    monkeypatch.setitem(sys.modules, "gridready.probe.torch_allreduce", ta)
    monkeypatch.setattr(pkg, "torch_bench", tb, raising=False)
    monkeypatch.setattr(pkg, "torch_allreduce", ta, raising=False)


def _bench(prof: dict[str, Any], sample: Any, errors: list[dict[str, str]]) -> dict[str, Any]:
    errors.append({"collector": "torch.fp8", "error": "no fp8"})
    return {"gpus": [{"index": 0}], "peer": []}


def test_torch_without_torch(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    p = probe(node)
    p.torch()
    assert p.doc["torch"] == {"present": False, "import_error": "ModuleNotFoundError: import of torch halted; None in "
                                                                "sys.modules"}
    assert p._torch_gpus() == "torch not importable (ModuleNotFoundError: import of torch halted; None in sys.modules)"


@pytest.mark.parametrize(("cuda", "gpus"), [(False, 2), (True, 0)])
def test_torch_without_a_gpu(node: Node, monkeypatch: pytest.MonkeyPatch, cuda: bool, gpus: int) -> None:
    bench, sweep = Recorder(_bench), Recorder({})
    _torch_modules(monkeypatch, FakeTorch(gpus, cuda=cuda, config=RuntimeError("no config")), bench, sweep)
    p = probe(node)
    p.torch()
    assert p.doc["torch"] == {"present": True, "version": "2.11.0+cu130", "cuda": "13.0", "cuda_available": cuda,
                              "device_count": gpus}
    assert p.doc["errors"] == [{"collector": "torch.config", "error": "RuntimeError: no config"}]
    assert "torch_config" not in p.doc["raw"]
    assert bench.calls == [] and sweep.calls == []
    assert p._torch_gpus() == "torch sees no CUDA device"


@pytest.mark.parametrize("dist", [None, FakeDist(False)])
def test_torch_one_gpu_or_no_distributed_has_no_allreduce(node: Node, monkeypatch: pytest.MonkeyPatch,
                                                          dist: FakeDist | None) -> None:
    bench, sweep = Recorder(_bench), Recorder({})
    _torch_modules(monkeypatch, FakeTorch(2 if dist is None else 8, dist=dist), bench, sweep)
    p = probe(node)
    p.torch()
    assert p.doc["torch"]["allreduce"] is None and sweep.calls == []
    assert p.doc["torch"]["gpus"] == [{"index": 0}]
    assert p.doc["raw"]["torch_config"] == "build"
    assert p._torch_gpus() is None
    one = FakeTorch(1, dist=FakeDist(True))
    _torch_modules(monkeypatch, one, bench, sweep)
    q = probe(node)
    q.torch()
    assert q.doc["torch"]["allreduce"] is None and sweep.calls == []


def test_torch_benchmarks_and_sweeps(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = Recorder(_bench)
    sweep = Recorder(lambda *a, **kw: {"world": a[0], "collective": kw.get("collective", "all_reduce")},
                     fail={"alltoall": RuntimeError("NCCL error")})
    _torch_modules(monkeypatch, FakeTorch(2, dist=FakeDist(True)), bench, sweep)
    p = probe(node, profile="standard", algo="nvls", best_of="3", timeout=50, nccl_min_bytes=4 << 20,
              nccl_max_bytes=16 << 20, collectives=["all_reduce", "all_gather", "alltoall"])
    p.doc["errors"].append({"collector": "dcgm", "error": "earlier"})
    with line_budget(profiles, 1000):  # the size sweep ends (test_profiles_sweep_values.py)
        p.torch()
    t = p.doc["torch"]
    (args, kw), = bench.calls
    assert args[0] is p.prof and args[1] == p._sample_link and kw == {}
    assert p.doc["errors"] == [{"collector": "dcgm", "error": "earlier"}, {"collector": "torch.fp8", "error": "no fp8"},
                               {"collector": "torch.alltoall", "error": "RuntimeError: NCCL error"}]
    # standard: from 1 MiB by a factor of 2, and every power of two from the gated 4 MiB up to 16 MiB
    sizes = [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
    env = {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}
    assert sweep.calls == [((2, sizes, 20, 5, 3, env, 50.0), {}),
                           ((2, sizes, 20, 5, 3, env, 50.0), {"collective": "all_gather"}),
                           ((2, sizes, 20, 5, 3, env, 50.0), {"collective": "alltoall"})]
    assert t["allreduce"] == {"world": 2, "collective": "all_reduce", "algo": "nvls"}
    assert t["collectives"] == {"all_gather": {"world": 2, "collective": "all_gather"}}
    assert t["gpus"] == [{"index": 0}] and t["peer"] == []


def test_torch_allreduce_failure_is_recorded(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = Recorder({}, fail={"all_reduce": TimeoutError("rank 1 silent")})
    _torch_modules(monkeypatch, FakeTorch(4, dist=FakeDist(True)), Recorder(lambda *a: {}), sweep)
    p = probe(node, collectives=None)
    with line_budget(profiles, 1000):
        p.torch()
    assert p.doc["torch"]["allreduce"] is None and p.doc["torch"]["collectives"] == {}
    assert p.doc["errors"] == [{"collector": "torch.allreduce", "error": "TimeoutError: rank 1 silent"}]
    assert len(sweep.calls) == 1 and sweep.calls[0][0][0] == 4
    # quick: 1 MiB by a factor of 4 up to 8 GiB, plus every power of two from 1 GiB
    assert sweep.calls[0][0][1:5] == ([1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 2 << 30, 4 << 30,
                                        8 << 30], 10, 3, 2)


def test_sdc(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    from gridready.probe import sdc

    runs: list[Any] = []

    def run_all(prof: dict[str, Any], errors: list[dict[str, str]]) -> str:
        runs.append(prof)
        errors.append({"collector": "sdc.gpu1", "error": "mismatch"})
        return '{"schema": "s"}'

    monkeypatch.setattr(sdc, "run_all", run_all)
    monkeypatch.setattr(sdc, "parse", lambda text: {"gpus": [], "text": text})
    p = probe(node)
    p.doc["torch"] = {"present": True, "cuda_available": True, "device_count": 0}
    p.sdc()
    assert p.doc["sdc"] == {"present": False, "reason": "torch sees no CUDA device"} and runs == []
    p.doc["torch"] = {"present": True, "cuda_available": True, "device_count": 2}
    p.doc["errors"].append({"collector": "torch", "error": "earlier"})
    p.sdc()
    assert runs == [p.prof]
    assert p.doc["sdc"] == {"present": True, "gpus": [], "text": '{"schema": "s"}'}
    assert p.doc["raw"]["sdc"] == '{"schema": "s"}'
    assert p.doc["errors"] == [{"collector": "torch", "error": "earlier"},
                               {"collector": "sdc.gpu1", "error": "mismatch"}]


def test_goodput_per_profile(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    from gridready.probe import goodput

    runs: list[Any] = []
    def run_all(prof: dict[str, Any], errors: list[dict[str, str]]) -> str:
        runs.append(prof)
        errors.append({"collector": "goodput", "error": "slow"})
        return "TEXT"

    monkeypatch.setattr(goodput, "run_all", run_all)
    monkeypatch.setattr(goodput, "parse", lambda text: {"gpus": [text]})
    q = probe(node)
    q.doc["torch"] = {"present": True, "cuda_available": True, "device_count": 2}
    q.goodput()
    assert q.doc["goodput"] == {"present": False, "ran": False, "reason": "the quick profile runs no training steps"}
    s = probe(node, profile="standard")
    s.doc["torch"] = {"present": False, "import_error": "ImportError: x"}
    s.goodput()
    assert s.doc["goodput"] == {"present": False, "ran": True, "reason": "torch not importable (ImportError: x)"}
    assert runs == []
    s.doc["torch"] = {"present": True, "cuda_available": True, "device_count": 1}
    s.doc["errors"].append({"collector": "sdc", "error": "earlier"})
    s.goodput()
    assert runs == [s.prof]
    assert s.doc["goodput"] == {"present": True, "ran": True, "gpus": ["TEXT"]}
    assert s.doc["raw"]["goodput"] == "TEXT"
    assert s.doc["errors"] == [{"collector": "sdc", "error": "earlier"}, {"collector": "goodput", "error": "slow"}]
    s.prof["goodput_steps"] = None
    s.goodput()
    assert s.doc["goodput"]["ran"] is False


def test_torch_gpus_reasons(node: Node) -> None:
    p = probe(node)
    assert p._torch_gpus() == "torch not importable (None)"
    p.doc["torch"] = None
    assert p._torch_gpus() == "torch not importable (None)"
    p.doc["torch"] = {"present": True, "cuda_available": False, "device_count": 8}
    assert p._torch_gpus() == "torch sees no CUDA device"
    p.doc["torch"] = {"present": True, "cuda_available": True}
    assert p._torch_gpus() == "torch sees no CUDA device"

