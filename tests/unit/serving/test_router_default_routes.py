"""The router's default routes cover the routable tiers only: a triton-embedding tier (KServe v2, no OpenAI API)
beside a vLLM tier used to get a default route of its own, which the LiteLLM config then refused ("tier embed has
no OpenAI-compatible endpoint"), so serve stopped with exit 2 blaming serving.router.routes, which the inventory
never set."""

from __future__ import annotations

from gridready.serving import router_hosts, topology
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import with_router

EMBED = {"name": "embed", "engine": "triton-embedding", "served_name": "bge-small", "port": 8100,
         "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
         "tensor_parallel": 2,
         "embedding": {"model_file": "onnx/model.onnx",
                       "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]}],
                       "outputs": [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 384]}]}}


def test_an_embedding_tier_beside_a_vllm_tier_gets_no_default_route(make_inv):
    inv = with_router(make_inv(2, [vllm_tier(name="batch", tensor_parallel=8, pipeline_parallel=1), EMBED]))
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    plans = topology.plan_tiers(inv, cert)
    assert [p.tier.engine for p in plans] == ["vllm", "triton-embedding"]
    routes = router_hosts.routes_for(inv.spec.serving.router, plans)
    assert [(r.model, [t.tier for t in r.targets]) for r in routes] == [("llama-3.3-70b", ["batch"])]
    var = router_hosts.router_extravars(inv.spec.serving.router, plans, cert.certified, set())
    routed = var["gridready_serve_router"]
    assert routed["models"] == ["llama-3.3-70b"]
    assert [d["model_info"]["id"] for d in routed["config"]["model_list"]] == ["llama-3.3-70b@batch-0"]
