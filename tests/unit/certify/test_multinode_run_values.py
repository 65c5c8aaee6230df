"""The multi-node run, read and judged at the value level: the transport NCCL reports (its kind, every IB device
named on any host, the first three lines as evidence), the rows of an mpirun-tagged nccl-tests capture (best of the
two columns, `#wrong` per row and summed, `N/A` kept apart from 0), the floor's rounding, every verdict's figures,
and the gate result the verdict becomes."""

from __future__ import annotations

import pytest

from gridready.certify.multinode import (
    CollectiveRun,
    Transport,
    Verdict,
    _binary,
    judge_run,
    mpirun_plan,
    multinode_floor,
    parse_nccl_tests,
    parse_transport,
    verdict_gate,
)
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from gridready.spec.fabric import FabricSettings

GIB = 1 << 30
TAG = "[1,0]<stdout>:"  # mpirun --tag-output
IB_A = "node-a:1000:1020 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0"
IB_B = "node-b:2000:2020 [0] NCCL INFO NET/IB : Using [0]mlx5_2:1/IB [1]mlx5_0:1/IB ; OOB eth0"


def _via(kind: str, n: int) -> list[str]:
    return [f"node-a:1000:1020 [0] NCCL INFO Channel 0{i}/0 : 1[0] -> 0[0] [receive] via {kind}" for i in range(n)]


# ---- parse_transport ------------------------------------------------------------------------------------------------

def test_gdrdma_names_every_ib_device_of_every_host_and_three_lines() -> None:
    gdr = _via("NET/IB/0/GDRDMA", 4)
    t = parse_transport([IB_A, IB_B, *_via("NET/IB/1", 1), *gdr])
    assert t == Transport("NET/IB/GDRDMA", ["mlx5_0", "mlx5_1", "mlx5_2"], gdr[:3])


def test_socket_wins_over_ib_and_keeps_three_lines() -> None:
    sock = _via("NET/Socket/0", 4)
    assert parse_transport([IB_A, *_via("NET/IB/0/GDRDMA", 2), *sock]) == \
        Transport("NET/Socket", ["mlx5_0", "mlx5_1"], sock[:3])


def test_ib_without_gdrdma_keeps_three_lines() -> None:
    ib = _via("NET/IB/0", 5)
    assert parse_transport([IB_B, *ib]) == Transport("NET/IB", ["mlx5_2", "mlx5_0"], ib[:3])


def test_only_p2p_or_shm_channels_is_its_own_kind() -> None:
    lines = ["node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
             "node-a:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct"]
    assert parse_transport([IB_A, *lines]) == Transport("P2P/SHM only", ["mlx5_0", "mlx5_1"], [])


@pytest.mark.parametrize("lines", [
    [IB_A, "node-a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"],  # NCCL lines, no channel
    ["Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"],  # a channel line that is not NCCL INFO
])
def test_no_channel_named_is_unknown(lines: list[str]) -> None:
    t = parse_transport(lines)
    assert (t.kind, t.evidence) == ("unknown", [])
    assert t.ib_devices == (["mlx5_0", "mlx5_1"] if IB_A in lines else [])


# ---- parse_nccl_tests -----------------------------------------------------------------------------------------------

HEADER = """# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 2147483648 step: 2(factor) iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on     node-a device  0 [0x19] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   2000 on     node-b device  0 [0x19] NVIDIA H100 80GB HBM3
{ib}
{via}
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
  1073741824     268435456     float     sum      -1   5000.0  214.75  214.75    {w1}   5010.0  214.32  214.32    {w2}
  2147483648     536870912     float     sum      -1   9900.0  216.92  216.92     N/A   9950.0  218.00  218.00     N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 216.0"""


def _capture(w1: str, w2: str) -> str:
    text = HEADER.format(ib=IB_A, via="\n".join(_via("NET/IB/0/GDRDMA", 1)), w1=w1, w2=w2)
    return "\n".join(TAG + ln for ln in text.splitlines()) + "\n"


def test_rows_take_the_best_column_and_wrong_per_row_na_apart_from_zero() -> None:
    r = parse_nccl_tests(_capture("0", "2"))
    assert r.rows == [
        {"bytes": GIB, "busbw": 214.75, "busbw_oop": 214.75, "busbw_ip": 214.32, "wrong": 2},
        {"bytes": 2 * GIB, "busbw": 218.0, "busbw_oop": 216.92, "busbw_ip": 218.0, "wrong": None},
    ]
    assert (r.wrong, r.out_of_bounds, r.avg_busbw, r.errors) == (2, 0, 216.0, [])
    assert (r.hosts, r.ranks) == (["node-a", "node-b"], 2)
    # the tag is taken off before the transport is read: the evidence is NCCL's line itself
    assert r.transport == Transport("NET/IB/GDRDMA", ["mlx5_0", "mlx5_1"], _via("NET/IB/0/GDRDMA", 1))


def test_zero_wrong_is_zero_and_all_na_is_none() -> None:
    assert parse_nccl_tests(_capture("0", "0")).wrong == 0
    unchecked = parse_nccl_tests(_capture("N/A", "N/A"))
    assert unchecked.wrong is None and [r["wrong"] for r in unchecked.rows] == [None, None]


# ---- the floor --------------------------------------------------------------------------------------------------

def test_the_spec_fraction_floor_rounds_to_hundredths() -> None:
    # 0.8 x 123.456 GB/s = 98.7648 GB/s
    assert multinode_floor("ring", 123.456, FabricSettings(), spec_fraction=0.8) == \
        (98.76, "80% of 123.456 GB/s per-node NIC bandwidth")


