"""Value-level checks of the multi-node gate: the per-node NIC sum over mixed NIC classes (Gb/s to GB/s), the floor
at its boundaries (equal passes, just below fails), and each verdict branch with its exact figures."""

from __future__ import annotations

import pytest

from gridready.certify.multinode import (
    CollectiveRun,
    Transport,
    judge_run,
    mpirun_plan,
    multinode_floor,
    nccl_env,
    parse_torch_sweep,
    torchrun_plan,
)
from gridready.certify.result import GateStatus as S
from gridready.spec.cluster import NodeGroup
from gridready.spec.fabric import FabricSettings

GIB = 1 << 30


def group(nics: list[tuple[str, int]]) -> NodeGroup:
    return NodeGroup.model_validate({
        "name": "g", "sku": "H200-SXM-141GB", "gpus_per_node": 8, "mgmt_interface": "eth0",
        "nics": [{"name": f"n{i}", "kind": k, "rate_gbps": r} for i, (k, r) in enumerate(nics)]})


@pytest.mark.parametrize(("nics", "gbytes"), [
    ([("infiniband", 400)] * 8, 400.0),                        # 8 x NDR: 3200 Gb/s = 400 GB/s
    ([("roce", 200)] * 8, 200.0),
    ([("infiniband", 400)] * 4 + [("roce", 200)] * 2, 250.0),  # IB and RoCE both count: (1600 + 400) / 8
    ([("infiniband", 400)] * 8 + [("ethernet", 100)] * 2, 400.0),  # the management Ethernet never counts
    ([("ethernet", 100)], 0.0),
    ([("infiniband", 100)], 12.5),                              # bits to bytes, not GiB
])
def test_nic_bandwidth_sums_fabric_classes_in_gbytes(nics, gbytes):
    assert group(nics).nic_bandwidth_gbytes == gbytes


@pytest.mark.parametrize(("algo", "settings", "floor", "fraction", "want"), [
    ("ring", {}, None, None, (340.0, "85% of 400 GB/s per-node NIC bandwidth")),
    ("ring", {}, 350.5, 0.9, (350.5, "spec floors.multinode_busbw_gbps")),  # the spec's absolute floor first
    ("ring", {}, None, 0.9, (360.0, "90% of 400 GB/s per-node NIC bandwidth")),
    ("tree", {"floor_gbps": {"tree": 410.0}}, None, 0.9, (410.0, "spec fabric.floor_gbps.tree")),
    ("ring", {"floor_fraction": {"ring": 0.8}}, None, 0.9, (320.0, "80% of 400 GB/s per-node NIC bandwidth")),
    ("collnet", {"floor_fraction": {"ring": 0.7}}, None, None, (280.0, "70% of 400 GB/s per-node NIC bandwidth")),
])
def test_multinode_floor_sources(algo, settings, floor, fraction, want):
    assert multinode_floor(algo, 400, FabricSettings(**settings), floor, fraction) == want


def test_the_floor_rounds_to_hundredths():
    # 333.337 x 0.9 = 300.0033: a third digit would show
    assert multinode_floor("ring", 333.337, FabricSettings(), spec_fraction=0.9)[0] == 300.0
    assert multinode_floor("ring", 111.11, FabricSettings())[0] == 94.44


