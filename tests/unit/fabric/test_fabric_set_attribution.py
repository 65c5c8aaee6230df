"""Issue 34, finding 2: when every member passed its pairs and only the all-node run fails, no node is at fault;
the old phase failed every member as if each were bad."""

from __future__ import annotations

from pathlib import Path

from gridready.stages.fabric import run_fabric_phase

from .fakefabric import FakeFabric, make_inventory


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
