"""Triton HTTP routes (KServe v2 + the generate extension) as served by Triton with the TRT-LLM backend."""

from __future__ import annotations

import json
import uuid
from contextlib import aclosing

from .core import Engine
from .fixed_model import FixedCostModel
from .httpserver import Request, Responder
from .infer_request import InferError
from .profile import count_tokens

VERSION = "2.60.0-gridready-sim"


def _err(message: str) -> dict[str, str]:
    return {"error": message}


async def server_metadata(_engine: Engine, _req: Request, resp: Responder) -> None:
    await resp.send_json(200, {"name": "triton", "version": VERSION, "simulated": True,
                               "extensions": ["classification", "model_repository", "schedule_policy",
                                              "model_configuration", "statistics", "trace", "generate"]})


async def health(engine: Engine, _req: Request, resp: Responder, live: bool) -> None:
    ok = live or engine.ready
    await resp.send(200 if ok else 400, b"")


async def repository_index(engine: Engine, _req: Request, resp: Responder) -> None:
    state = "READY" if engine.ready else "LOADING"
    names = sorted([*engine.models, *engine.fixed])
    await resp.send_json(200, [{"name": m, "version": "1", "state": state} for m in names])


async def model_route(engine: Engine, req: Request, resp: Responder, model: str, action: str,
                      version: str | None = None) -> None:
    if model in engine.fixed:
        await _fixed_route(engine, req, resp, engine.fixed[model], action, version)
        return
    if model not in engine.models:
        await resp.send_json(400, _err(f"Request for unknown model: '{model}' is not found"))
        return
    if action == "ready":
        await resp.send(200 if engine.ready else 400, b"")
    elif action == "":
        await resp.send_json(200, {"name": model, "versions": ["1"], "platform": "ensemble",
                                   "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [-1]},
                                              {"name": "max_tokens", "datatype": "INT32", "shape": [-1]}],
                                   "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]})
    elif action in ("generate", "generate_stream"):
        if req.method != "POST":
            await resp.send_json(405, _err("generate needs POST"))
            return
        await _generate(engine, req, resp, model, stream=action == "generate_stream")
    else:
        await resp.send_json(404, _err(f"unknown model action '{action}'"))


async def _generate(engine: Engine, req: Request, resp: Responder, model: str, stream: bool) -> None:
    if not engine.ready:
        await resp.send_json(400, _err(f"Request for unknown model: '{model}' is not ready"))
        return
    try:
        body = req.json()
    except ValueError as err:
        await resp.send_json(400, _err(f"failed to parse the request JSON buffer: {err}"))
        return
    params = body.get("parameters") or {}
    text = body.get("text_input", "")
    max_tokens = body.get("max_tokens", params.get("max_tokens", engine.profile.default_max_tokens))
    if not isinstance(max_tokens, int) or max_tokens < 1:
        await resp.send_json(400, _err("max_tokens must be a positive integer"))
        return
    prompt_tokens = count_tokens(str(text))
    max_tokens = min(max_tokens, max(1, engine.profile.max_model_len - prompt_tokens))
    rid = req.headers.get("x-request-id", body.get("id") or uuid.uuid4().hex)
    head = {"model_name": model, "model_version": "1", "system_fingerprint": "gridready-sim"}
    if body.get("id"):
        head["id"] = body["id"]
    gen = engine.generate(model, prompt_tokens, max_tokens, rid, req.received)
    if stream:
        await resp.start_stream()
        async with aclosing(gen) as tokens:
            async for _i, tok in tokens:
                await resp.chunk(b"data: " + json.dumps({**head, "text_output": tok}).encode() + b"\n\n")
        await resp.end()
        return
    out: list[str] = []
    async with aclosing(gen) as tokens:
        async for _i, tok in tokens:
            out.append(tok)
    await resp.send_json(200, {**head, "text_output": "".join(out)})


async def _fixed_route(engine: Engine, req: Request, resp: Responder, model: FixedCostModel, action: str,
                       version: str | None) -> None:
    """An ONNX Runtime / TensorRT model (fixed_model.py): metadata, config, ready, infer."""
    if version not in (None, "1"):  # model_lifecycle.cc GetModel: only version 1 exists; NOT_FOUND is HTTP 404
        if action == "ready":
            await resp.send(400, b"")
        else:
            await resp.send_json(404, _err(f"Request for unknown model: '{model.name}' version {version} is not found"))
        return
    if action == "ready":
        await resp.send(200 if engine.ready else 400, b"")
    elif action == "":
        await resp.send_json(200, model.metadata())
    elif action == "config":  # Triton's model_configuration extension
        await resp.send_json(200, model.config_json())
    elif action != "infer":
        await resp.send_json(404, _err(f"unknown model action '{action}'"))
    elif req.method != "POST":
        await resp.send_json(405, _err("Method Not Allowed"))  # http_server.cc HandleInfer
    elif not engine.ready:
        await resp.send_json(400, _err(f"Request for unknown model: '{model.name}' is not ready"))
    else:
        try:
            await resp.send_json(200, await model.infer(req.body, req.received))
        except InferError as err:
            await resp.send_json(err.status, _err(err.message))
