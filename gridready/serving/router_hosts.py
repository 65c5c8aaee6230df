"""`gridready_serve_router` for playbooks/serve.yml: where the router runs and what it routes to (target hosts).

The router runs on the head of the first tier's first replica (the serving head); every replica of every routed
tier is an upstream at <head ip>:<tier port>/v1. A Triton tier is routable only through an OpenAI-compatible
frontend (trtllm-serve, or Triton's OpenAI frontend, both on the tier's port: gridready/bench/endpoint.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gridready.serving import router
from gridready.spec.router import Route, RouterSpec


class _Node(Protocol):
    ip: str


def openai_compatible(tier: Any) -> bool:
    if tier.engine in ("vllm", "sglang"):
        return True
    if tier.engine != "triton-trtllm":  # a fixed-cost model speaks KServe v2 inference only
        return False
    settings = getattr(tier, "triton", None)
    frontend = getattr(settings, "frontend", None) or "triton"
    return frontend == "trtllm-serve" or bool(getattr(settings, "openai_frontend", True))


def upstreams(plans: Sequence[Any], certified: dict[str, _Node], api_key_tiers: set[str]
              ) -> dict[str, list[router.Upstream]]:
    """Per routable tier, one upstream per replica."""
    out: dict[str, list[router.Upstream]] = {}
    for plan in plans:
        if not openai_compatible(plan.tier):
            continue
        key_env = router.tier_key_env(plan.tier.name) if plan.tier.name in api_key_tiers else None
        out[plan.tier.name] = [
            router.Upstream(plan.tier.name, f"http://{certified[r.head].ip}:{plan.tier.port}/v1",
                            plan.tier.served_name, key_env)
            for r in plan.replicas]
    return out


def upstream_ports(plans: Sequence[Any]) -> dict[str, list[int]]:
    """Per replica head, the ports the router reaches there: each routable tier's OpenAI port (a Triton tier's
    KServe ports are no upstream)."""
    out: dict[str, set[int]] = {}
    for plan in plans:
        if openai_compatible(plan.tier):
            for r in plan.replicas:
                out.setdefault(r.head, set()).add(plan.tier.port)
    return {host: sorted(ports) for host, ports in sorted(out.items())}


def routes_for(spec: RouterSpec, plans: Sequence[Any]) -> list[Route]:
    return spec.routes or router.default_routes((p.tier.name, p.tier.served_name) for p in plans)


def router_extravars(spec: RouterSpec, plans: Sequence[Any], certified: dict[str, _Node],
                     api_key_tiers: set[str], routes: list[Route] | None = None) -> dict[str, Any]:
    """{} when the router is off; else `gridready_serve_router` (no secrets: key names and vault variables)."""
    if not spec.enabled or not plans:
        return {}
    head = plans[0].replicas[0].head
    ups = upstreams(plans, certified, api_key_tiers)
    chosen = routes if routes is not None else routes_for(spec, plans)
    return {"gridready_serve_router": {
        "host": head,
        "bind": certified[head].ip,
        "port": spec.port,
        "config": router.litellm_config(spec, chosen, ups),
        "keys": [k.model_dump() for k in spec.keys],
        "tier_key_envs": sorted({u.api_key_env for us in ups.values() for u in us if u.api_key_env}),
        "url": f"http://{certified[head].ip}:{spec.port}",
        "upstream_ports": upstream_ports(plans),
    }}
