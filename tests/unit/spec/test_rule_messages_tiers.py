"""Rules between tiers and hardware: NVLink SHARP on boards without NVSwitch, GPU indices beyond the node, ports
that collide with each other or with Ray's, the router's routes, ports and keys, and whole-node placement. Each
case states the key path and the operator's one-line message."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.spec import rules
from tests.unit.spec.test_rule_messages import spec, tier

DIGEST = {"image_digest": "sha256:" + "5e" * 32}
EMBED = {
    "name": "embed", "engine": "triton-embedding", "served_name": "bge-small", "tensor_parallel": 1, "port": 9000,
    "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
    "embedding": {"model_file": "onnx/model.onnx",
                  "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]}],
                  "outputs": [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 384]}]},
}


def triton(name: str = "trt", port: int = 8100, **settings: Any) -> dict[str, Any]:
    return tier(name, engine="triton-trtllm", port=port, triton={"versions": DIGEST, **settings})


# --- hardware, _nvswitch --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("group", "nvswitch"), [
    ({"sku": "H200-SXM-141GB", "gpus_per_node": 8}, True),
    ({"sku": "H200-SXM-141GB", "gpus_per_node": 4}, False),  # the 4-GPU HGX board: NVLink without switches
    ({"sku": "H200-SXM-141GB", "gpus_per_node": 4, "platform": "passthrough"}, True),  # a slice of an 8-GPU board
    ({"sku": "H100-NVL-94GB", "gpus_per_node": 2}, False),
])
def test_nvls_needs_nvswitch(group, nvswitch):
    s = spec(**{"node_groups__0__" + k: v for k, v in group.items()},
             certification__nccl={"algo": "nvls"}, certification__fabric={"algo": "nvls"})
    found = list(rules.hardware(s))
    assert found == ([] if nvswitch else [
        ("certification.nccl.algo", "nvls needs NVSwitch, which gpu_nodes lacks (NVLink SHARP runs on the switches); "
         "use ring or tree"),
        ("certification.fabric.algo", "nvls needs NVSwitch, which gpu_nodes lacks; use ring or tree")])


def test_ring_and_tree_need_no_nvswitch():
    s = spec(node_groups__0__gpus_per_node=4, certification__nccl={"algo": "ring"},
             certification__fabric={"algo": "tree"})
    assert list(rules.hardware(s)) == []


@pytest.mark.parametrize(("gpus", "found"), [
    ([0, 7], []),
    ([7, 9, 8], [("serving.tiers[1].embedding.instance_groups[1].gpus",
                  "GPU index 8 is beyond the 8 GPUs of gpu_nodes (0-7)")]),
])
def test_embedding_gpu_indices_stay_on_the_node(gpus, found):
    embed = {**EMBED, "embedding": {**EMBED["embedding"], "instance_groups": [{"gpus": [0]}, {"gpus": gpus}]}}
    assert list(rules.hardware(spec(serving__tiers=[tier(), embed]))) == found


# --- tier_ports -----------------------------------------------------------------------------------------------
def test_tier_ports_name_every_listener_clients_reach():
    s = spec(serving__tiers=[tier(port=8000), triton(grpc_port=9001), triton("srv", mode="llmapi",
             frontend="trtllm-serve"), EMBED])
    t = s.serving.tiers
    assert rules.tier_ports(t[0]) == [("port", 8000)]
    assert rules.tier_ports(t[1]) == [("port", 8100), ("triton.http_port", 8000), ("triton.grpc_port", 9001),
                                      ("triton.metrics_port", 8002)]
    assert rules.tier_ports(t[2]) == [("port", 8100)]  # trtllm-serve: no Triton server
    assert rules.tier_ports(t[3]) == [("port", 9000), ("embedding.grpc_port", 8001), ("embedding.metrics_port", 8002)]


# --- cross_tier -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("tiers", "ray_port", "found"), [
    ([tier(port=8265)], 6379, [("serving.tiers[0].port", "8265 is the Ray dashboard's port")]),
    ([tier(port=6379)], 6379, [("serving.tiers[0].port", "6379 is the Ray GCS port (serving.ray_port)")]),
    ([tier(port=11000)], 6379, [("serving.tiers[0].port", "11000 is in Ray's worker port range 11000-11999")]),
    ([tier(port=11999)], 6379, [("serving.tiers[0].port", "11999 is in Ray's worker port range 11000-11999")]),
    ([tier(port=10999), tier("bb", port=12000)], 6379, []),
    ([tier(port=8000), tier("bb", port=8000)], 6379,
     [("serving.tiers[1].port", "8000 is already the port of serving.tiers[0] (llama)")]),
    ([tier(port=8000), triton(port=8100, http_port=8100)], 6379,
     [("serving.tiers[1].triton.http_port", "8100 is already this tier's port")]),
    ([{**EMBED, "embedding": {**EMBED["embedding"], "grpc_port": 8002}}], 6379,
     [("serving.tiers[0].embedding.metrics_port", "8002 is already this tier's embedding.grpc_port")]),
    ([tier(port=8000)], 8265, [("serving.ray_port", "8265 is the Ray dashboard's port")]),
    ([tier(port=8000)], 11500, [("serving.ray_port", "11500 is in Ray's worker port range 11000-11999")]),
])
def test_ports(tiers, ray_port, found):
    assert list(rules.cross_tier(spec(serving__tiers=tiers, serving__ray_port=ray_port), {"gpu_nodes": 4})) == found


def test_a_triton_tier_may_reuse_another_tiers_api_port_for_its_own_listeners():
    # tier 0 listens on 8000 (vLLM); tier 1's Triton HTTP port 8000 is on other nodes (tiers never share one)
    s = spec(serving__tiers=[tier(port=8000), triton(port=8100)])
    assert list(rules.cross_tier(s, {"gpu_nodes": 2})) == []


def test_embedding_on_kubernetes_is_refused():
    s = spec(serving__target="kubernetes", serving__kubeconfig="k.yml", serving__tiers=[tier(), EMBED])
    assert list(rules.cross_tier(s, {"gpu_nodes": 2})) == [
        ("serving.tiers[1].engine", "triton-embedding runs on target hosts only (no Kubernetes component)")]


@pytest.mark.parametrize(("nodes", "found"), [
    (3, []),  # 8 + 16 GPUs on 3 nodes of 8
    (2, [("serving.tiers", "the tiers on gpu_nodes need 24 GPUs together, more than it has (16)")]),
])
def test_gpu_demand_of_several_tiers(nodes, found):
    s = spec(serving__tiers=[tier(), tier("bb", port=8001, pipeline_parallel=2)])
    assert list(rules.cross_tier(s, {"gpu_nodes": nodes})) == found


def test_one_tier_too_big_is_left_to_placement():
    s = spec(serving__tiers=[tier(pipeline_parallel=2, replicas=2)])
    assert list(rules.cross_tier(s, {"gpu_nodes": 2})) == []
    assert list(rules.placement(s, {"gpu_nodes": 2})) == [
        ("serving.tiers[0]", "needs 4 whole node(s) of gpu_nodes; 2 left of 2 after the tiers before it took 0 "
         "(tiers never share a node)")]


# --- router ---------------------------------------------------------------------------------------------------
KEY = {"name": "team-a", "vault_var": "vault_router_team_a"}


@pytest.mark.parametrize(("router", "found"), [
    ({"enabled": True, "keys": [KEY]}, []),
    ({"routes": [{"model": "m", "targets": [{"tier": "llama"}, {"tier": "gone"}], "fallback": ["llama2"]}]},
     [("serving.router.routes[0].targets[1].tier", "no tier named 'gone'"),
      ("serving.router.routes[0].fallback[0]", "no tier named 'llama2'")]),
    ({"enabled": False, "port": 8000}, []),  # a disabled router binds nothing
    ({"enabled": True, "keys": [KEY], "port": 8000},
     [("serving.router.port", "8000 is already serving.tiers[0].port")]),
    ({"enabled": True, "keys": [KEY], "port": 6379},
     [("serving.router.port", "6379 is the Ray GCS port (serving.ray_port)")]),
    ({"enabled": True, "keys": [{"name": "aa", "vault_var": "vault_gridready_hf_token"}]},
     [("serving.router.keys[0].vault_var", "vault_gridready_hf_token is the Hugging Face token; a client key of the "
       "router needs a vault variable of its own")]),
    ({"enabled": True, "keys": [KEY, {"name": "team-b", "vault_var": "vault_router_team_a"}]},
     [("serving.router.keys[1].vault_var", "already the variable of key 'team-a'")]),
    ({"enabled": True, "keys": [KEY, {"name": "team-a", "vault_var": "vault_router_b"},
                                {"name": "team-a", "vault_var": "vault_router_c"}]},
     [("serving.router.keys", "duplicate key name 'team-a'")]),
])
def test_router(router, found):
    assert list(rules.router(spec(serving__tiers=[tier(port=8000)], serving__router=router))) == found


@pytest.mark.parametrize(("router", "found"), [
    ({"enabled": True, "proxy": "haproxy", "keys": [KEY, {"name": "team-b", "vault_var": "v_b", "tpm_limit": 9}]},
     [("serving.router.keys[1].tpm_limit", "proxy haproxy limits requests, not tokens (it never reads the answer's "
       "usage); drop tpm_limit or set serving.router.proxy: litellm")]),
    ({"enabled": True, "proxy": "litellm", "keys": [{**KEY, "tpm_limit": 9}],
      "routes": [{"model": "chat", "targets": [{"tier": "llama"}]}]}, []),
    ({"enabled": True, "proxy": "haproxy", "keys": [KEY],
      "routes": [{"model": "chat", "targets": [{"tier": "llama"}]}]},
     [("serving.router.routes[0].model", "chat is not what tier llama serves (llama); proxy haproxy passes the "
       "request body on unchanged, so name the route llama or set serving.router.proxy: litellm")]),
    ({"enabled": True, "proxy": "haproxy", "keys": [{**KEY, "rpm_limit": 60}],
      "routes": [{"model": "llama", "targets": [{"tier": "llama"}]}]}, []),
])
def test_haproxy_router(router, found):
    assert list(rules.router(spec(serving__tiers=[tier(port=8000)], serving__router=router))) == found


def test_haproxy_needs_no_python_lock(monkeypatch):
    """HAProxy comes from the OS's archive: an OS without a LiteLLM lock may run it, LiteLLM may not."""
    monkeypatch.setattr(rules, "router_python", lambda _os: None)  # an OS no LiteLLM lock is made for
    for proxy, errors in (("haproxy", 0), ("litellm", 1)):
        on = {"enabled": True, "proxy": proxy, "keys": [KEY]}
        assert len(list(rules.router_os(spec(serving__tiers=[tier(port=8000)], serving__router=on)))) == errors


# --- placement ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("tiers", "nodes", "found"), [
    ([tier(), tier("bb", port=8001, replicas=2)], 3, []),
    ([tier(), tier("bb", port=8001, replicas=2)], 2, [
        ("serving.tiers[1]", "needs 2 whole node(s) of gpu_nodes; 1 left of 2 after the tiers before it took 1 "
         "(tiers never share a node)")]),
    ([tier(pipeline_parallel=2), tier("bb", port=8001)], 2, [
        ("serving.tiers[1]", "needs 1 whole node(s) of gpu_nodes; 0 left of 2 after the tiers before it took 2 "
         "(tiers never share a node)")]),
    ([tier()], 0, [("serving.tiers[0]", "needs 1 whole node(s) of gpu_nodes; 0 left of 0 after the tiers before it "
                    "took 0 (tiers never share a node)")]),
])
def test_placement_takes_whole_nodes_in_spec_order(tiers, nodes, found):
    assert list(rules.placement(spec(serving__tiers=tiers), {"gpu_nodes": nodes})) == found