# ---- judge_run: every verdict carries the figures it read --------------------------------------------------------

def _run(**over: object) -> CollectiveRun:
    fields: dict[str, object] = dict(
        rows=[{"bytes": GIB // 2, "busbw": 500.0}, {"bytes": GIB, "busbw": 330.0}, {"bytes": 2 * GIB, "busbw": 320.0}],
        wrong=0, out_of_bounds=0, avg_busbw=None, hosts=["a", "b"], ranks=16, transport=Transport("NET/IB"),
        errors=[])
    fields.update(over)
    return CollectiveRun(**fields)  # type: ignore[arg-type]


FIGURES = (330.0, GIB, 82.5)  # peak at >= 1 GiB, its size, 330 / 400 GB/s


@pytest.mark.parametrize(("over", "kw", "status", "transport"), [
    ({"wrong": 1}, {}, S.FAIL, "NET/IB"),
    ({"out_of_bounds": 4}, {}, S.FAIL, "NET/IB"),
    ({"errors": ["x"]}, {}, S.ERROR, "NET/IB"),
    ({"ranks": 8}, {"expect_ranks": 16}, S.ERROR, "NET/IB"),
    ({"hosts": ["a"]}, {"expect_hosts": 2}, S.ERROR, "NET/IB"),
    ({"transport": Transport("NET/Socket")}, {}, S.FAIL, "NET/Socket"),
    ({"transport": Transport("unknown")}, {}, S.ERROR, "unknown"),
    ({}, {}, S.WARN, "NET/IB"),
    ({"transport": Transport("NET/IB/GDRDMA")}, {}, S.PASS, "NET/IB/GDRDMA"),
])
def test_each_verdict_reports_peak_size_share_and_transport(over: dict[str, object], kw: dict[str, object],
                                                            status: S, transport: str) -> None:
    v = judge_run(_run(**over), floor_gbps=300.0, nic_gbytes=400, min_bytes=GIB, **kw)  # type: ignore[arg-type]
    assert (v.status, v.peak_gbps, v.peak_bytes, v.pct_of_nic, v.transport) == (status, *FIGURES, transport)


def test_reasons_above_the_floor_name_the_figures() -> None:
    text = "peak busbw 330 GB/s at 1 GiB = 82.5% of 400 GB/s NIC, floor 300"
    unknown = judge_run(_run(transport=Transport("unknown")), floor_gbps=300.0, nic_gbytes=400, min_bytes=GIB)
    assert unknown.reason == f"{text}, but the NCCL transport is unknown (no NCCL_DEBUG=INFO lines)"
    ib = judge_run(_run(), floor_gbps=300.0, nic_gbytes=400, min_bytes=GIB)
    assert ib.reason == f"{text}; transport NET/IB without GPUDirect RDMA"
    sock = judge_run(_run(transport=Transport("NET/Socket")), floor_gbps=300.0, nic_gbytes=400, min_bytes=GIB)
    assert sock.reason == f"NCCL fell back to sockets (NET/Socket); {text}"


def test_a_sweep_that_never_reached_min_bytes_keeps_its_transport() -> None:
    v = judge_run(_run(transport=Transport("NET/IB/GDRDMA")), floor_gbps=300.0, nic_gbytes=400, min_bytes=4 * GIB)
    assert (v.status, v.peak_gbps, v.peak_bytes, v.pct_of_nic, v.transport) == \
        (S.ERROR, None, None, None, "NET/IB/GDRDMA")


def test_a_peak_at_zero_bytes_is_reported_at_zero_gib() -> None:
    run = _run(rows=[{"bytes": 0, "busbw": 350.0}], transport=Transport("NET/IB/GDRDMA"))
    v = judge_run(run, floor_gbps=300.0, nic_gbytes=400, min_bytes=0)
    assert v.reason == "peak busbw 350 GB/s at 0 GiB = 87.5% of 400 GB/s NIC, floor 300 over NET/IB/GDRDMA"


# ---- verdict_gate -----------------------------------------------------------------------------------------------

def test_verdict_gate_carries_the_verdict_floor_and_evidence() -> None:
    v = Verdict(S.WARN, "why", 330.0, GIB, 82.5, "NET/IB")
    r = verdict_gate("nccl_multinode", "a+b", v, 300.0, "spec", "fabric/a+b/all_reduce.txt")
    assert (r.gate, r.node, r.status, r.reason, r.unit, r.evidence, r.required) == \
        ("nccl_multinode", "a+b", S.WARN, "why", "GB/s", "fabric/a+b/all_reduce.txt", True)
    assert r.measured == {"busbw_gbps": 330.0, "bytes": GIB, "pct_of_nic": 82.5, "transport": "NET/IB"}
    assert r.expected == Expected(floor=300.0, source="spec")
    assert verdict_gate("g", "n", v, 300.0, "spec", None, required=False).required is False


# ---- launch -------------------------------------------------------------------------------------------------------

def test_a_folder_path_ending_in_x_keeps_its_last_letter() -> None:
    s = FabricSettings(all_reduce_perf="/srv/NCCLX/")
    assert _binary(s, "all_gather") == "/srv/NCCLX/all_gather_perf"


def test_mpirun_plan_keeps_its_environment() -> None:
    env = {"NCCL_DEBUG": "INFO"}
    assert mpirun_plan(["a", "b"], 8, env, FabricSettings()).env == {"NCCL_DEBUG": "INFO"}
