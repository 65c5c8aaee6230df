"""The fabric section of report.md/html: every pair and set run against the floor, with the plots."""

from __future__ import annotations

from gridready.certify.fabric import CollectiveRecord, FabricResult
from gridready.certify.result import GateStatus
from gridready.report.fabric_section import render_fabric_html, render_fabric_md

GIB = 1 << 30


def _run(hosts, phase, busbw, status=GateStatus.PASS):
    return CollectiveRecord(hosts=hosts, phase=phase, status=status, busbw_gbps=busbw, pct_of_nic=busbw / 4,
                            floor_gbps=368.0, transport="NET/IB/GDRDMA", reason="r",
                            curve={2 * GIB: busbw - 5, 8 * GIB: busbw})


def test_pairs_set_floor_and_plots_are_reported(tmp_path):
    plot = tmp_path / "fabric" / "fabric-pairs.png"
    plot.parent.mkdir()
    plot.write_bytes(b"png")
    result = FabricResult(
        status="fail", reason="node3 failed twice", nodes=["node1", "node2", "node3"], certified=["node1", "node2"],
        quarantined={"node3": "188.0 GB/s with node1 and node2"}, pairwise_run_count=3, isolation_rounds=2,
        nic_gbytes=400.0, floor_gbps=368.0, floor_source="0.92 x 400 GB/s NIC",
        pair_runs=[_run(["node1", "node3"], "pair", 188.0, GateStatus.FAIL), _run(["node2", "node3"], "retest",
                                                                                      187.5, GateStatus.FAIL)],
        set_runs=[_run(["node1", "node2"], "set", 374.8)], plots=[str(plot), str(tmp_path / "missing.png")],
    )
    md = "\n".join(render_fabric_md(result, tmp_path))
    assert "| pair | node1+node3 | fail | 188.0 | 47.0% | 368 |" in md
    assert "| set | node1+node2 | pass | 374.8 |" in md
    assert "node3 (188.0 GB/s with node1 and node2)" in md
    assert "![fabric-pairs](fabric/fabric-pairs.png)" in md and "missing" not in md
    assert "8 GiB 374.8" in md
    page = render_fabric_html(result, tmp_path)
    assert '<img src="fabric/fabric-pairs.png"' in page and "<td>retest</td>" in page
