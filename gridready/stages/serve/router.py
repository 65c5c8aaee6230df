"""serve/bench hooks of the router (Layer 3, docs/layer3.md): its play's variables, and its added latency.

The router's secrets live in the customer's vault: the master key (`vault_gridready_router_master_key`) and one
variable per client key (`serving.router.keys[].vault_var`), generated (256 bits) when absent as the vLLM API key
is. The key the controller measures with is GRIDREADY_ROUTER_KEY when set, else the first client key from the
vault; it is sent in a header only, never written."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from gridready import ledger, vault
from gridready.artifacts import read_json
from gridready.bench.http import HttpError, fetch
from gridready.bench.router_overhead import measure
from gridready.errors import InvalidInput
from gridready.inventory import Inventory
from gridready.serving import router, router_hosts, router_k8s, topology
from gridready.serving.topology import Certification, TierPlan
from gridready.spec import API_KEY_ENGINES
from gridready.spec.router import Route

KEY_ENV = "GRIDREADY_ROUTER_KEY"
# invoke bench measures a router that serve already brought up: it waits this long, not serve's start-up timeout
LIVE_TIMEOUT_AFTER_SERVE_S = 60.0


MASTER_KEY_VAR = "vault_gridready_router_master_key"
# LiteLLM's custom_auth hook, one file for both targets (the hosts' role installs it; on Kubernetes a ConfigMap)
AUTH_MODULE = Path(__file__).resolve().parents[3] / "roles" / "gridready_router" / "files" / "gridready_router_auth.py"


def routes(inv: Inventory, root: Path, plans: list[TierPlan], canary: str | None = None) -> list[Route]:
    """The routes serve applies: the spec's (or one per served name), weighted from the latest decision record
    where a route asks for it; with `canary`, its route as it is without the canary (`invoke serve --canary`)."""
    spec = inv.spec.serving.router
    out = [_decided(inv, root, i, r, plans) if r.split_from_decision else r
           for i, r in enumerate(router_hosts.routes_for(spec, plans))]
    if canary:
        try:
            out = router.replace_route(out, router.canary_route(out, canary))
        except ValueError as err:
            raise InvalidInput(f"{topology.cluster_file(inv)}: serving.router.routes: {err}") from err
    return out


def placement(inv: Inventory, cert: Certification, plans: list[TierPlan]) -> dict[str, str]:
    """Where the router runs, host -> address: serving.router.hosts (inventory hosts of their own), else the
    serving head of `plans` (the deployment's: a drain never moves the router)."""
    spec = inv.spec.serving.router
    declared = {h: topology.node_ip(inv, h) for h in spec.hosts}
    return router_hosts.placement(spec, plans, cert.certified, declared)


def extravars(inv: Inventory, root: Path, cert: Certification, plans: list[TierPlan], canary: str | None = None,
              chosen: list[Route] | None = None, placed: dict[str, str] | None = None) -> dict[str, Any]:
    """`gridready_serve_router` for serve.yml, {} when the router is off; `chosen` routes replace the spec's;
    `placed`: where the router runs (default `placement` of `plans`)."""
    spec = inv.spec.serving.router
    if not spec.enabled:
        return {}
    ensure_secrets(inv)
    chosen = chosen if chosen is not None else routes(inv, root, plans, canary)
    keyed_tiers = {p.tier.name for p in plans if p.tier.engine in API_KEY_ENGINES}
    try:
        return router_hosts.router_extravars(spec, plans, cert.certified, keyed_tiers, chosen,
                                             placed or (placement(inv, cert, plans) if plans else None))
    except ValueError as err:
        raise InvalidInput(f"{topology.cluster_file(inv)}: serving.router.routes: {err}") from err


def ensure_secrets(inv: Inventory) -> None:
    """The master key and every client key of the router in the vault (Ansible reads them there itself)."""
    for var in (MASTER_KEY_VAR, *(k.vault_var for k in inv.spec.serving.router.keys)):
        vault.ensure_secret(inv.customer, inv.path, var)


def client_key(inv: Inventory) -> str:
    """GRIDREADY_ROUTER_KEY, else the router's first client key from the vault ("" when there is none)."""
    keys = inv.spec.serving.router.keys
    if os.environ.get(KEY_ENV) or not keys:
        return os.environ.get(KEY_ENV, "")
    value = vault.read(inv.customer, inv.path).get(keys[0].vault_var)
    return value if isinstance(value, str) else ""


def _decided(inv: Inventory, root: Path, index: int, route: Route, plans: list[TierPlan]) -> Route:
    where = f"{topology.cluster_file(inv)}: serving.router.routes[{index}].split_from_decision"
    models = {p.tier.model.source for p in plans if p.tier.name in {t.tier for t in route.targets}}
    serving = ledger.read(root, inv.customer)[1].serving
    if serving is None or len(models) != 1:
        raise InvalidInput(f"{where}: no serve run with a decision record of these tiers yet (serve once with "
                           "fixed weights)" if len(models) <= 1 else f"{where}: the tiers serve different models")
    record = Path(serving.summary).parent / "decision" / models.pop().replace("/", "--") / "decision.json"
    try:
        decision = read_json(record, root)
    except InvalidInput as err:
        raise InvalidInput(f"{where}: {err}") from None
    if decision is None:
        raise InvalidInput(f"{where}: {record}: no decision record there")
    try:
        return router.split_from_decision(route, decision)
    except ValueError as err:
        raise InvalidInput(f"{where}: {record}: {err}") from err


def wait_live(url: str, timeout_s: float, interval_s: float = 3.0, path: str = "/health/liveliness") -> bool:
    """Whether the router answers its liveness path within timeout_s: LiteLLM's liveness probe
    (https://docs.litellm.ai/docs/proxy/health), or HAProxy's monitor-uri on the same path (the extravars'
    `live_path`). The router play starts the unit without waiting, so its start overlaps the tiers' readiness,
    smoke and benchmark."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if asyncio.run(fetch(url, path, timeout=10))[0] == 200:
                return True
        except HttpError:
            pass
        if time.monotonic() + interval_s > deadline:
            return False
        time.sleep(interval_s)


def measure_overhead(inv: Inventory, cert: Certification, plans: list[TierPlan], data: dict[str, Any],
                     messages: list[str], api_key: str | None = None, requests: int = 100,
                     live_timeout_s: float | None = None) -> str | None:
    """data["router"]: the router's URL and its added latency (p50/p99) beside direct access to the first tier
    (with the tiers' API key, `api_key`) on the route named by that tier's served name. Returns why the router
    failed (not live within `live_timeout_s`, default serving.wait_timeout_s), None otherwise."""
    router_spec = inv.spec.serving.router
    if not router_spec.enabled or not plans:
        return None
    routed = router_hosts.router_extravars(router_spec, plans, cert.certified, set(),
                                           placed=placement(inv, cert, plans))["gridready_serve_router"]
    names = list(routed["models"])
    data["router"] = {"url": routed["url"], "routes": names, "proxy": routed["proxy"]}
    started = time.monotonic()
    timeout = float(inv.spec.serving.wait_timeout_s) if live_timeout_s is None else live_timeout_s
    live = wait_live(routed["url"], timeout, path=routed["live_path"])
    data["router"]["live_after_s"] = round(time.monotonic() - started, 1) if live else None
    if not live:
        return (f"router ({routed['proxy']}): {routed['url']}{routed['live_path']} did not answer 200 within "
                f"{timeout:g} s (journalctl -u gridready-router on {routed['host']})")
    key = client_key(inv)
    if not key:
        messages.append(f"router: no client key ({KEY_ENV} or serving.router.keys): its added latency was not "
                        "measured")
        return None
    first = next((p for p in plans if router_hosts.openai_compatible(p.tier) and p.tier.served_name in names), None)
    if first is None:
        messages.append("router: no route is named by a tier's served name: its added latency was not measured")
        return None
    direct = f"http://{cert.certified[first.replicas[0].head].ip}:{first.tier.port}"
    direct_key = api_key if first.tier.engine in API_KEY_ENGINES else None
    try:
        report = asyncio.run(measure(direct, routed["url"], first.tier.served_name, key, direct_key, n=requests))
    except (HttpError, OSError) as err:
        messages.append(f"router: overhead not measured: {err}")
        return None
    if report.direct.errors or report.routed.errors:
        messages.append(f"router: {report.direct.errors} direct and {report.routed.errors} routed requests failed "
                        "while measuring its overhead")
    data["router"]["overhead"] = report.model_dump()
    messages.append(f"router adds p50 {report.added_p50_ms} ms, p99 {report.added_p99_ms} ms over direct access "
                    f"({report.requests} pairs to {first.tier.name}, model {first.tier.served_name})")
    in_tier = {t["tier"]: t for t in routed.get("tier_routers", [])}
    if first.tier.name in in_tier:
        _measure_tier_router(in_tier[first.tier.name], direct, first, direct_key, data, messages, requests)
    return None


def _measure_tier_router(tr: dict[str, Any], direct: str, first: TierPlan, direct_key: str | None,
                         data: dict[str, Any], messages: list[str], requests: int) -> None:
    """data["router"]["tier_router"]: the first tier's tier router (the hot path: one Rust hop, the tier's own
    key checked by its replicas) beside direct access, the same interleaved pairs as the front router's."""
    key = direct_key or "no-key"
    try:
        report = asyncio.run(measure(direct, tr["url"], first.tier.served_name, key, direct_key, n=requests))
    except (HttpError, OSError) as err:
        messages.append(f"tier router {tr['url']}: overhead not measured: {err}")
        return
    data["router"]["tier_router"] = {"url": tr["url"], "tier": tr["tier"], "overhead": report.model_dump()}
    messages.append(f"tier router of {tr['tier']} adds p50 {report.added_p50_ms} ms, p99 {report.added_p99_ms} ms "
                    f"over direct access ({report.requests} pairs)")


ROUTER_IMAGE = "ghcr.io/berriai/litellm:main-v{version}"
ROUTER_VERSION = "1.106.12"  # roles/gridready_router/defaults/main.yml gridready_router_version


def k8s_router(inv: Inventory, root: Path, plans: list[TierPlan], canary: str | None = None,
               weight_pct: int = 0) -> dict[str, Any] | None:
    """The authenticating front on Kubernetes (gridready/stacks/serving/router.py), None without an OpenAI tier:
    LiteLLM's config over the tiers' `<tier>-openai` Services with serving.router's routes (or one per served
    name), the serving API key as master key, the routes' models rewritten to the tiers' served names."""
    served = [p for p in plans if p.tier.engine in router_k8s.OPENAI_SERVICE_ENGINES]
    if not served:
        return None
    spec = inv.spec.serving.router
    chosen = routes(inv, root, served)
    if canary:
        chosen = router.replace_route(chosen, router.with_canary(router.canary_route(chosen, canary), canary,
                                                                 weight_pct))
    namespace = inv.spec.serving.kubernetes.namespace
    ups = {p.tier.name: [router.Upstream(
        tier=p.tier.name, base_url=f"http://{router_k8s.backend_service(p.tier.name)}.{namespace}:{p.tier.port}/v1",
        served_name=p.tier.served_name,
        api_key_env=router.tier_key_env(p.tier.name) if p.tier.engine in API_KEY_ENGINES else None)]
        for p in served}
    try:
        config = router.litellm_config(spec, chosen, ups)
    except ValueError as err:
        raise InvalidInput(f"{topology.cluster_file(inv)}: serving.router.routes: {err}") from err
    if not spec.keys:  # no client keys in the spec: the serving API key (the master key) is the only one
        config["general_settings"].pop("custom_auth", None)
    key_envs = sorted({u.api_key_env for us in ups.values() for u in us if u.api_key_env})
    return {"image": ROUTER_IMAGE.format(version=ROUTER_VERSION), "port": spec.port,
            "config_yaml": yaml.safe_dump(config, sort_keys=False), "key_envs": key_envs,
            # the same check as on hosts: LiteLLM's custom_auth over the keys' SHA-256 digests, with their limits
            "client_keys": bool(spec.keys), "auth_module": AUTH_MODULE.read_text() if spec.keys else ""}


def client_key_digests(inv: Inventory) -> str:
    """The router's client keys as the auth hook reads them (roles/gridready_router/templates/keys.json.j2 on
    hosts): JSON of {name, sha256, rpm_limit, tpm_limit}, the keys from the vault (made there when absent)."""
    ensure_secrets(inv)
    data = vault.read(inv.customer, inv.path)
    return json.dumps([{"name": k.name, "sha256": hashlib.sha256(data[k.vault_var].encode()).hexdigest(),
                        "rpm_limit": k.rpm_limit, "tpm_limit": k.tpm_limit}
                       for k in inv.spec.serving.router.keys])


def k8s_routes(inv: Inventory, root: Path, plans: list[TierPlan], canary: str | None = None,
               weight_pct: int = 0) -> list[dict[str, Any]]:
    """The router on Kubernetes: one weighted HTTPRoute per route over the tiers with an OpenAI Service (vLLM and
    SGLang: `<tier>-openai`); with `canary`, its route carries the canary at weight_pct %."""
    spec = inv.spec.serving.router
    if not spec.enabled or not any(p.tier.engine in router_k8s.OPENAI_SERVICE_ENGINES for p in plans):
        return []
    # the Gateway hands every /v1 request to the authenticating router, which routes by the body's model: no
    # header match that only the Inference Extension's body-based routing would set
    return [router_k8s.router_route(inv.spec.serving.kubernetes.namespace, spec.gateway, spec.port)]


def open_router_port(extravars: dict[str, Any]) -> None:
    """With the router on, the serving firewall (gridready_ray_node) opens the router's port to the cluster
    members and serving.firewall_clients, and each tier port the router reaches (its upstreams) to the router
    alone: those ports move from a host's `api_ports` to its `routed_ports`, which admit
    `gridready_serve.router_clients` (the router's address) besides the members and the controller.

    vLLM's API key guards only some of its routes: its AuthenticationMiddleware checks paths under /v1 (vLLM 0.33
    vllm/entrypoints/openai/server_utils.py), while the SageMaker routes it registers (/invocations, /ping:
    vllm/entrypoints/sagemaker/api_router.py) serve without it. A client that reached a tier port would bypass the
    key; through the router every route needs a client key (LiteLLM's custom_auth hook). Without the router the
    tier ports stay open to serving.firewall_clients (docs/security.md says what that exposes)."""
    routed = extravars.get("gridready_serve_router")
    if not routed:
        return
    serve = extravars["gridready_serve"]
    for name, ports in routed.get("upstream_ports", {}).items():
        host = serve["hosts"].get(name)
        if host is None:
            continue
        host["routed_ports"] = sorted({*host.get("routed_ports", []), *ports})
        host["api_ports"] = [p for p in host.get("api_ports", []) if p not in host["routed_ports"]]
    # the tier routers (serving.router.tier_routers) sit beside the router and are its upstreams: their ports
    # (and their admin API, which takes no key) admit the router's address, the members and the controller only
    tier_ports = {t["port"] for t in routed.get("tier_routers", [])}
    for name in routed.get("hosts") or [routed["host"]]:
        # a serving head holds the router in its own firewall; a router host of its own (serving.router.hosts)
        # gets the router play's (routed["firewall"])
        host = serve["hosts"].get(name) or routed.setdefault("firewall", {"api_ports": [], "routed_ports": []})
        host["api_ports"] = sorted({*host.get("api_ports", []), routed["port"]} - tier_ports)
        if tier_ports:
            host["routed_ports"] = sorted({*host.get("routed_ports", []), *tier_ports})
    binds = routed.get("binds") or {routed["host"]: routed["bind"]}
    serve["router_clients"] = [f"{ip}/32" for ip in binds.values()]
