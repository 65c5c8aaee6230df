"""serve/bench hooks of the router (Layer 3, docs/layer3.md): its play's variables, and its added latency.

The router's client key for the measurement comes from GRIDREADY_ROUTER_KEY (exported from the vault by the caller,
as GRIDREADY_HF_TOKEN is); it is sent in a header only, never written."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from gridready.bench.http import HttpError
from gridready.bench.router_overhead import measure
from gridready.serving import router_hosts
from gridready.serving.topology import Certification, TierPlan

KEY_ENV = "GRIDREADY_ROUTER_KEY"


def extravars(router_spec: Any, cert: Certification, plans: list[TierPlan]) -> dict[str, Any]:
    """`gridready_serve_router` for serve.yml, {} when the router is off."""
    vllm_tiers = {p.tier.name for p in plans if p.tier.engine == "vllm"}
    return router_hosts.router_extravars(router_spec, plans, cert.certified, vllm_tiers)


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
