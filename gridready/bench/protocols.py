"""The wire protocols the client speaks: OpenAI chat/completions (vLLM, trtllm-serve, Triton's OpenAI
frontend), Triton's generate extension, and KServe v2 inference (a fixed-cost model's tensors in, tensors out).
One request in, one RequestResult with token arrival times out."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gridready.bench.http import Connection, HttpError


class Api(StrEnum):
    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    TRITON_GENERATE = "triton-generate"
    KSERVE_INFER = "kserve-infer"  # POST /v2/models/<m>/infer (KServe v2 protocol, Triton's HTTP API)


@dataclass(frozen=True)
class Prompt:
    text: str
    input_tokens: int  # as the workload intended (the server's usage, when given, wins)
    output_tokens: int
    # KServe v2 request tensors [{name, shape, datatype, data}] (Api.KSERVE_INFER only)
    inputs: tuple[dict[str, Any], ...] = ()


@dataclass
class RequestResult:
    """One request as the client saw it; times in seconds (perf_counter based offsets)."""

    request_id: str
    ok: bool = False
    error: str | None = None
    status: int = 0
    scheduled: float = 0.0  # when it should have been sent (offset from run start)
    sent: float = 0.0  # when it was sent (offset from run start)
    ttft: float | None = None
    e2e: float | None = None
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    simulated: bool = False

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


def build(api: Api, model: str, prompt: Prompt, stream: bool, ignore_eos: bool = True) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of one request."""
    if api is Api.KSERVE_INFER:
        return f"/v2/models/{model}/infer", {"inputs": list(prompt.inputs)}
    if api is Api.TRITON_GENERATE:
        body: dict[str, Any] = {"text_input": prompt.text, "max_tokens": prompt.output_tokens, "stream": stream}
        return f"/v2/models/{model}/generate" + ("_stream" if stream else ""), body
    body = {"model": model, "max_tokens": prompt.output_tokens, "temperature": 0.0, "stream": stream}
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM extension: generate exactly max_tokens
    if stream:
        body["stream_options"] = {"include_usage": True}
    if api is Api.OPENAI_CHAT:
        body["messages"] = [{"role": "user", "content": prompt.text}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt.text
    return "/v1/completions", body


def _piece(api: Api, event: dict[str, Any]) -> str:
    """The generated text carried by one streamed event ('' if none)."""
    if api is Api.TRITON_GENERATE:
        return str(event.get("text_output") or "")
    choices = event.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if api is Api.OPENAI_CHAT:
        return str((c.get("delta") or {}).get("content") or "")
    return str(c.get("text") or "")


def answer_of(api: Api, body: dict[str, Any]) -> str:
    """The generated text of a non-streamed response."""
    if api is Api.TRITON_GENERATE:
        return str(body.get("text_output") or "")
    c = (body.get("choices") or [{}])[0]
    if api is Api.OPENAI_CHAT:
        return str((c.get("message") or {}).get("content") or "")
    return str(c.get("text") or "")


async def execute(conn: Connection, api: Api, model: str, prompt: Prompt, request_id: str, t0: float,
                  stream: bool = True, ignore_eos: bool = True) -> tuple[RequestResult, dict[str, Any]]:
    """Run one request on conn. Returns the result and the last JSON body/event seen (for smoke checks)."""
    stream = stream and api is not Api.KSERVE_INFER  # KServe v2 inference answers once
    path, body = build(api, model, prompt, stream, ignore_eos)
    res = RequestResult(request_id, prompt_tokens=prompt.input_tokens)
    last: dict[str, Any] = {}
    try:
        resp = await conn.request("POST", path, json.dumps(body).encode(),
                                  {"Content-Type": "application/json", "X-Request-Id": request_id})
        res.sent, res.status, res.simulated = resp.sent - t0, resp.status, resp.simulated
        if resp.status != 200:
            raw = await conn.read(resp)
            res.error = f"HTTP {resp.status}: {raw[:200].decode('utf-8', 'replace')}"
            return res, last
        if not stream:
            last = json.loads(await conn.read(resp))
            res.e2e = time.perf_counter() - resp.sent
            if api is Api.KSERVE_INFER:
                res.ok = isinstance(last.get("outputs"), list) and bool(last["outputs"])
                res.error = None if res.ok else "response without outputs"
                return res, last
            usage = last.get("usage") or {}
            res.prompt_tokens = usage.get("prompt_tokens", res.prompt_tokens)
            res.output_tokens = usage.get("completion_tokens") or len(answer_of(api, last).split())
            res.ok = True
            return res, last
        times: list[float] = []
        usage = {}
        async for t, data in conn.sse(resp):
            if data == b"[DONE]":
                continue
            event = json.loads(data)
            if "error" in event and not event.get("choices"):
                raise HttpError(f"error event: {event['error']}")
            if _piece(api, event):
                times.append(t)
            usage = event.get("usage") or usage
            last = event
        end = time.perf_counter()
        if not times:
            res.error = "stream ended without any generated text"
            return res, last
        res.ttft = times[0] - resp.sent
        res.e2e = end - resp.sent
        res.itl = [b - a for a, b in itertools.pairwise(times)]
        res.output_tokens = usage.get("completion_tokens") or len(times)
        res.prompt_tokens = usage.get("prompt_tokens", res.prompt_tokens)
        res.ok = True
    except (HttpError, ValueError) as err:
        res.error = str(err)
        conn.close()
    return res, last
