"""Triton has no authentication of its own: on hosts the firewall closes every one of its listeners (the API port
and Triton's HTTP, gRPC and metrics ports) to all but the members and the allowed clients, and the frontends
bind the leader's service address (tests/unit/serving_triton/test_plan_launch.py)."""

from __future__ import annotations

from gridready.serving import topology, vllm
from tests.summaries import certified_ledger
from tests.unit.serving.test_consistency import triton_tier


def test_every_triton_listener_is_an_api_port_of_the_leader(make_inv) -> None:
    # a Triton replica across nodes is refused on target hosts at validate (issue 44); the leader/worker split of
    # the listeners is computed alike for either target
    inv = make_inv(2, [triton_tier()], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    (plan,) = topology.plan_tiers(inv, cert)
    hosts = vllm.hosts_extravars([plan], cert, inv.spec.serving)["gridready_serve"]["hosts"]
    leader, worker = hosts[plan.replicas[0].head], hosts[plan.replicas[0].nodes[-1]]
    t = plan.tier.triton
    assert leader["api_ports"] == sorted({plan.tier.port, t.http_port, t.grpc_port, t.metrics_port})
    assert len(leader["api_ports"]) == 4 and worker["api_ports"] == []


def test_a_fixed_cost_tier_is_one_node_and_every_listener_an_api_port(make_inv, tmp_path) -> None:
    from gridready.stages.serve import config as serve_config
    from tests.unit.test_inventory_errors import EMBED

    settings = {**EMBED["embedding"], "metrics_port": 9102}
    inv = make_inv(2, [{**EMBED, "port": 8100, "replicas": 2, "embedding": settings}])
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    (plan,) = topology.plan_tiers(inv, cert)
    assert [r.nodes for r in plan.replicas] == [("gpu01",), ("gpu02",)]
    hosts = vllm.hosts_extravars([plan], cert, inv.spec.serving)["gridready_serve"]["hosts"]
    assert hosts["gpu01"]["api_ports"] == hosts["gpu02"]["api_ports"] == [8001, 8100, 9102]
    units = serve_config.triton_units(inv, cert, [plan], tmp_path)
    assert [u[0] for u in units] == [["gpu01"], ["gpu02"]]
    role_vars = units[0][1]
    assert role_vars["gridready_triton_trtllm_mode"] == "embedding"
    assert role_vars["gridready_triton_trtllm_bind_address"] == cert.certified["gpu01"].ip
    repo = tmp_path / "triton" / "embed" / "repo"
    assert (repo / "bge-small" / "config.pbtxt").is_file() and (repo / "bge-small" / "1").is_dir()
