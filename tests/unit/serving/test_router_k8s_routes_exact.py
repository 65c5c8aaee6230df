"""The router's HTTPRoutes on Kubernetes, whole: every field of a model route and of the authenticating front's
route, the name made from the model, and each validated against the vendored Gateway API CRD
(gridready/data/crds/gateway.networking.k8s.io_httproutes.yaml, strict)."""

from __future__ import annotations

import pytest

from gridready.serving import manifests, router_k8s
from gridready.spec.router import Route

LABELS = {"app.kubernetes.io/managed-by": "gridready"}


def test_a_model_route_in_full():
    route = Route(model="Llama-3.1/8B:instruct", targets=[{"tier": "hot", "weight": 0}, {"tier": "batch"}])
    doc = router_k8s.httproute(route, "serving", "inference-gateway", {"hot": 8001, "batch": 8000})
    assert doc == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        # lower case, every character that is neither letter nor digit a dash
        "metadata": {"name": "router-llama-3-1-8b-instruct", "namespace": "serving",
                     "labels": {**LABELS, "gridready.io/route": "router-llama-3-1-8b-instruct"}},
        "spec": {
            "parentRefs": [{"name": "inference-gateway"}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/v1"},
                             "headers": [{"type": "Exact", "name": "X-Gateway-Model-Name",
                                          "value": "Llama-3.1/8B:instruct"}]}],
                "backendRefs": [{"name": "hot-openai", "port": 8001, "weight": 0},
                                {"name": "batch-openai", "port": 8000, "weight": 1}],
            }],
        },
    }
    assert manifests.validate([doc]) == []


def test_the_route_name_drops_edge_dashes_and_keeps_fifty_characters_of_the_model():
    ports = {"tt": 8000}
    long = Route(model="-" + "a" * 60 + ".", targets=[{"tier": "tt"}])
    name = router_k8s.httproute(long, "ns", "gw", ports)["metadata"]["name"]
    # the slug is cut at 50 characters after its edge dashes are stripped: "a" x 50
    assert name == "router-" + "a" * 50
    cut = Route(model="m" * 49 + "/x", targets=[{"tier": "tt"}])
    assert router_k8s.httproute(cut, "ns", "gw", ports)["metadata"]["name"] == "router-" + "m" * 49 + "-"
    named = router_k8s.httproute(long, "ns", "gw", ports, name="canary-route")
    assert named["metadata"]["name"] == "canary-route"
    assert named["metadata"]["labels"]["gridready.io/route"] == "canary-route"


def test_a_target_without_a_service_is_named():
    route = Route(model="m", targets=[{"tier": "aa"}, {"tier": "bb"}])
    with pytest.raises(ValueError, match=r"^route m: tier bb has no OpenAI Service on Kubernetes$"):
        router_k8s.httproute(route, "ns", "gw", {"aa": 1})


def test_backend_service_names_and_the_engines_that_make_them():
    assert router_k8s.backend_service("llama70b") == "llama70b-openai"
    assert router_k8s.OPENAI_SERVICE_ENGINES == ("vllm", "sglang")
    assert router_k8s.MODEL_HEADER == "X-Gateway-Model-Name"


def test_the_front_route_sends_v1_and_health_to_the_router_service():
    doc = router_k8s.router_route("serving", "inference-gateway", 4000)
    assert doc == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "gridready-router", "namespace": "serving",
                     "labels": {**LABELS, "gridready.io/route": "gridready-router"}},
        "spec": {
            "parentRefs": [{"name": "inference-gateway"}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}},
                                   {"path": {"type": "PathPrefix", "value": "/health"}}],
                       "backendRefs": [{"name": "gridready-router", "port": 4000}]}],
        },
    }
    assert manifests.validate([doc]) == []
