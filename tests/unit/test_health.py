"""The watcher's decisions (gridready.health): signals and the ledger in, drain / re-certify / hold out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gridready.health import Policy, Signal, decide, gates_for, outcome
from gridready.ledger import Deployment, Ledger, NodeEntry

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
NODES = ["n1", "n2", "n3", "n4"]


def _book(drained=(), age_days=1.0, verdicts=None, serving=("n1", "n2")) -> Ledger:
    judged = (NOW - timedelta(days=age_days)).isoformat()
    nodes = {n: NodeEntry(verdict=(verdicts or {}).get(n, "certified"), group="gpu_nodes", run_id="r", judged_at=judged,
                          valid_until=(NOW + timedelta(days=30)).isoformat(), profile="quick", summary="s",
                          drained=n in drained, drain_reason="xid 79" if n in drained else None) for n in NODES}
    roles = {n: "chat head" for n in serving}
    return Ledger(customer="acme", nodes=nodes, serving=Deployment(run_id="s", summary="s", at="t", roles=roles))


def test_gates_match_the_fault():
    assert gates_for(Signal(node="n1", kind="xid", code="79")) == ["xid", "gpu_inventory", "pcie_link", "dcgm"]
    assert "ecc" in gates_for(Signal(node="n1", kind="xid", code="48"))
    assert "nvlink" in gates_for(Signal(node="n1", kind="dcgm_health", code="DCGM_HEALTH_WATCH_NVLINK"))
    assert gates_for(Signal(node="n1", kind="xid", code="13")) == ["xid", "gpu_inventory", "dcgm"]


def test_a_fault_drains_the_node_and_recertifies_only_its_gates():
    acts = decide(_book(), [Signal(node="n2", kind="xid", code="79", detail="GPU has fallen off the bus")], NODES,
                  now=NOW)
    assert [(a.kind, a.node) for a in acts] == [("drain", "n2"), ("recertify", "n2")]
    assert acts[1].gates == sorted(["xid", "gpu_inventory", "pcie_link", "dcgm"])


def test_the_circuit_breaker_never_drains_more_than_the_share_of_a_pool():
    signals = [Signal(node=n, kind="xid", code="48") for n in ("n1", "n2", "n3")]
    acts = decide(_book(), signals, NODES, Policy(max_drain_share=0.5), now=NOW)
    assert [(a.kind, a.node) for a in acts if a.kind in ("drain", "hold")] == [
        ("drain", "n1"), ("drain", "n2"), ("hold", "n3")]
    assert "circuit breaker: 2 of 4 node(s) of gpu_nodes drained, at most 2 (50%)" in acts[-1].reason
    held = decide(_book(drained=("n1", "n2")), [Signal(node="n3", kind="xid", code="48")], NODES, now=NOW)
    assert [a.kind for a in held if a.node == "n3"] == ["hold"]


def test_warnings_are_not_acted_on_and_a_quiet_drained_node_is_recertified():
    acts = decide(_book(drained=("n3",)), [Signal(node="n1", kind="dcgm_field", code="temp", severity="warning")],
                  NODES, now=NOW)
    assert [(a.kind, a.node) for a in acts] == [("recertify", "n3")]
    back = outcome(acts, {"n3": "certified"})
    assert [(a.kind, a.node) for a in back] == [("return", "n3")]
    assert [a.kind for a in outcome(acts, {"n3": "quarantined"})] == ["quarantine"]


def test_weekly_recertification_idle_nodes_all_serving_nodes_rolling():
    acts = decide(_book(age_days=8), [], NODES, now=NOW)
    assert [(a.kind, a.node) for a in acts] == [
        ("drain", "n1"), ("recertify", "n1"), ("recertify", "n3"), ("recertify", "n4")]
    assert decide(_book(age_days=3), [], NODES, now=NOW) == []
    quarantined = decide(_book(age_days=8, verdicts={"n4": "quarantined"}), [], NODES, now=NOW)
    assert "n4" not in {a.node for a in quarantined}


DCGM_REPORT = """\
+---------------------------+----------------------------------------------------------+
| Health Monitor Report                                                                |
+===========================+==========================================================+
| Overall Health            | Failure                                                  |
| GPU                       |                                                          |
| -> 0                      | Failure                                                  |
|    -> Errors              |                                                          |
|       -> Memory system    | Failure                                                  |
|                           | Detected 1 volatile double-bit ECC error(s) in GPU 0.    |
| -> 3                      | Warning                                                  |
|    -> Errors              |                                                          |
|       -> PCIe system      | Warning                                                  |
|                           | Detected more than 8 PCIe replays per minute for GPU 3   |
|                           | : 13                                                     |
+---------------------------+----------------------------------------------------------+
"""


def test_dcgm_health_reads_dcgmis_tree_one_signal_per_system_and_entity():
    """`dcgmi health -c` as DCGM prints it (dcgmi/Health.cpp, DcgmiOutputTree(28, 60)): the Overall Health and the
    entity rows are no signals of their own; each system row is, its message rows the detail."""
    from gridready.health import from_dcgm_health

    found = from_dcgm_health("n1", DCGM_REPORT)
    assert [(s.code, s.severity, s.detail) for s in found] == [
        ("memory", "failure", "GPU 0: Detected 1 volatile double-bit ECC error(s) in GPU 0."),
        ("pcie", "warning", "GPU 3: Detected more than 8 PCIe replays per minute for GPU 3 : 13")]
    assert "ecc" in gates_for(found[0])
    rows = DCGM_REPORT.splitlines()
    healthy = [*rows[:3], "| Overall Health            | Healthy" + " " * 50 + "|", rows[-1]]
    assert from_dcgm_health("n1", "\n".join(healthy)) == []
    assert from_dcgm_health("n1", "Error: Health watches not enabled. Please enable watches. \n") == []
    (overall,) = from_dcgm_health("n1", "| Overall Health            | Warning |\n")
    assert (overall.code, overall.severity) == ("overall", "warning")
