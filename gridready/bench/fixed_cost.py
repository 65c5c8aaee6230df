"""Benchmark of a fixed-cost model behind Triton (engine triton-embedding): KServe v2 inference requests with
the model's own input tensors, Poisson arrivals per level, and the batching Triton did, read from its metrics.

Triton counts every batch item in `nv_inference_count` and every model execution in `nv_inference_exec_count`,
so their ratio over a run is the mean batch size the dynamic batcher formed; `nv_inference_queue_duration_us`
is the time requests waited in its queue (Triton docs, Metrics, "Inference Request Metrics",
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html).
"""

from __future__ import annotations

import asyncio
import math

from pydantic import BaseModel, ConfigDict

from gridready.bench.endpoint import Endpoint
from gridready.bench.http import Connection
from gridready.bench.protocols import Api, execute
from gridready.bench.smoke import SmokeCase, SmokeReport
from gridready.bench.workload import InferInput, Workload
from gridready.spec.embedding import EmbeddingSettings, Tensor

INFERENCES, EXECUTIONS = "nv_inference_count", "nv_inference_exec_count"
SUCCESSES, QUEUE_US = "nv_inference_request_success", "nv_inference_queue_duration_us"


def kserve_datatype(data_type: str) -> str:
    """model_config.proto DataType -> KServe v2 tensor datatype (TYPE_STRING travels as BYTES)."""
    name = data_type.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def _shape(t: Tensor, seq_len: int) -> list[int]:
    return [seq_len if d == -1 else d for d in t.dims]


def infer_inputs(settings: EmbeddingSettings) -> list[InferInput]:
    seq = settings.bench.seq_len
    out = []
    for t in settings.inputs:
        dtype = kserve_datatype(t.data_type)
        fill = t.fill or ("random" if dtype.startswith(("FP", "BF")) else "token_ids")
        out.append(InferInput(name=t.name, datatype=dtype, shape=_shape(t, seq), fill=fill))
    return out


def workload_for(settings: EmbeddingSettings, rates: list[float] | None = None) -> Workload:
    """The tier's benchmark (or one sweep point at `rates`): every request one batch item of seq_len."""
    b = settings.bench
    return Workload(api=Api.KSERVE_INFER, request_rate=rates or list(b.request_rates), num_prompts=b.requests,
                    duration_s=b.duration_s, input_len=b.seq_len, output_len=1, warmup=4,
                    request_timeout_s=30.0, infer_inputs=infer_inputs(settings))


def _check_outputs(settings: EmbeddingSettings, body: dict[str, object]) -> list[str]:
    """Each declared output is in the response with its datatype, shape [1, *dims] and that many values."""
    got = {o.get("name"): o for o in body.get("outputs") or [] if isinstance(o, dict)}  # type: ignore[union-attr]
    problems = []
    for t in settings.outputs:
        out = got.get(t.name)
        if out is None:
            problems.append(f"output {t.name!r} missing")
            continue
        shape, dtype = [1, *_shape(t, settings.bench.seq_len)], kserve_datatype(t.data_type)
        data = out.get("data")
        if out.get("datatype") != dtype or out.get("shape") != shape:
            problems.append(f"output {t.name!r}: {out.get('datatype')} {out.get('shape')}, expected {dtype} {shape}")
        elif not isinstance(data, list) or len(data) != math.prod(shape):
            problems.append(f"output {t.name!r}: {len(data) if isinstance(data, list) else 'no'} values, "
                            f"expected {math.prod(shape)}")
        elif dtype.startswith("FP") and not any(isinstance(v, int | float) and v != 0 and math.isfinite(v)
                                                for v in data):
            problems.append(f"output {t.name!r}: no finite non-zero value")
    return problems


async def smoke_infer(ep: Endpoint, settings: EmbeddingSettings, timeout_s: float = 60.0) -> SmokeReport:
    """One inference of one synthetic request: the outputs as the spec declares them."""
    prompt = workload_for(settings).prompts(1)[0]
    conn = Connection(ep.base)
    try:
        res, last = await asyncio.wait_for(
            execute(conn, Api.KSERVE_INFER, ep.model, prompt, f"smoke-{ep.model}", 0.0, stream=False), timeout_s)
    except TimeoutError:
        res, last = None, {}
    finally:
        conn.close()
    if res is None or not res.ok:
        detail = f"no answer within {timeout_s:g} s" if res is None else res.error or "failed"
        case = SmokeCase(model=ep.model, stream=False, ok=False, detail=detail,
                         simulated=bool(res and res.simulated))
        return SmokeReport(ok=False, cases=[case])
    problems = _check_outputs(settings, last)
    names = ", ".join(t.name for t in settings.outputs)
    case = SmokeCase(model=ep.model, stream=False, ok=not problems, detail="; ".join(problems) or f"outputs {names}",
                     prompt_tokens=prompt.input_tokens, simulated=res.simulated)
    return SmokeReport(ok=case.ok, cases=[case])


class BatchingReading(BaseModel):
    """What Triton's dynamic batcher did over one run, from its own counters (after - before)."""

    model_config = ConfigDict(extra="forbid")

    inferences: float
    executions: float
    mean_batch_size: float | None
    mean_queue_us: float | None


def batching(before: dict[str, float] | None, after: dict[str, float] | None) -> BatchingReading | None:
    if before is None or after is None or INFERENCES not in after or EXECUTIONS not in after:
        return None

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    inf, exe, ok = delta(INFERENCES), delta(EXECUTIONS), delta(SUCCESSES)
    return BatchingReading(inferences=inf, executions=exe, mean_batch_size=inf / exe if exe > 0 else None,
                           mean_queue_us=delta(QUEUE_US) / ok if ok > 0 and QUEUE_US in after else None)
