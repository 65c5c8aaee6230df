"""The router of Layer 3: LiteLLM proxy config from `serving.router` and the tiers' endpoints.

Every key below is a documented LiteLLM proxy setting (docs/layer3.md lists each with its page):
- model_list[].model_name / litellm_params.model / api_base / api_key / weight, model_info.id
  (https://docs.litellm.ai/docs/proxy/configs, https://docs.litellm.ai/docs/routing "weight"); `hosted_vllm/` is the
  provider of a vLLM OpenAI server (https://docs.litellm.ai/docs/providers/vllm)
- router_settings.routing_strategy simple-shuffle (weighted pick), num_retries, allowed_fails, cooldown_time,
  timeout, fallbacks (https://docs.litellm.ai/docs/proxy/reliability), enable_health_check_routing
  (https://docs.litellm.ai/docs/proxy/health_check_routing)
- general_settings.master_key, custom_auth (https://docs.litellm.ai/docs/proxy/custom_auth),
  background_health_checks, health_check_interval (https://docs.litellm.ai/docs/proxy/health)
- litellm_settings.callbacks [prometheus], require_auth_for_metrics_endpoint
  (https://docs.litellm.ai/docs/proxy/prometheus)
Secrets appear only as `os.environ/<NAME>` references; their values go to the unit's root-only environment file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridready.spec.router import Route, RouterSpec, RouteTarget

MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
AUTH_HOOK = "gridready_router_auth.user_api_key_auth"
REPLICA_SCALE = 12  # a tier's weight x 12 is shared by its replicas: 1-4 and 6 replicas split exactly


@dataclass(frozen=True)
class Upstream:
    """A tier as the router sees it: an OpenAI-compatible base URL and the model name it serves."""

    tier: str
    base_url: str  # http://<head>:<port>/v1
    served_name: str
    api_key_env: str | None = None  # environment variable holding the tier's API key, None: the tier has none
    health_path: str = "/health"  # what a health check asks (vLLM, SGLang, trtllm-serve; Triton's frontend below)


def tier_key_env(tier: str) -> str:
    return "GRIDREADY_TIER_" + re.sub(r"[^A-Z0-9]", "_", tier.upper()) + "_API_KEY"


def default_routes(tiers: Iterable[tuple[str, str]]) -> list[Route]:
    """One route per served name over every tier serving it, equal weights: [(tier, served_name)] -> routes."""
    by_name: dict[str, list[str]] = {}
    for tier, served in tiers:
        by_name.setdefault(served, []).append(tier)
    return [Route(model=name, targets=[RouteTarget(tier=t) for t in names]) for name, names in by_name.items()]


def fallback_group(model: str, tier: str) -> str:
    return f"{model}--fallback--{tier}"


def _deployments(group: str, ups: Sequence[Upstream], weight: int | None) -> list[dict[str, Any]]:
    """One LiteLLM deployment per replica of a tier; the tier's weight is shared evenly by its replicas."""
    each = None if weight is None else max(1, round(weight * REPLICA_SCALE / len(ups)))
    return [_deployment(group, up, each, i) for i, up in enumerate(ups)]


def _deployment(group: str, up: Upstream, weight: int | None, replica: int) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": f"hosted_vllm/{up.served_name}",
        "api_base": up.base_url,
        # LiteLLM sends a bearer token to every OpenAI-compatible upstream; a tier without a key ignores it
        "api_key": f"os.environ/{up.api_key_env}" if up.api_key_env else "no-key",
    }
    if weight is not None:
        params["weight"] = weight
    return {"model_name": group, "litellm_params": params, "model_info": {"id": f"{group}@{up.tier}-{replica}"}}


