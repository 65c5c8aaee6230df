"""serving.topology's reading of the ledger, to the value: which nodes serve, with which HCAs, what is left out and
why (in host order, every one of them), where the certification came from and when it finished (a timestamp with
no zone is UTC; one with an offset keeps it), and the hypothetical certification `serve --render` sizes on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from gridready.ledger import Ledger, NodeEntry
from gridready.serving import topology

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _entry(judged_at: str, verdict: str = "certified", **kw: object) -> NodeEntry:
    return NodeEntry.model_validate({"verdict": verdict, "run_id": "r1", "judged_at": judged_at,
                                     "valid_until": "2026-12-09T00:00:00+00:00" if verdict == "certified" else None,
                                     "profile": "quick", "summary": "certify/summary.json", **kw})


def _ledger(nodes: dict[str, NodeEntry]) -> tuple[Path, Ledger]:
    return Path("/srv/artifacts/acme/ledger.json"), Ledger(customer="acme", revision=7, nodes=nodes)


def test_each_node_is_read_with_its_hcas_and_every_left_out_node_is_named_in_order(make_inv) -> None:
    inv = make_inv(6)
    found = _ledger({
        "gpu01": _entry("2026-12-02T09:00:00", hcas_passed=["mlx5_0", "mlx5_1"]),  # no zone: read as UTC
        "gpu02": _entry("2026-12-02T10:00:00+02:00"),  # 08:00 UTC; no HCA gate ran
        "gpu03": _entry("2026-12-02T09:30:00+00:00", verdict="quarantined", failing_gates=["xid", "pcie"]),
        "gpu04": _entry("2026-12-02T09:45:00+00:00", hcas_passed=[], drained=True, drain_reason="xid 79"),
    })
    cert = topology.read_certification(inv, found, NOW)
    assert cert.source == "/srv/artifacts/acme/ledger.json#revision=7"
    assert cert.finished_at == datetime(2026, 12, 2, 9, 45, tzinfo=UTC)
    group = inv.spec.node_groups[0].name
    assert cert.certified == {
        "gpu01": topology.CertifiedNode("gpu01", group, "10.77.0.11", ("mlx5_0", "mlx5_1")),
        "gpu02": topology.CertifiedNode("gpu02", group, "10.77.0.12", None),
    }
    assert cert.quarantined == ["gpu03", "gpu04"]
    assert cert.messages == [
        "not in the certification (treated as uncertified): gpu05, gpu06",
        "left out of serving: gpu03 (quarantined (xid, pcie)), gpu04 (drained: xid 79)",
    ]


def test_the_latest_judgement_is_compared_in_utc_whatever_its_offset(make_inv) -> None:
    """09:00 with no zone (UTC) is later than 10:00+02:00 (08:00 UTC): reading the offset away would make 10:00
    the latest."""
    inv = make_inv(2)
    found = _ledger({"gpu01": _entry("2026-12-02T09:00:00"), "gpu02": _entry("2026-12-02T10:00:00+02:00")})
    cert = topology.read_certification(inv, found, NOW)
    assert cert.finished_at == datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    assert cert.finished_at.utcoffset() is not None
    assert cert.messages == [] and cert.quarantined == []


def test_a_certified_node_with_no_hca_passing_keeps_an_empty_tuple_not_none(make_inv) -> None:
    """hcas_passed [] (every HCA failed) is not None (no HCA gate ran): the tier planner tells them apart."""
    inv = make_inv(1)
    cert = topology.read_certification(inv, _ledger({"gpu01": _entry("2026-12-02T09:00:00", hcas_passed=[])}), NOW)
    assert cert.certified["gpu01"].hcas == ()


def test_the_hypothetical_certification_takes_every_gpu_node_as_certified_now(make_inv) -> None:
    inv = make_inv(3)
    before = datetime.now(UTC)
    cert = topology.hypothetical_certification(inv)
    group = inv.spec.node_groups[0].name
    assert cert.source == topology.HYPOTHETICAL and cert.messages == [topology.HYPOTHETICAL]
    assert cert.certified == {f"gpu0{i}": topology.CertifiedNode(f"gpu0{i}", group, f"10.77.0.1{i}", None)
                              for i in (1, 2, 3)}
    assert cert.finished_at.tzinfo is UTC and before <= cert.finished_at <= datetime.now(UTC)
    assert cert.quarantined == []
