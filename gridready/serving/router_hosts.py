"""`gridready_serve_router` for playbooks/serve.yml: where the router runs and what it routes to (target hosts).

The router runs on serving.router.hosts (hosts of their own, outside the node groups: a rolling provision never
drains or reboots them), else on the head of the first tier's first replica (the serving head); its tier routers
run beside it. Every replica of every routed tier is an upstream at <head ip>:<tier port>/v1. A Triton tier is
routable only through an OpenAI-compatible frontend (trtllm-serve, or Triton's OpenAI frontend, both on the tier's
port: gridready/bench/endpoint.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gridready.serving import router, router_haproxy, tier_router
from gridready.serving.tier_router import TierRouter
from gridready.spec.router import Route, RouterSpec


class _Node(Protocol):
    ip: str


def placement(spec: RouterSpec, plans: Sequence[Any], certified: Mapping[str, _Node],
              declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where the router runs, host -> the address it binds: serving.router.hosts at their `declared` addresses,
    else the serving head. `plans` are the deployment's (a drain leaves them whole: the router keeps its host)."""
    if spec.hosts:
        found = declared or {}
        return {h: found[h] for h in spec.hosts}
    head = plans[0].replicas[0].head
    return {head: certified[head].ip}


def openai_compatible(tier: Any) -> bool:
    if tier.engine in ("vllm", "sglang"):
        return True
    if tier.engine != "triton-trtllm":  # a fixed-cost model speaks KServe v2 inference only
        return False
    settings = getattr(tier, "triton", None)
    frontend = getattr(settings, "frontend", None) or "triton"
    return frontend == "trtllm-serve" or bool(getattr(settings, "openai_frontend", True))


def health_path(tier: Any) -> str:
    """The health route of a tier's OpenAI port: Triton's OpenAI frontend answers /health/ready, the OpenAI servers
    of vLLM, SGLang and trtllm-serve /health."""
    settings = getattr(tier, "triton", None)
    frontend = getattr(settings, "frontend", None) or "triton"
    return "/health/ready" if tier.engine == "triton-trtllm" and frontend != "trtllm-serve" else "/health"


def upstreams(plans: Sequence[Any], certified: Mapping[str, _Node], api_key_tiers: set[str]
              ) -> dict[str, list[router.Upstream]]:
    """Per routable tier, one upstream per replica."""
    out: dict[str, list[router.Upstream]] = {}
    for plan in plans:
        if not openai_compatible(plan.tier):
            continue
        key_env = router.tier_key_env(plan.tier.name) if plan.tier.name in api_key_tiers else None
        out[plan.tier.name] = [
            router.Upstream(plan.tier.name, f"http://{certified[r.head].ip}:{plan.tier.port}/v1",
                            plan.tier.served_name, key_env, health_path(plan.tier))
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


def tier_routers(spec: RouterSpec, plans: Sequence[Any], certified: Mapping[str, _Node],
                 placed: Mapping[str, str] | None = None) -> list[TierRouter]:
    """With serving.router.tier_routers on: one tier router per routable tier beside the router (`placed`, default
    the serving head), in front of the tier's replicas (port, port + 1, ... in the plans' order); [] when off."""
    if not (spec.enabled and spec.tier_routers.enabled and plans):
        return []
    bind = next(iter((placed or placement(spec, plans, certified)).values()))
    routable = [p for p in plans if openai_compatible(p.tier) and p.replicas]
    return [TierRouter(tier=p.tier.name, bind=bind, port=spec.tier_routers.port + i,
                       workers=tuple(f"http://{certified[r.head].ip}:{p.tier.port}" for r in p.replicas),
                       policy=spec.tier_routers.policy,
                       health_check_interval_s=spec.tier_routers.health_check_interval_s, retries=spec.num_retries)
            for i, p in enumerate(routable)]


def through_tier_routers(ups: dict[str, list[router.Upstream]], tier_routers_: Sequence[TierRouter]
                         ) -> dict[str, list[router.Upstream]]:
    """The front router's upstreams with every tier that has a tier router reached through it (one upstream)."""
    by_tier = {t.tier: t for t in tier_routers_}
    return {tier: [router.Upstream(tier, f"{by_tier[tier].url}/v1", us[0].served_name, us[0].api_key_env, "/health")]
            if tier in by_tier else us for tier, us in ups.items()}


def tier_router_vars(routers: Sequence[TierRouter]) -> list[dict[str, Any]]:
    """The role's `tier_routers`: each one's unit name, port and command line."""
    return [{"tier": t.tier, "port": t.port, "url": t.url, "workers": list(t.workers), "argv": tier_router.argv(t)}
            for t in routers]


def routes_for(spec: RouterSpec, plans: Sequence[Any]) -> list[Route]:
    """The spec's routes, else one per served name over the routable tiers serving it (a tier that speaks no
    OpenAI API, e.g. triton-embedding, is deployed but not routed)."""
    return spec.routes or router.default_routes((p.tier.name, p.tier.served_name) for p in plans
                                                if openai_compatible(p.tier))


def router_extravars(spec: RouterSpec, plans: Sequence[Any], certified: Mapping[str, _Node],
                     api_key_tiers: set[str], routes: list[Route] | None = None,
                     placed: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{} when the router is off; else `gridready_serve_router` (no secrets: key names and vault variables).
    `placed`: where the router runs (`placement`; default the serving head of `plans`). `host`, `bind` and `url`
    are the first router host's; `hosts` and `binds` all of them."""
    if not spec.enabled or not plans:
        return {}
    where = dict(placed or placement(spec, plans, certified))
    head, bind = next(iter(where.items()))
    ups = upstreams(plans, certified, api_key_tiers)
    in_tier = tier_routers(spec, plans, certified, where)
    chosen = routes if routes is not None else routes_for(spec, plans)
    return {"gridready_serve_router": {
        "host": head,
        "hosts": list(where),
        "binds": where,
        "dedicated": bool(spec.hosts),
        "bind": bind,
        "port": spec.port,
        **proxy_vars(spec, chosen, through_tier_routers(ups, in_tier), bind),
        "tier_routers": tier_router_vars(in_tier),
        "keys": [k.model_dump() for k in spec.keys],
        "tier_key_envs": sorted({u.api_key_env for us in ups.values() for u in us if u.api_key_env}),
        "url": f"http://{bind}:{spec.port}",
        "upstream_ports": upstream_ports(plans),
    }}


HAPROXY_DIR = "/etc/gridready/router"  # roles/gridready_router/defaults/main.yml gridready_router_dir


def proxy_vars(spec: RouterSpec, routes: list[Route], ups: dict[str, list[router.Upstream]], bind: str
               ) -> dict[str, Any]:
    """The front's own variables: `proxy`, the routed `models`, the path it answers liveness on, and its
    configuration (LiteLLM's `config`, or HAProxy's files under `haproxy`)."""
    out: dict[str, Any] = {"proxy": spec.proxy, "models": [r.model for r in routes],
                           "live_path": router_haproxy.LIVE_PATH}
    if spec.proxy == "haproxy":
        files = router_haproxy.render(spec, routes, ups, bind=bind, port=spec.port, directory=HAPROXY_DIR)
        return out | {"config": {}, "haproxy": {"config": files.config, "models_map": files.models_map,
                                                "models_json": files.models_json}}
    return out | {"config": router.litellm_config(spec, routes, ups)}