def run(peak: float, *, size: int = GIB, kind: str = "NET/IB/GDRDMA", **over) -> CollectiveRun:
    fields = dict(rows=[{"bytes": size // 2, "busbw": peak * 2}, {"bytes": size, "busbw": peak},
                        {"bytes": size * 2, "busbw": peak - 1}],
                  wrong=0, out_of_bounds=0, avg_busbw=None, hosts=["a", "b"], ranks=16,
                  transport=Transport(kind), errors=[])
    fields.update(over)
    return CollectiveRun(**fields)


@pytest.mark.parametrize(("peak", "status"), [(340.0, S.PASS), (339.99, S.FAIL), (340.01, S.PASS)])
def test_floor_boundary(peak, status):
    v = judge_run(run(peak), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB, expect_ranks=16, expect_hosts=2)
    assert v.status == status
    assert v.peak_gbps == peak and v.peak_bytes == GIB  # sizes below min_bytes never count, however fast


def test_the_reason_states_peak_size_share_and_floor():
    v = judge_run(run(350.0), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB)
    assert v.pct_of_nic == 87.5
    assert v.reason == "peak busbw 350 GB/s at 1 GiB = 87.5% of 400 GB/s NIC, floor 340 over NET/IB/GDRDMA"
    low = judge_run(run(300.0), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB)
    assert low.reason == "peak busbw 300 GB/s at 1 GiB = 75.0% of 400 GB/s NIC, floor 340: below the floor"


@pytest.mark.parametrize(("over", "kw", "status", "reason"), [
    ({"wrong": 3}, {}, S.FAIL, "#wrong = 3: data corruption"),
    ({"out_of_bounds": 2}, {}, S.FAIL, "2 out-of-bounds values"),
    ({"errors": ["boom"]}, {}, S.ERROR, "run failed (exit 0): boom"),
    ({}, {"rc": 1}, S.ERROR, "run failed (exit 1): see output"),
    ({"ranks": 8}, {"expect_ranks": 16}, S.ERROR, "8 ranks ran, expected 16"),
    ({"ranks": 16}, {"expect_ranks": 16}, S.PASS, None),
    ({"hosts": ["a"]}, {"expect_hosts": 2}, S.ERROR,
     "ranks ran on 1 host(s), expected 2: not a multi-node run"),
    ({"hosts": ["a", "b"]}, {"expect_hosts": 2}, S.PASS, None),
    ({"hosts": ["a", "b", "c"]}, {"expect_hosts": 2}, S.PASS, None),
])
def test_checks_before_the_bandwidth(over, kw, status, reason):
    v = judge_run(run(390.0, **over), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB, **kw)
    assert v.status == status
    if reason:
        assert v.reason == reason


@pytest.mark.parametrize(("kind", "kw", "status"), [
    ("NET/Socket", {}, S.FAIL),
    ("NET/IB", {}, S.WARN),
    ("NET/IB", {"require_gdr": False}, S.PASS),
    ("unknown", {}, S.ERROR),
    ("unknown", {"require_transport": False}, S.PASS),
    ("P2P/SHM only", {}, S.WARN),
])
def test_transport_decides_above_the_floor(kind, kw, status):
    v = judge_run(run(390.0, kind=kind), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB, **kw)
    assert (v.status, v.transport) == (status, kind)


def test_a_sweep_below_min_bytes_is_an_error():
    v = judge_run(run(390.0, size=GIB // 4), floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB)
    assert (v.status, v.reason) == (S.ERROR, "sweep never reached 1 GiB")


@pytest.mark.parametrize(("parsed", "rc", "reason"), [
    (None, 1, "no nccl-tests results (exit 1)"),
    (None, None, "no nccl-tests results (no output)"),
])
def test_no_results(parsed, rc, reason):
    v = judge_run(parsed, floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB, rc=rc)
    assert (v.status, v.reason, v.transport) == (S.ERROR, reason, "unknown")


def test_nccl_env_per_algorithm():
    ring = nccl_env([], None, FabricSettings(), gid_index=3)
    assert ring == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_ALGO": "Ring",
                    "NCCL_NVLS_ENABLE": "0", "NCCL_IB_GID_INDEX": "3"}
    tree = nccl_env(["mlx5_0"], "bond0", FabricSettings(algo="tree"))
    assert tree == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_IB_HCA": "=mlx5_0:1",
                    "NCCL_SOCKET_IFNAME": "bond0", "NCCL_ALGO": "Tree"}
    assert "NCCL_ALGO" not in nccl_env([], None, FabricSettings(algo="default"))


# -- the torchrun fallback's output (torchrun_plan's contract: rank 0 prints one JSON line) ----------------------

def test_torch_sweep_reads_rank_0s_json_line():
    text = ("NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
            '  {"rows": [{"bytes": 1073741824, "busbw_gbps": 361.5}, {"bytes": 2147483648, "busbw_gbps": 370.25},'
            ' {"bytes": 4}], "wrong": 2}\n'
            "{not json\n")
    run = parse_torch_sweep(text, ["a", "b"])
    assert run.rows == [{"bytes": GIB, "busbw": 361.5}, {"bytes": 2 * GIB, "busbw": 370.25}]
    assert (run.wrong, run.hosts, run.ranks, run.errors, run.out_of_bounds, run.avg_busbw) == (2, ["a", "b"], 0, [],
                                                                                              None, None)
    assert run.transport.kind == "NET/IB/GDRDMA"


def test_torch_sweep_takes_the_last_json_line_and_the_older_sizes_key():
    text = '{"rows": [{"bytes": 1, "busbw_gbps": 1.0}]}\n{"sizes": [{"bytes": 8, "busbw_gbps": 9.5}]}\n'
    run = parse_torch_sweep(text, ["a", "b"])
    assert run.rows == [{"bytes": 8, "busbw": 9.5}] and run.wrong is None


def test_torch_sweep_without_json_is_an_error_named():
    run = parse_torch_sweep("NCCL INFO Using network Socket\ntraceback\n", ["a", "b"])
    assert (run.rows, run.errors, run.transport.kind) == ([], ["no JSON result from rank 0"], "NET/Socket")
    v = judge_run(run, floor_gbps=340.0, nic_gbytes=400, min_bytes=GIB)
    assert (v.status, v.reason) == (S.ERROR, "no nccl-tests results (no JSON result from rank 0)")


def test_torchrun_plan_argv_per_host():
    s = FabricSettings(min_bytes=GIB, max_bytes=4 * GIB)
    plans = torchrun_plan(["a", "b"], 8, {"NCCL_DEBUG": "INFO", "A": "1"}, s, addresses={"a": "10.0.0.1"})
    assert [p.launcher for p in plans] == ["a", "b"]
    assert plans[1].argv == [
        "env", "A=1", "NCCL_DEBUG=INFO", "torchrun", "--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.1:29511", "--rdzv-id=gridready-a+b", "-m", "gridready.probe.torch_allreduce",
        "--torchrun", "--min-bytes", str(GIB), "--max-bytes", str(4 * GIB)]
    assert plans[0].hosts == ["a", "b"] and plans[0].env == {"NCCL_DEBUG": "INFO", "A": "1"}
    assert plans[0].hostfile == "10.0.0.1 slots=8\nb slots=8\n" and plans[0].collective == "all_reduce"
    other = torchrun_plan(["x", "y"], 4, {}, s, port=30000, module="m")
    assert "--rdzv-endpoint=x:30000" in other[0].argv and other[0].argv[other[0].argv.index("-m") + 1] == "m"


@pytest.mark.parametrize(("path", "collective", "binary"), [
    ("/opt/nccl-tests/current/bin/all_reduce_perf", "all_gather", "/opt/nccl-tests/current/bin/all_gather_perf"),
    ("/opt/nccl-tests/build/", "reduce_scatter", "/opt/nccl-tests/build/reduce_scatter_perf"),
    ("all_reduce_perf", "all_reduce", "all_reduce_perf"),
])
def test_binary_of_each_collective(path, collective, binary):
    plan = mpirun_plan(["a", "b"], 1, {}, FabricSettings(all_reduce_perf=path), collective=collective)
    assert binary in plan.argv and plan.collective == collective


def test_mpirun_plan_argv():
    """The whole command: a host without an address keeps its name, one rank per GPU, tagged output, NUMA binding."""
    s = FabricSettings(min_bytes=GIB, max_bytes=2 * GIB, iters=5, check_iters=2, timeout_s=300)
    plan = mpirun_plan(["a", "b"], {"a": 8, "b": 4}, {"NCCL_DEBUG": "INFO"}, s, addresses={"a": "10.0.0.1"})
    assert plan.argv == [
        "mpirun", "--allow-run-as-root", "--tag-output", "-np", "12", "-H", "10.0.0.1:8,b:4", "--bind-to", "numa",
        "-x", "NCCL_DEBUG=INFO", "/opt/nccl-tests/current/bin/all_reduce_perf", "-b", str(GIB), "-e", str(2 * GIB),
        "-f", "2", "-g", "1", "-c", "2", "-n", "5", "-T", "300"]
    assert (plan.launcher, plan.hosts, plan.hostfile) == ("a", ["a", "b"], "10.0.0.1 slots=8\nb slots=4\n")
