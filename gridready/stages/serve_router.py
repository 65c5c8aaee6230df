"""serve/bench hooks of the router (Layer 3, docs/layer3.md): its play's variables, and its added latency.

The router's client key for the measurement comes from GRIDREADY_ROUTER_KEY (exported from the vault by the caller,
as GRIDREADY_HF_TOKEN is); it is sent in a header only, never written."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from gridready import artifacts
from gridready.bench.http import HttpError
from gridready.bench.router_overhead import measure
from gridready.errors import InvalidInput
from gridready.inventory import Inventory
from gridready.serving import router, router_hosts, topology
from gridready.serving.topology import Certification, TierPlan
from gridready.spec.router import Route

KEY_ENV = "GRIDREADY_ROUTER_KEY"


def extravars(inv: Inventory, root: Path, cert: Certification, plans: list[TierPlan]) -> dict[str, Any]:
    """`gridready_serve_router` for serve.yml, {} when the router is off. Routes that ask for it are weighted
    from the latest serve decision record of their tiers' model."""
    spec = inv.spec.serving.router
    if not spec.enabled:
        return {}
    routes = [_decided(inv, root, i, r, plans) if r.split_from_decision else r
              for i, r in enumerate(router_hosts.routes_for(spec, plans))]
    vllm_tiers = {p.tier.name for p in plans if p.tier.engine == "vllm"}
    try:
        return router_hosts.router_extravars(spec, plans, cert.certified, vllm_tiers, routes)
    except ValueError as err:
        raise InvalidInput(f"{topology.cluster_file(inv)}: serving.router.routes: {err}") from err


def _decided(inv: Inventory, root: Path, index: int, route: Route, plans: list[TierPlan]) -> Route:
    where = f"{topology.cluster_file(inv)}: serving.router.routes[{index}].split_from_decision"
    models = {p.tier.model.source for p in plans if p.tier.name in {t.tier for t in route.targets}}
    latest = artifacts.latest_summary(root, inv.customer, "serve")
    if latest is None or len(models) != 1:
        raise InvalidInput(f"{where}: no serve run with a decision record of these tiers yet (serve once with "
                           "fixed weights)" if len(models) <= 1 else f"{where}: the tiers serve different models")
    record = latest[0].parent / "decision" / models.pop().replace("/", "--") / "decision.json"
    try:
        return router.split_from_decision(route, json.loads(record.read_text()))
    except (OSError, ValueError) as err:
        raise InvalidInput(f"{where}: {record}: {err}") from err


def measure_overhead(router_spec: Any, cert: Certification, plans: list[TierPlan], data: dict[str, Any],
                     messages: list[str], requests: int = 100) -> None:
    """data["router"]: the router's URL and its added latency (p50/p99) beside direct access to the first tier."""
    if not router_spec.enabled or not plans:
        return
    routed = router_hosts.router_extravars(router_spec, plans, cert.certified, set())["gridready_serve_router"]
    data["router"] = {"url": routed["url"], "routes": [d["model_name"] for d in routed["config"]["model_list"]]}
    key = os.environ.get(KEY_ENV, "")
    if not key:
        messages.append(f"router: {KEY_ENV} is not set: its added latency was not measured")
        return
    first = next((p for p in plans if router_hosts.openai_compatible(p.tier)), None)
    if first is None:
        return
    direct = f"http://{cert.certified[first.replicas[0].head].ip}:{first.tier.port}"
    try:
        report = asyncio.run(measure(direct, routed["url"], first.tier.served_name, key, n=requests))
    except HttpError as err:
        messages.append(f"router: overhead not measured: {err}")
        return
    if report.direct.errors or report.routed.errors:
        messages.append(f"router: {report.direct.errors} direct and {report.routed.errors} routed requests failed "
                        "while measuring its overhead (a tier with an API key refuses the keyless direct requests)")
    data["router"]["overhead"] = report.model_dump()
    messages.append(f"router adds p50 {report.added_p50_ms} ms, p99 {report.added_p99_ms} ms over direct access "
                    f"({report.requests} pairs to {first.tier.name})")


def open_router_port(extravars: dict[str, Any]) -> None:
    """The router's port joins the API ports of its host, so the serving firewall (gridready_ray_node) opens it to
    the cluster members and serving.firewall_clients like the engines' ports, and to no one else."""
    routed = extravars.get("gridready_serve_router")
    if routed:
        host = extravars["gridready_serve"]["hosts"][routed["host"]]
        host["api_ports"] = sorted({*host.get("api_ports", []), routed["port"]})
