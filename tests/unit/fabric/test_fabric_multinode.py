"""Multi-node nccl-tests parsing, transport detection, floors and verdicts on the public multi-node fixtures."""

from __future__ import annotations

import pytest

from gridready.certify.multinode import (
    judge_run,
    mpirun_plan,
    multinode_floor,
    nccl_env,
    parse_nccl_tests,
    parse_transport,
    torchrun_plan,
)
from gridready.spec.certification import CertificationSpec
from gridready.spec.fabric import FabricSettings

GIB = 1 << 30
NT = "nccl-tests/all_reduce_perf__"


def _verdict(public, name: str, nic_gbytes: float, hosts: int | None = 2):
    run = parse_nccl_tests((public / (NT + name)).read_text())
    floor, _ = multinode_floor("ring", nic_gbytes, FabricSettings())
    return run, judge_run(run, floor_gbps=floor, nic_gbytes=nic_gbytes, min_bytes=GIB, expect_hosts=hosts,
                          require_transport=False)  # the public fixtures carry no NCCL_DEBUG lines


def test_degraded_2node_h100_ndr_fails(public):
    run, v = _verdict(public, "2node-16xH100-IB-NDR__DEGRADED-155GBps-default-algo__nccl-tests-issue290.txt", 400)
    assert run.hosts == ["node005", "node007"] and run.ranks == 16 and run.avg_busbw == 142.735
    assert v.status == "fail" and v.peak_gbps == 155.57 and v.pct_of_nic == 38.9
    assert "38.9% of 400 GB/s NIC, floor 340" in v.reason


@pytest.mark.parametrize(("name", "nic", "peak"), [
    ("2node-16xA100-DGX-8xHDR200__healthy-188GBps__deepops.txt", 8 * 200 / 8, 188.7),  # 94.3%, DeepOps' figure
    ("2node-16xH100-GCP-a3mega-TCPXO__healthy-339GBps__a3mega-fork.txt", 8 * 200 / 8, 338.82),
    ("2node-16xA100-p4de-EFA__healthy-78GBps__awsome-distributed-training.txt", 4 * 100 / 8, 78.33),
])
def test_healthy_2node_runs_pass_against_their_own_fabric(public, name, nic, peak):
    _, v = _verdict(public, name, nic, hosts=None)
    assert v.status == "pass" and v.peak_gbps == peak and v.pct_of_nic >= 92


def test_healthy_2node_a100_fails_against_an_ndr_spec(public):
    _, v = _verdict(public, "2node-16xA100-DGX-8xHDR200__healthy-188GBps__deepops.txt", 400, hosts=None)
    assert v.status == "fail"


def test_low_roce_vf_run_fails_against_ndr(public):
    _, v = _verdict(public, "2node-RoCE-SRIOV-CX5-VF-k8s__LOW-23GBps-expected-for-hw__deepops.txt", 400, None)
    assert v.status == "fail" and v.peak_gbps == 22.92


def test_wrong_values_fail_whatever_the_bandwidth(public):
    run, v = _verdict(public, "DGX-H100-to-DGX-A100-100GbE__FAIL-wrong-nonzero-NCCL_PROTO-SIMPLE__EXCERPT__"
                      "nccl-issue1184.txt", 12.5, None)
    assert run.wrong == 237858 + 238038 and v.status == "fail" and "#wrong" in v.reason


def test_single_node_run_is_not_a_multinode_result(public):
    _, v = _verdict(public, "1node-8xH100-NVLS__healthy-476GBps__nccl-tests-issue290.txt", 400, hosts=2)
    assert v.status == "error" and "1 host" in v.reason


def test_avg_bus_bandwidth_is_never_the_gated_figure(public):
    run, v = _verdict(public, "2node-16xH100-GCP-a3mega-TCPXO__healthy-339GBps__a3mega-fork.txt", 200, None)
    assert run.avg_busbw == 70.742 and v.peak_gbps == 338.82


IB_LINES = [
    "node005:291005:291100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [2]mlx5_4:1/IB ; "
    "OOB eth0:10.0.0.5<0>",
    "node005:291005:291100 [0] NCCL INFO Using network IB",
    "node005:291005:291120 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA",
]
SOCKET_LINES = [
    "node005:291005:291100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>",
    "node005:291005:291100 [0] NCCL INFO Using network Socket",
    "node005:291005:291120 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0",
]


