"""OpenAI-compatible routes (vLLM's server): /health, /v1/models, /v1/completions, /v1/chat/completions."""

from __future__ import annotations

import json
import time
import uuid
from contextlib import aclosing
from typing import Any

from .core import Engine
from .httpserver import Request, Responder
from .profile import count_tokens

FINGERPRINT = "gridready-sim"


def _error(status: int, message: str, kind: str = "BadRequestError") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def prompt_of(body: dict[str, Any], chat: bool) -> str:
    if not chat:
        p = body.get("prompt", "")
        return " ".join(p) if isinstance(p, list) else str(p)
    parts: list[str] = []
    for m in body.get("messages") or []:
        c = m.get("content", "")
        if isinstance(c, list):  # content parts: keep the text ones
            c = " ".join(str(x.get("text", "")) for x in c if isinstance(x, dict))
        parts.append(str(c))
    return " ".join(parts)


async def models(engine: Engine, _req: Request, resp: Responder) -> None:
    data = [{"id": m, "object": "model", "created": int(engine.started_at), "owned_by": FINGERPRINT, "root": m,
             "parent": None, "max_model_len": engine.profile.max_model_len} for m in engine.models]
    await resp.send_json(200, {"object": "list", "data": data})


async def completions(engine: Engine, req: Request, resp: Responder, chat: bool) -> None:
    try:
        body = req.json()
    except ValueError as err:
        await resp.send_json(400, _error(400, f"invalid JSON: {err}"))
        return
    model = body.get("model") or engine.models[0]
    if model not in engine.models:
        await resp.send_json(404, _error(404, f"The model `{model}` does not exist.", "NotFoundError"))
        return
    if chat and not body.get("messages"):
        await resp.send_json(400, _error(400, "messages is required"))
        return
    text = prompt_of(body, chat)
    prompt_tokens = count_tokens(text)
    limit = engine.profile.max_model_len - prompt_tokens
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or engine.profile.default_max_tokens
    if not isinstance(max_tokens, int) or max_tokens < 1:
        await resp.send_json(400, _error(400, "max_tokens must be a positive integer"))
        return
    if limit < 1:
        await resp.send_json(400, _error(400, f"prompt has {prompt_tokens} tokens; max_model_len is "
                                              f"{engine.profile.max_model_len}"))
        return
    max_tokens = min(max_tokens, limit)
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    request_id = req.headers.get("x-request-id", rid)
    head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
            "model": model, "system_fingerprint": FINGERPRINT}
    gen = engine.generate(model, prompt_tokens, max_tokens, request_id, req.received, prompt=text.split())
    if body.get("stream"):
        opts = body.get("stream_options") or {}
        await _stream(resp, gen, head, chat, prompt_tokens, max_tokens, bool(opts.get("include_usage")),
                      bool(opts.get("continuous_usage_stats")))
        return
    text: list[str] = []
    async with aclosing(gen) as tokens:
        async for _i, tok in tokens:
            text.append(tok)
    n = len(text)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
    finish = "length"
    if chat:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "".join(text)},
                                  "logprobs": None, "finish_reason": finish}
        head["object"] = "chat.completion"
    else:
        choice = {"index": 0, "text": "".join(text), "logprobs": None, "finish_reason": finish}
    await resp.send_json(200, {**head, "choices": [choice], "usage": usage})


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _stream(resp: Responder, gen: Any, head: dict[str, Any], chat: bool, prompt_tokens: int,
                  max_tokens: int, include_usage: bool, continuous: bool) -> None:
    await resp.start_stream()
    n = 0
    async with aclosing(gen) as tokens:
        async for i, tok in tokens:
            n = i + 1
            finish = "length" if n == max_tokens else None
            if chat:
                delta: dict[str, Any] = {"content": tok}
                if i == 0:
                    delta = {"role": "assistant", "content": tok}
                choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": tok, "logprobs": None, "finish_reason": finish}
            event = {**head, "choices": [choice]}
            if include_usage and continuous:
                event["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                  "total_tokens": prompt_tokens + n}
            await resp.chunk(_sse(event))
    if include_usage:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        await resp.chunk(_sse({**head, "choices": [], "usage": usage}))
    await resp.chunk(b"data: [DONE]\n\n")
    await resp.end()
