"""Smoke: one chat completion (Triton: one generate) per served model, streamed and not, checked for a
well-formed answer and consistent token counts."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict

from gridready.bench.endpoint import Endpoint
from gridready.bench.http import Connection
from gridready.bench.protocols import Api, Prompt, answer_of, execute

SMOKE_PROMPT = "Say hello to the operators of this cluster in one short sentence."


class SmokeCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    stream: bool
    ok: bool
    detail: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answer: str = ""
    simulated: bool = False


class SmokeReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool
    cases: list[SmokeCase]

    @property
    def reason(self) -> str:
        bad = [f"{c.model} ({'stream' if c.stream else 'no stream'}): {c.detail}" for c in self.cases if not c.ok]
        return "; ".join(bad) or "ok"


async def _case(ep: Endpoint, model: str, stream: bool, max_tokens: int, timeout_s: float) -> SmokeCase:
    api = ep.api if ep.api is Api.TRITON_GENERATE else Api.OPENAI_CHAT
    conn = Connection(ep.base)
    prompt = Prompt(SMOKE_PROMPT, len(SMOKE_PROMPT.split()), max_tokens)
    try:
        res, last = await asyncio.wait_for(
            execute(conn, api, model, prompt, f"smoke-{model}-{int(stream)}", 0.0, stream=stream, ignore_eos=False),
            timeout_s)
    except TimeoutError:
        return SmokeCase(model=model, stream=stream, ok=False, detail=f"no answer within {timeout_s:g} s")
    finally:
        conn.close()
    case = SmokeCase(model=model, stream=stream, ok=False, detail="", prompt_tokens=res.prompt_tokens,
                     completion_tokens=res.output_tokens, simulated=res.simulated)
    if not res.ok:
        case.detail = res.error or "failed"
        return case
    problems = []
    if not stream:
        case.answer = answer_of(api, last)[:200]
        if not case.answer.strip():
            problems.append("empty answer")
    if api is not Api.TRITON_GENERATE:
        usage = last.get("usage") or {}
        if not usage:
            problems.append("no usage in the response" + (" (stream_options.include_usage)" if stream else ""))
        else:
            p, c, t = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
            if not (isinstance(p, int) and p > 0):
                problems.append(f"usage.prompt_tokens={p!r}")
            if not (isinstance(c, int) and 0 < c <= max_tokens):
                problems.append(f"usage.completion_tokens={c!r} not in 1..{max_tokens}")
            if isinstance(p, int) and isinstance(c, int) and t != p + c:
                problems.append(f"usage.total_tokens={t!r} != {p} + {c}")
        if not stream:
            finish = ((last.get("choices") or [{}])[0]).get("finish_reason")
            if finish not in ("stop", "length"):
                problems.append(f"finish_reason={finish!r}")
    elif not 0 < res.output_tokens <= max_tokens:
        problems.append(f"{res.output_tokens} output tokens, expected 1..{max_tokens}")
    case.ok = not problems
    case.detail = "; ".join(problems) or f"{case.completion_tokens} tokens"
    return case


async def smoke(ep: Endpoint, models: list[str] | None = None, *, max_tokens: int = 16,
                timeout_s: float = 120.0) -> SmokeReport:
    cases = []
    for model in models or [ep.model]:
        for stream in (False, True):
            cases.append(await _case(ep, model, stream, max_tokens, timeout_s))
    return SmokeReport(ok=all(c.ok for c in cases), cases=cases)
