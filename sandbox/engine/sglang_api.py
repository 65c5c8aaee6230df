"""SGLang's HTTP routes, SIMULATED (python/sglang/srt/entrypoints/http_server.py; docs/basic_usage/native_api.md).

/health and /health_generate (200 once the model is loaded), /get_model_info, the OpenAI routes /v1/models,
/v1/completions and /v1/chat/completions, and /metrics only with --enable-metrics (production_metrics.md: "You can
enable it by adding --enable-metrics"); without it the route does not exist (404).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .auth import SglangApiKey
from .core import Engine
from .httpserver import Handler, Request, Responder

OpenAIRoutes = Callable[[Engine, str, Request, Responder], Awaitable[bool]]


def handler(engine: Engine, enable_metrics: bool, routes: Handler, openai: OpenAIRoutes,
            key: SglangApiKey | None = None) -> Handler:
    """`routes` answers the simulator-only /gridready/* paths; `openai` the shared OpenAI routes (app.py); `key`
    is SGLang's API-key middleware (auth.py), which runs before any route."""
    key = key or SglangApiKey(None)

    async def handle(req: Request, resp: Responder) -> None:
        p = req.path.rstrip("/") or "/"
        if p.startswith("/gridready/"):
            await routes(req, resp)
        elif not key.allows(req.method, req.path, req.headers):
            await resp.send_json(401, {"error": "Unauthorized"})
        elif p in ("/health", "/health_generate"):
            await resp.send(200 if engine.ready else 503, b"")
        elif not engine.ready and (p.startswith("/v1/") or p == "/get_model_info"):
            await resp.send_json(503, {"error": {"message": "server is not ready", "code": 503}})
        elif p == "/get_model_info":
            await resp.send_json(200, {"model_path": engine.info.get("model", engine.models[0]),
                                       "tokenizer_path": engine.info.get("model", engine.models[0]),
                                       "is_generation": True})
        elif await openai(engine, p, req, resp):
            return
        elif p == "/metrics" and enable_metrics:
            await resp.send(200, engine.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            await resp.send_json(404, {"detail": "Not Found"})

    return handle