def litellm_config(spec: RouterSpec, routes: list[Route], upstreams: Mapping[str, Sequence[Upstream]]
                   ) -> dict[str, Any]:
    """The proxy's config.yaml as a dict from each tier's replicas. Raises ValueError naming a route's tier that
    has no upstream."""
    model_list: list[dict[str, Any]] = []
    fallbacks: list[dict[str, list[str]]] = []
    for route in routes:
        for target in route.targets:
            if not upstreams.get(target.tier):
                raise ValueError(f"route {route.model}: tier {target.tier} has no OpenAI-compatible endpoint")
            if target.weight > 0:
                model_list += _deployments(route.model, upstreams[target.tier], target.weight)
        groups = []
        for tier in route.fallback:
            if not upstreams.get(tier):
                raise ValueError(f"route {route.model}: fallback tier {tier} has no OpenAI-compatible endpoint")
            groups.append(fallback_group(route.model, tier))
            model_list += _deployments(groups[-1], upstreams[tier], None)
        if groups:
            fallbacks.append({route.model: groups})
    return {
        "model_list": model_list,
        "router_settings": {
            "routing_strategy": "simple-shuffle",
            "num_retries": spec.num_retries,
            "allowed_fails": spec.allowed_fails,
            "cooldown_time": spec.cooldown_s,
            "timeout": spec.timeout_s,
            "fallbacks": fallbacks,
            "enable_health_check_routing": True,
        },
        "general_settings": {
            "master_key": f"os.environ/{MASTER_KEY_ENV}",
            "custom_auth": AUTH_HOOK,
            "background_health_checks": True,
            "health_check_interval": spec.health_check_interval_s,
        },
        "litellm_settings": {
            "callbacks": ["prometheus"],
            "require_auth_for_metrics_endpoint": True,
        },
    }


def with_canary(route: Route, canary_tier: str, weight_pct: int) -> Route:
    """The route with `canary_tier` taking weight_pct % of its requests and the current targets the rest, in
    proportion to their weights (integers: LiteLLM weights are relative)."""
    if not 0 <= weight_pct <= 100:
        raise ValueError(f"canary weight {weight_pct}: must be 0..100")
    current = [t for t in route.targets if t.tier != canary_tier and t.weight > 0]
    total = sum(t.weight for t in current)
    if weight_pct < 100 and not total:
        raise ValueError(f"route {route.model}: no current tier beside the canary {canary_tier}")
    rest = 100 - weight_pct
    targets = [RouteTarget(tier=t.tier, weight=round(rest * 10 * t.weight / total)) for t in current] if rest else []
    targets.append(RouteTarget(tier=canary_tier, weight=weight_pct * 10))
    return route.model_copy(update={"targets": [t for t in targets if t.weight > 0],
                                    "fallback": [f for f in route.fallback if f != canary_tier]})


def split_weights(measured: Mapping[str, float]) -> dict[str, int]:
    """Weights proportional to each tier's measured capacity (e.g. output tokens/s at the SLO), as integers
    out of 1000; a tier that measured nothing gets 0."""
    total = sum(v for v in measured.values() if v > 0)
    if total <= 0:
        raise ValueError("no tier has a positive measurement to split by")
    return {tier: max(0, round(1000 * v / total)) if v > 0 else 0 for tier, v in measured.items()}


def split_from_decision(route: Route, decision: Mapping[str, Any]) -> Route:
    """The route with its targets weighted by each tier's capacity at the SLO in a decision record (decision.json
    of gridready.bench: tiers[].capacity_rps_at_slo; a tier that failed its gate gets 0). Raises ValueError when the
    record measured none of the route's tiers, or none of them within its SLO."""
    measured = {t["tier"]: float(t["capacity_rps_at_slo"]) if t.get("gate_passed") else 0.0
                for t in decision.get("tiers", [])}
    missing = [t.tier for t in route.targets if t.tier not in measured]
    if missing:
        raise ValueError(f"route {route.model}: the decision record has no numbers for {', '.join(missing)}")
    weights = split_weights({t.tier: measured[t.tier] for t in route.targets})
    return route.model_copy(update={"targets": [RouteTarget(tier=t, weight=w) for t, w in weights.items() if w]})


def canary_route(routes: Sequence[Route], canary_tier: str) -> Route:
    """The route a canary joins, as it is without the canary: the one route that lists `canary_tier` among its
    targets beside at least one other tier with a weight. Raises ValueError when none or several do."""
    found = [r for r in routes if any(t.tier == canary_tier for t in r.targets)
             and any(t.tier != canary_tier and t.weight > 0 for t in r.targets)]
    if not found:
        raise ValueError(f"no route lists tier {canary_tier} beside a current tier with a weight "
                         "(a route's targets: the current tier, and the canary with weight 0)")
    if len(found) > 1:
        raise ValueError(f"tier {canary_tier} is a target of several routes ({', '.join(r.model for r in found)}); "
                         "a canary joins one")
    route = found[0]
    return route.model_copy(update={"targets": [t for t in route.targets if t.tier != canary_tier]})


def replace_route(routes: Sequence[Route], new: Route) -> list[Route]:
    """`routes` with the route of new.model replaced by `new`."""
    return [new if r.model == new.model else r for r in routes]
