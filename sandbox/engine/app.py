"""Routing and listeners: which port serves which routes in each mode."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from . import openai_api, sglang_api, triton_api
from .auth import ApiKeys, SglangApiKey
from .core import Engine
from .httpserver import Handler, Request, Responder, serve_connection

MODEL_ROUTE = re.compile(r"^/v2/models/([^/]+)(?:/versions/([^/]+))?"
                         r"(?:/(ready|generate|generate_stream|infer|config))?/?$")


async def _not_found(resp: Responder, req: Request) -> None:
    await resp.send_json(404, {"error": {"message": f"no route {req.method} {req.path}", "code": 404}})


async def _gridready_routes(engine: Engine, req: Request, resp: Responder) -> bool:
    """Simulator-only routes: /gridready/info and /gridready/requests (ground truth for tests)."""
    if req.path == "/gridready/info":
        fixed = {"fixed_cost_models": {n: m.info() for n, m in engine.fixed.items()}} if engine.fixed else {}
        await resp.send_json(200, {"simulated": True, "mode": engine.mode, "models": engine.models + list(engine.fixed),
                                   "ready": engine.ready, "profile": engine.profile.as_dict(),
                                   "running": engine.running, "waiting": engine.waiting, **engine.info, **fixed})
        return True
    if req.path == "/gridready/requests":
        since = int(req.query.get("since", ["0"])[0])
        await resp.send_json(200, engine.record_tail(since))
        return True
    return False


async def openai_routes(engine: Engine, p: str, req: Request, resp: Responder) -> bool:
    """/v1/models, /v1/completions, /v1/chat/completions (vLLM's and SGLang's OpenAI servers alike)."""
    if p == "/v1/models":
        await openai_api.models(engine, req, resp)
    elif p == "/v1/completions" and req.method == "POST":
        await openai_api.completions(engine, req, resp, chat=False)
    elif p == "/v1/chat/completions" and req.method == "POST":
        await openai_api.completions(engine, req, resp, chat=True)
    else:
        return False
    return True


def openai_handler(engine: Engine, with_metrics: bool = True, keys: ApiKeys | None = None) -> Handler:
    keys = keys or ApiKeys([])

    async def handle(req: Request, resp: Responder) -> None:
        p = req.path.rstrip("/") or "/"
        if await _gridready_routes(engine, req, resp):  # simulator-only ground truth, not a vLLM route
            return
        if not keys.allows(req.method, req.path, req.headers):  # vLLM's middleware runs before any route
            await resp.send_json(401, {"error": "Unauthorized"})
        elif p in ("/health", "/health/ready"):
            await resp.send(200 if engine.ready else 503, b"")
        elif not engine.ready and p.startswith("/v1/"):
            await resp.send_json(503, {"error": {"message": "model is loading", "code": 503}})
        elif await openai_routes(engine, p, req, resp):
            return
        elif p == "/version":
            await resp.send_json(200, {"version": "gridready-sim"})
        elif p == "/metrics" and with_metrics:
            await resp.send(200, engine.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            await _not_found(resp, req)

    return handle


def triton_handler(engine: Engine) -> Handler:
    async def handle(req: Request, resp: Responder) -> None:
        p = req.path
        if await _gridready_routes(engine, req, resp):
            return
        if p in ("/v2/health/live", "/v2/health/ready"):
            await triton_api.health(engine, req, resp, live=p.endswith("live"))
        elif p.rstrip("/") == "/v2":
            await triton_api.server_metadata(engine, req, resp)
        elif p == "/v2/repository/index" and req.method == "POST":
            await triton_api.repository_index(engine, req, resp)
        elif m := MODEL_ROUTE.match(p):
            await triton_api.model_route(engine, req, resp, m.group(1), m.group(3) or "", m.group(2))
        else:
            await _not_found(resp, req)

    return handle


def metrics_handler(engine: Engine) -> Handler:
    async def handle(req: Request, resp: Responder) -> None:
        if req.path == "/metrics":
            await resp.send(200, engine.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            await _not_found(resp, req)

    return handle


def _gridready_only(engine: Engine) -> Handler:
    async def handle(req: Request, resp: Responder) -> None:
        if not await _gridready_routes(engine, req, resp):
            await _not_found(resp, req)

    return handle


async def start(engine: Engine, host: str, port: int, metrics_port: int | None = None,
                openai_port: int | None = None, enable_metrics: bool = True,
                api_keys: list[str] | None = None) -> dict[str, Any]:
    """Start the listeners of engine.mode; returns {"servers": [...], "ports": {role: port}}."""
    servers: list[asyncio.base_events.Server] = []
    ports: dict[str, int] = {}

    async def listen(role: str, handler: Handler, p: int) -> None:
        srv = await asyncio.start_server(serve_connection(handler), host, p, backlog=1024, reuse_address=True)
        servers.append(srv)
        ports[role] = srv.sockets[0].getsockname()[1]

    if engine.mode == "openai":
        await listen("http", openai_handler(engine, keys=ApiKeys(api_keys or [])), port)
    elif engine.mode == "sglang":
        await listen("http", sglang_api.handler(engine, enable_metrics, _gridready_only(engine), openai_routes,
                                                 SglangApiKey((api_keys or [""])[0])), port)
    else:
        await listen("http", triton_handler(engine), port)
        if openai_port is None:  # tritonserver: metrics on --metrics-port (default 8002)
            await listen("metrics", metrics_handler(engine), 8002 if metrics_port is None else metrics_port)
        else:
            # Triton's OpenAI frontend runs Triton in-process (tritonserver Python API) with the KServe frontends
            # beside it and serves /metrics on the OpenAI port; no metrics port listens (server:python/openai/
            # openai_frontend/main.py and frontend/fastapi/routers/observability.py, triton-inference-server/server)
            await listen("openai", openai_handler(engine), openai_port)
    return {"servers": servers, "ports": ports}


def ports_json(ports: dict[str, int]) -> str:
    return json.dumps({"event": "listening", "simulated": True, **ports})
