"""Fabric certification on a 6-host sandbox fleet: a half-rate HCA is named, quarantined, the rest certified.

One fleet serves every scenario (profiles are rewritten between them); the fabric phase runs over SSH with the
simulated mpirun/nccl-tests/ibstat/ib_write_bw and the per-host fabric agents (busbw bounded by the worst host).
Both paths are covered: the HCA gate prefilter (default) and pairwise isolation alone (prefilter off).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready.certify.quarantine import k8s_node_patches, slurm_drain_commands
from gridready.inventory import load
from gridready.spec.fabric import FabricSettings
from gridready.stages.fabric import SshRunner, run_fabric_phase

from .fabric_simtools import ensure_sim_tools, set_faults

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
HOSTS = [f"node{i}" for i in range(1, 7)]
HALF = [{"kind": "hca_half_rate", "hca": "mlx5_1"}]


@pytest.fixture(scope="module")
def six(make_module_fleet):
    f = make_module_fleet(6, healthy=True)
    ensure_sim_tools(f)
    return f


def _phase(fleet, tmp: Path, **settings):
    inv = load(fleet.inventory)  # group_vars/all: gridready_rdma_sysfs_root = the simulated sysfs tree
    # the simulated tools are copied onto PATH here (fabric_simtools), not installed under /opt/nccl-tests
    return run_fabric_phase(inv, None, HOSTS, SshRunner.from_inventory(inv), out_dir=tmp,
                            settings=FabricSettings(all_reduce_perf="all_reduce_perf", **settings))


# a node slower across nodes than any HCA gate sees (the simulator scales its NCCL busbw; 0.4 x 480 GB/s of
# NVLink ring bound is under the 250 GB/s pair floor)
SLOW = [{"kind": "low_nccl_busbw", "factor": 0.4}]


@pytest.mark.parametrize(("faulted", "prefilter", "fault"), [
    ([], True, HALF),
    (["node4"], True, HALF),
    (["node4"], False, HALF),
    (["node2", "node5"], False, SLOW),
])
def test_names_exactly_the_faulted_hosts(six, tmp_path, faulted, prefilter, fault):
    set_faults(six, dict.fromkeys(faulted, fault))
    r = _phase(six, tmp_path, exclude_hca_failures=prefilter)
    assert sorted(r.quarantined) == faulted, r.reason
    blocking = {n: [f"{g.gate}: {g.reason}" for g in gs if g.blocks_certification] for n, gs in r.node_results.items()}
    assert sorted(r.certified) == sorted(set(HOSTS) - set(faulted)), blocking
    assert r.set_runs and r.set_runs[0].status == "pass" and r.set_runs[0].transport == "NET/IB/GDRDMA"
    assert sorted(r.set_runs[0].hosts) == sorted(r.certified)
    if faulted and fault is HALF:
        # the HCA gate names the port with or without the prefilter; without it the pairs ran around the port
        assert "mlx5_1 port 1 rate 200" in r.quarantined["node4"]
        assert prefilter or r.pairwise_run_count >= 3
    if fault is SLOW:
        assert r.pairwise_run_count <= 3 + 2 * 2 * len(faulted)
        for h in faulted:
            assert "failed pairwise all-reduce with 2 partners" in r.quarantined[h]
    taints = {p["node"]: p["taints"] for p in k8s_node_patches(r.certified, r.quarantined)}
    assert all(bool(taints[h]) == (h in faulted) for h in HOSTS)
    assert len(slurm_drain_commands(r.quarantined)) == len(faulted)
    assert (tmp_path / "fabric" / "fabric.json").is_file()
