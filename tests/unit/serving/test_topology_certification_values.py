"""serving.topology's reading of the ledger, to the value: which nodes serve, with which HCAs, what is left out and
why (in host order, every one of them), where the certification came from and when it finished (a timestamp with
no zone is UTC; one with an offset keeps it), and the hypothetical certification `serve --render` sizes on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gridready import inventory
from gridready.errors import InvalidInput, NotCertified
from gridready.ledger import Ledger, NodeEntry
from gridready.serving import topology
from tests.unit.serving.conftest import cluster_yml, vllm_tier

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


def _two_groups(tmp_path: Path, monkeypatch, tiers: list[dict]) -> topology.Inventory:
    """acme with an H200 group (gpu01, gpu02) and an H100 group (h100a, h100b), each in its own hosts.yml group."""
    monkeypatch.chdir(tmp_path)
    inv_dir = tmp_path / "inventories" / "acme"
    inv_dir.mkdir(parents=True)
    cluster = cluster_yml("acme", tiers)
    cluster["node_groups"].append({**cluster["node_groups"][0], "name": "h100_nodes", "sku": "H100-SXM5-80GB"})
    (inv_dir / "cluster.yml").write_text(yaml.safe_dump(cluster))
    hosts = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_host": "10.77.0.11"}, "gpu02": {"ansible_host": "10.77.0.12"}}},
             "h100_nodes": {"hosts": {"h100a": {"ansible_host": "10.77.0.21"},
                                      "h100b": {"ansible_host": "10.77.0.22"}}}}
    (inv_dir / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": hosts}}))
    return inventory.load(inv_dir)


def test_a_tier_that_names_its_node_group_is_placed_on_that_group_only(tmp_path, monkeypatch) -> None:
    """Two groups of different GPUs: the tier naming h100_nodes gets an H100 node, not the first group's."""
    inv = _two_groups(tmp_path, monkeypatch, [
        vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1),
        vllm_tier(name="batch", served_name="llama-batch", tensor_parallel=8, pipeline_parallel=1,
                  node_group="h100_nodes", port=8001)])
    chat, batch = topology.plan_tiers(inv, topology.hypothetical_certification(inv))
    assert (chat.group.name, chat.nodes, chat.accelerator_type) == ("gpu_nodes", ("gpu01",), "H200")
    assert (batch.group.name, batch.nodes, batch.accelerator_type) == ("h100_nodes", ("h100a",), "H100")


def test_every_node_without_a_passing_hca_is_named_in_the_message(make_inv) -> None:
    inv = make_inv(3, [vllm_tier(tensor_parallel=8, pipeline_parallel=1)])
    found = _ledger({h: _entry("2026-12-02T09:00:00", hcas_passed=[] if h != "gpu02" else None)
                     for h in inv.gpu_hosts()})
    cert = topology.read_certification(inv, found, NOW)
    (plan,) = topology.plan_tiers(inv, cert)
    assert plan.nodes == ("gpu02",)
    assert cert.messages == [f"tier {plan.tier.name}: no passing HCA, left out: gpu01, gpu03"]


def test_a_node_ip_is_the_ray_address_first_then_ansible_host_then_the_name(make_inv) -> None:
    inv = make_inv(1)
    inv.hosts["gpu01"]["gridready_ray_node_ip"] = "10.77.0.99"
    assert topology.node_ip(inv, "gpu01") == "10.77.0.99"
    del inv.hosts["gpu01"]["gridready_ray_node_ip"]
    assert topology.node_ip(inv, "gpu01") == "10.77.0.11"
    assert topology.node_ip(inv, "10.77.0.42") == "10.77.0.42"  # a name the inventory has no variables for


def test_every_short_tier_is_named_with_the_quarantined_nodes(make_inv) -> None:
    """Two tiers that cannot be placed: both lines, one per tier, each naming what certification left out."""
    inv = make_inv(4, [vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=2),
                       vllm_tier(name="batch", served_name="llama-batch", port=8001, tensor_parallel=8,
                                 pipeline_parallel=2)])
    found = _ledger({"gpu01": _entry("2026-12-02T09:00:00"),
                     "gpu02": _entry("2026-12-02T09:00:00", verdict="quarantined"),
                     "gpu03": _entry("2026-12-02T09:00:00", verdict="quarantined"),
                     "gpu04": _entry("2026-12-02T09:00:00", verdict="quarantined")})
    cert = topology.read_certification(inv, found, NOW)
    with pytest.raises(NotCertified) as err:
        topology.plan_tiers(inv, cert)
    assert str(err.value) == (
        "serve: tier chat needs 2 certified node(s) of gpu_nodes, 1 left (quarantined: gpu02, gpu03, gpu04)\n"
        "serve: tier batch needs 2 certified node(s) of gpu_nodes, 1 left (quarantined: gpu02, gpu03, gpu04)")
    cert.quarantined.clear()
    with pytest.raises(NotCertified, match=r"1 left \(quarantined: none\)\n"):
        topology.plan_tiers(inv, cert)


def test_the_engine_filter_keeps_the_tiers_of_that_engine(make_inv) -> None:
    inv = make_inv(2, [vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1),
                       vllm_tier(name="batch", served_name="llama-batch", port=8001, tensor_parallel=8,
                                 pipeline_parallel=1)])
    cert = topology.hypothetical_certification(inv)
    assert [p.tier.name for p in topology.plan_tiers(inv, cert, engine="vllm")] == ["chat", "batch"]
    assert topology.plan_tiers(inv, cert, engine="sglang") == []


def test_no_node_certified_now_names_every_node_left_out(make_inv) -> None:
    inv = make_inv(3)
    found = _ledger({"gpu01": _entry("2026-12-02T09:00:00", verdict="quarantined", failing_gates=["xid"]),
                     "gpu02": _entry("2026-12-02T09:00:00", drained=True, drain_reason="watch")})
    with pytest.raises(NotCertified) as err:
        topology.read_certification(inv, found, NOW)
    assert str(err.value) == ("serve: no node of acme is certified now (gpu01 (quarantined (xid)); gpu02 (drained: "
                              "watch)); run `invoke certify`")


def test_a_node_address_that_is_not_an_ip_is_refused_naming_the_hosts_file(make_inv) -> None:
    inv = make_inv(1)
    inv.hosts["gpu01"]["ansible_host"] = "gpu01.example"
    with pytest.raises(InvalidInput) as err:
        topology.node_ip(inv, "gpu01")
    assert str(err.value) == ("hosts.yml: gpu01: set ansible_host or gridready_ray_node_ip to the node's IP "
                              "(Ray and vLLM must agree on one address)")
