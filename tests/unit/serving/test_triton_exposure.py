"""Triton has no authentication of its own: on hosts the firewall closes every one of its listeners (the API port
and Triton's HTTP, gRPC and metrics ports) to all but the members and the allowed clients, and the frontends
bind the leader's service address (tests/unit/serving_triton/test_plan_launch.py)."""

from __future__ import annotations

from gridready.serving import topology, vllm
from tests.summaries import certification
from tests.unit.serving.test_consistency import triton_tier


def test_every_triton_listener_is_an_api_port_of_the_leader(make_inv) -> None:
    inv = make_inv(2, [triton_tier()])
    cert = topology.read_certification(inv, certification(inv, ["gpu01", "gpu02"]))
    (plan,) = topology.plan_tiers(inv, cert)
    hosts = vllm.hosts_extravars([plan], cert, inv.spec.serving, "simulated")["gridready_serve"]["hosts"]
    leader, worker = hosts[plan.replicas[0].head], hosts[plan.replicas[0].nodes[-1]]
    t = plan.tier.triton
    assert leader["api_ports"] == sorted({plan.tier.port, t.http_port, t.grpc_port, t.metrics_port})
    assert len(leader["api_ports"]) == 4 and worker["api_ports"] == []
