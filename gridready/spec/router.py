"""`serving.router` of cluster.yml: one OpenAI-compatible endpoint in front of the tiers, HAProxy from the OS's
archive or LiteLLM's proxy (`proxy`, docs/layer3.md "HAProxy front")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from gridready.spec.names import ANSIBLE_NAME, SLUG

# The CPython each supported OS ships as python3, which the router's venv is made from (target hosts): one hashed
# LiteLLM lock per version (roles/gridready_router/files/litellm-requirements-py<X.Y>.txt, made by
# tools/router_locks.py). The patch release is the archive's, for markers such as python_full_version < "3.11.3".
# Ubuntu: https://packages.ubuntu.com/jammy/python3 (3.10.6, python3.10 3.10.12), .../noble/python3 (3.12.3);
# Debian: https://packages.debian.org/bookworm/python3 (3.11.2), .../trixie/python3 (3.13.5).
ROUTER_PYTHON: dict[str, str] = {
    "ubuntu-22.04": "3.10.12",
    "ubuntu-24.04": "3.12.3",
    "debian-12": "3.11.2",
    "debian-13": "3.13.5",
}


def router_python(os_name: str) -> str | None:
    """The major.minor CPython the router's lock is made for on this OS, None where there is none."""
    full = ROUTER_PYTHON.get(os_name)
    return ".".join(full.split(".")[:2]) if full else None


class RouteTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    tier: str = Field(pattern=SLUG, description="a tier of serving.tiers")
    weight: int = Field(1, ge=0, le=1000, description=(
        "relative share of the route's requests (0: deployed beside the route's tiers with no share: the candidate "
        "of `invoke serve --canary`)"))


class Route(BaseModel):
    """A model name clients ask for, and the tiers that serve it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    model: str = Field(pattern=r"^[A-Za-z0-9_.:/-]+$", description="the `model` clients send to the router")
    targets: list[RouteTarget] = Field(min_length=1, description="tiers and their weights (LiteLLM `weight`)")
    fallback: list[str] = Field(default_factory=list, description="tiers tried, in order, when every target fails")
    split_from_decision: bool = Field(
        False, description="weights from the latest decision record of these tiers (throughput per GPU at the SLO)")

    @model_validator(mode="after")
    def _weights(self) -> Route:
        if not any(t.weight for t in self.targets):
            raise ValueError("at least one target needs a weight above 0")
        names = [t.tier for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError("a tier appears twice in targets")
        if set(self.fallback) & set(names):
            raise ValueError("a fallback tier is also a target")
        return self


class RouterKey(BaseModel):
    """A client key of the router; the key itself lives in the vault variable named here."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=SLUG, description="key alias in metrics and logs")
    vault_var: str = Field(pattern=ANSIBLE_NAME, description="group_vars/all/vault.yml variable of the key")
    rpm_limit: PositiveInt | None = Field(None, description="requests per minute (LiteLLM rpm_limit); null: none")
    tpm_limit: PositiveInt | None = Field(None, description="tokens per minute (LiteLLM tpm_limit); null: none")


class Canary(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    observe_s: PositiveInt = Field(120, description="how long live canary traffic is benchmarked before deciding")
    requests: PositiveInt = Field(64, description="benchmark requests sent through the router while observing")


class TierRouters(BaseModel):
    """A Rust router (vllm-router) in front of each tier's replicas, on the serving head: cache-aware inside the
    tier, and drained from the ledger in seconds (gridready.serving.tier_router, docs/layer3.md)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool = Field(False, description="run a tier router per routable tier; LiteLLM then routes to them")
    port: int = Field(4100, ge=1024, le=65535, description=(
        "the first tier router's port; the tier routers listen on port, port + 1, ... in serving.tiers order"))
    policy: Literal["cache_aware", "round_robin", "power_of_two"] = Field(
        "cache_aware", description="vllm-router --policy inside a tier")
    health_check_interval_s: PositiveInt = Field(5, description="vllm-router --health-check-interval-secs")


class HAProxySettings(BaseModel):
    """Settings of the HAProxy front (gridready.serving.router_haproxy) that LiteLLM has no counterpart for."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    max_body_kib: int = Field(1024, ge=16, le=65536, description=(
        "largest request body routed by its model (tune.bufsize); a larger one is refused with 413"))
    maxconn: int = Field(4096, ge=64, le=1_000_000, description="concurrent client connections (global maxconn)")


class RouterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool = Field(False, description=(
        "run the router (hosts: on serving.router.hosts, else on the first tier's head)"))
    proxy: Literal["haproxy", "litellm"] = Field("litellm", description=(
        "hosts: haproxy (the OS's package: well under 2 ms added, request limits only) or litellm (Python proxy: "
        "token limits too, tens of ms added); Kubernetes always runs LiteLLM"))
    haproxy: HAProxySettings = Field(default_factory=HAProxySettings)
    port: int = Field(4000, ge=1024, le=65535, description="the router's port")
    hosts: list[str] = Field(default_factory=list, description=(
        "target hosts: inventory hosts the router (and its tier routers) runs on, in a group of their own outside "
        "the node groups (e.g. routers): never drained or rebooted by a rolling provision; empty: the serving "
        "head, which a roll then rolls last"))
    routes: list[Route] = Field(
        default_factory=list, description="default: one route per served_name over the tiers serving it, weight 1")
    keys: list[RouterKey] = Field(default_factory=list, description="client keys (at least one when enabled)")
    num_retries: int = Field(1, ge=0, le=5, description="LiteLLM router_settings.num_retries")
    allowed_fails: PositiveInt = Field(1, description="failures in a minute before a tier cools down")
    cooldown_s: PositiveInt = Field(30, description="LiteLLM router_settings.cooldown_time")
    timeout_s: PositiveInt = Field(600, description="LiteLLM router_settings.timeout per request")
    health_check_interval_s: PositiveInt = Field(15, description="background health checks of every tier")
    canary: Canary = Field(default_factory=Canary)
    tier_routers: TierRouters = Field(default_factory=TierRouters)
    gateway: str = Field("inference-gateway", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                         description="Kubernetes: the Gateway in serving.kubernetes.namespace the HTTPRoutes attach to")

    @field_validator("hosts")
    @classmethod
    def _hosts_once(cls, hosts: list[str]) -> list[str]:
        dupes = sorted({h for h in hosts if hosts.count(h) > 1})
        if dupes:
            raise ValueError(f"{', '.join(map(repr, dupes))} named twice")
        return hosts

    @model_validator(mode="after")
    def _keys(self) -> RouterSpec:
        if self.enabled and not self.keys:
            raise ValueError("an enabled router needs at least one entry in keys")
        if len(self.hosts) > 1 and self.tier_routers.enabled:
            raise ValueError("hosts: one router host only with tier_routers enabled (the controller drains each "
                             "tier router through its own API, and there is one per tier)")
        models = [r.model for r in self.routes]
        if len(set(models)) != len(models):
            raise ValueError("two routes have the same model")
        return self