def test_transport_detection():
    t = parse_transport(IB_LINES)
    assert t.kind == "NET/IB/GDRDMA" and t.ib_devices == ["mlx5_0", "mlx5_3", "mlx5_4"]
    assert parse_transport([ln.replace("/GDRDMA", "") for ln in IB_LINES]).kind == "NET/IB"
    assert parse_transport(SOCKET_LINES).kind == "NET/Socket"
    assert parse_transport(["# nothing"]).kind == "unknown"


def test_socket_fallback_fails_even_above_the_floor(public):
    text = (public / (NT + "2node-16xH100-GCP-a3mega-TCPXO__healthy-339GBps__a3mega-fork.txt")).read_text()
    run = parse_nccl_tests("\n".join(SOCKET_LINES) + "\n" + text)
    v = judge_run(run, floor_gbps=184, nic_gbytes=200, min_bytes=GIB)
    assert v.status == "fail" and "NET/Socket" in v.reason
    ok = judge_run(parse_nccl_tests("\n".join(IB_LINES) + "\n" + text), floor_gbps=184, nic_gbytes=200,
                   min_bytes=GIB)
    assert ok.status == "pass" and ok.transport == "NET/IB/GDRDMA"
    unknown = judge_run(parse_nccl_tests(text), floor_gbps=184, nic_gbytes=200, min_bytes=GIB)
    assert unknown.status == "error"  # never pass without knowing the transport


def test_tagged_mpirun_output_is_parsed(public):
    text = (public / (NT + "2node-16xH100-IB-NDR__DEGRADED-155GBps-default-algo__nccl-tests-issue290.txt")).read_text()
    tagged = "\n".join(f"[1,0]<stdout>:{ln[4:]}" for ln in text.splitlines())
    assert parse_nccl_tests(tagged).peak(GIB) == (155.57, 8 * GIB)


def test_floors():
    s = FabricSettings()
    assert multinode_floor("ring", 400, s) == (340.0, "85% of 400 GB/s per-node NIC bandwidth")
    assert multinode_floor("ring", 400, s, spec_floor_gbps=350)[0] == 350
    assert multinode_floor("ring", 400, s, spec_fraction=0.9)[0] == 360
    assert multinode_floor("nvls", 400, FabricSettings(floor_gbps={"nvls": 420}))[0] == 420
    assert multinode_floor("tree", 400, FabricSettings(floor_fraction={"tree": 0.8}), spec_fraction=0.9)[0] == 320
    cert = CertificationSpec()
    assert cert.nccl.multinode_fraction_of_nic == 0.85


def test_mpirun_command_from_the_inventory():
    s = FabricSettings(extra_env={"NCCL_IB_QPS_PER_CONNECTION": "2"})
    env = nccl_env(["mlx5_0", "mlx5_1", "mlx5_10"], "eth0", s)
    plan = mpirun_plan(["gpu01", "gpu02"], 8, env, s, addresses={"gpu01": "10.77.0.11", "gpu02": "10.77.0.12"},
                       min_bytes=2 * GIB)
    cmd = plan.command
    assert "-np 16" in cmd and "-H 10.77.0.11:8,10.77.0.12:8" in cmd
    assert "-x NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_10:1" in cmd  # '=' prefix: exact names
    assert "-x NCCL_SOCKET_IFNAME=eth0" in cmd and "-x NCCL_DEBUG=INFO" in cmd
    assert "-x NCCL_ALGO=Ring" in cmd and "-x NCCL_IB_QPS_PER_CONNECTION=2" in cmd
    binary = plan.argv.index("/opt/nccl-tests/current/bin/all_reduce_perf")
    assert plan.argv[binary + 1] == "-b" and f"-b {2 * GIB}" in cmd and "-c 1" in cmd
    assert plan.hostfile == "10.77.0.11 slots=8\n10.77.0.12 slots=8\n"
    ag = mpirun_plan(["a", "b"], {"a": 8, "b": 4}, env, FabricSettings(all_reduce_perf="/opt/nccl-tests/build"),
                     collective="all_gather")
    assert "/opt/nccl-tests/build/all_gather_perf" in ag.argv and "-np 12" in ag.command


def test_torchrun_fallback():
    plans = torchrun_plan(["a", "b"], 8, {"NCCL_DEBUG": "INFO"}, FabricSettings(), addresses={"a": "10.77.0.11"})
    assert len(plans) == 2 and plans[1].launcher == "b"
    assert "--rdzv-endpoint=10.77.0.11:29511" in plans[1].command and "--nnodes=2" in plans[1].command
