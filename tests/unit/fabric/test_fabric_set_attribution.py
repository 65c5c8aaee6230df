"""Issue 34, finding 2: when every member passed its pairs and only the all-node run fails, no node is at fault;
the old phase failed every member as if each were bad."""

from __future__ import annotations

from pathlib import Path

from gridready.spec.fabric import FabricSettings
from gridready.stages.fabric import run_fabric_phase

from .fakefabric import HEALTHY_BUSBW, FakeFabric, make_inventory


class SpineFault(FakeFabric):
    """Pairs run at full rate; the all-node run, crossing the spine, at 300 GB/s (below the 340 floor)."""

    def _busbw(self, hosts: list[str]) -> float:
        return 300.0 if len(hosts) > 2 else super()._busbw(hosts)


def test_all_node_failure_with_clean_pairs_is_the_fabrics(tmp_path: Path) -> None:
    inv = make_inventory(4)
    r = run_fabric_phase(inv, None, list(inv.hosts), SpineFault(inv), out_dir=tmp_path)
    assert r.set_runs[0].status == "fail" and r.quarantined == {}
    for n in r.nodes:
        g = next(g for g in r.node_results[n] if g.gate == "nccl_multinode_all_reduce")
        assert g.status == "error" and "not attributable to this node" in g.reason and g.blocks_certification


class RoutedAround(FakeFabric):
    """A node whose mlx5_1 runs at half rate: NCCL_IB_HCA leaves the port out, so every run it joins uses 7 of 8
    rails (7/8 of healthy: its pairs pass the 250 GB/s pair floor, an all-node run misses the 340 floor)."""

    def _busbw(self, hosts: list[str]) -> float:
        narrowed = any(self.faults.get(h) == "half_rate" for h in hosts)
        return HEALTHY_BUSBW * 7 / 8 if narrowed else HEALTHY_BUSBW


def test_a_node_failed_by_an_hca_gate_stays_out_of_the_all_node_run(tmp_path: Path) -> None:
    """With the HCA prefilter off the node still runs its pairs, but the all-node run is over the others: kept in,
    its narrowed HCA list failed the run and blocked every healthy member as a fault of the fabric."""
    inv = make_inventory(4)
    bad = "gpu03"
    r = run_fabric_phase(inv, None, list(inv.hosts), RoutedAround(inv, {bad: "half_rate"}), out_dir=tmp_path,
                         settings=FabricSettings(exclude_hca_failures=False))
    assert any(bad in p.hosts for p in r.pair_runs)  # the prefilter is off: it ran its pairs
    assert list(r.quarantined) == [bad] and r.quarantined[bad].startswith("HCA:")
    assert r.set_runs[0].status == "pass" and bad not in r.set_runs[0].hosts
    assert sorted(r.certified) == sorted(set(inv.hosts) - {bad})
