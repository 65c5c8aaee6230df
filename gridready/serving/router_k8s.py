"""The router on Kubernetes: each route of `serving.router` as a Gateway API HTTPRoute with weighted backendRefs.

Routing by model name: the OpenAI `model` is in the request body, which HTTPRoute cannot match; the Gateway API
Inference Extension's body-based routing copies it into the `X-Gateway-Model-Name` header
(https://cloud.google.com/kubernetes-engine/docs/how-to/configure-body-based-routing), which the rule matches.
Weights: `backendRefs[].weight`, the share of the rule's requests per backend (HTTPRoute, gateway.networking.k8s.io/v1,
https://gateway-api.sigs.k8s.io/reference/spec/#httpbackendref). A canary is the same route with the canary's weight.
Each vLLM tier's backend is its `<tier>-openai` Service (gridready/stacks/serving/program.py). Fallback tiers have no
HTTPRoute equivalent (no retry-to-another-backend in the standard channel): they are reported, not rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridready.spec.router import Route

MODEL_HEADER = "X-Gateway-Model-Name"
OPENAI_SERVICE_ENGINES = ("vllm", "sglang")  # tiers whose stack component makes a `<tier>-openai` Service


def backend_service(tier: str) -> str:
    return f"{tier}-openai"


def httproute(route: Route, namespace: str, gateway: str, ports: Mapping[str, int], name: str | None = None
              ) -> dict[str, Any]:
    """One HTTPRoute for `route`; `ports`: the Service port of every tier on Kubernetes. Raises ValueError naming a
    target tier without a Service."""
    refs = []
    for target in route.targets:
        if target.tier not in ports:
            raise ValueError(f"route {route.model}: tier {target.tier} has no OpenAI Service on Kubernetes")
        refs.append({"name": backend_service(target.tier), "port": ports[target.tier], "weight": target.weight})
    slug = name or "router-" + "".join(c if c.isalnum() else "-" for c in route.model.lower()).strip("-")[:50]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": slug, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gridready", "gridready.io/route": slug}},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/v1"},
                             "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": route.model}]}],
                "backendRefs": refs,
            }],
        },
    }


ROUTER_SERVICE = "gridready-router"  # gridready/stacks/serving/router.py


# what the Gateway hands the router: the OpenAI API, and LiteLLM's health routes (https://docs.litellm.ai/docs/proxy/
# health: /health, keyed, asks every deployment; /health/liveliness and /health/readiness), which serve's readiness
# check asks through the Gateway as it asks an engine's /health on hosts (gridready/bench/readiness.py)
ROUTER_PATHS = ("/v1", "/health")


def router_route(namespace: str, gateway: str, port: int) -> dict[str, Any]:
    """The one HTTPRoute of the authenticating front: every /v1 and /health request to the router's Service, which
    checks the key and routes by the body's `model` (weights, canaries, served-name rewrite: LiteLLM's
    model_list)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": ROUTER_SERVICE, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gridready", "gridready.io/route": ROUTER_SERVICE}},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": p}} for p in ROUTER_PATHS],
                       "backendRefs": [{"name": ROUTER_SERVICE, "port": port}]}],
        },
    }
