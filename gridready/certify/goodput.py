"""Training goodput (gridready/probe/goodput.py): a ~1B decoder's steps on each GPU. Per GPU: model TFLOP/s at or
above the floor (spec `floors.goodput_model_tflops`, else the catalog's `goodput_floor_tflops` with its source), the
loss finite and falling, MFU (model TFLOP/s over the SKU's dense bf16 peak) and the loss curve in the result.

The loss must fall by LOSS_DROP_MIN nats between the mean of the first and of the last five steps: on the lent H200
the probe's 35 steps fell 1.29 (10.68 -> 9.39; docs/examples/h200x1/issue30), issue 30's reference 10.56 -> 8.80.
The quick profile runs no training step: n/a there (reported, not passed). Missing data is an error.

With 2+ GPUs the probe also trains the model data-parallel over NCCL (`goodput.ddp`) with NCCL_DEBUG=INFO and
records the transports NCCL chose (probe/nccl_debug.py). Inside a node every connection must ride P2P (NVLink, or
PCIe peer access where the shape has no NVLink) or NVLS: NET/Socket (TCP) or SHM (host memory) is a silent fallback
and fails, naming the transport and a line; NVIDIA's readiness engine once measured 3 GB/s instead of 489 on such a
fallback (issue 30). No channel line recorded is an error."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import left_out
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR
GATE = "training_goodput"
LOSS_DROP_MIN = 0.5  # nats, mean of the first 5 steps minus mean of the last 5 (H200: 1.29 measured)


def _expected(exp: Expectations) -> Expected | None:
    if exp.spec.floors.goodput_model_tflops is not None:
        return Expected(floor=exp.spec.floors.goodput_model_tflops, source="spec")
    if exp.sku.goodput_floor_tflops is None:
        return None
    return Expected(floor=exp.sku.goodput_floor_tflops, source=f"catalog: {exp.sku.name} ({exp.sku.goodput_source})")


def training_goodput(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    g = doc.get("goodput")
    if g and not g.get("ran", True):
        return [exp.not_applicable(GATE, g.get("reason") or "the profile runs no training steps")]
    if not g or not g.get("present"):
        why = (g or {}).get("reason") or "no goodput section in the probe document (probe without the goodput step)"
        return [exp.result(GATE, E, f"no training goodput figures: {why}", evidence="goodput")]
    expected = _expected(exp)
    if expected is None:
        return [exp.result(GATE, E, f"no goodput floor for {exp.sku.name}: set "
                           "certification.floors.goodput_model_tflops", unit="TFLOP/s")]
    rows = {r["index"]: r for r in g.get("gpus") or []}
    out: list[GateResult] = []
    missing = [i for i, _ in left_out(doc, set(rows), exp.gpus)]  # nvidia-smi's list and the inventory's count
    if missing:
        out.append(exp.result(GATE, E, f"no training run on GPU {', '.join(map(str, missing))} of {exp.gpus}",
                              expected=expected, evidence="raw.goodput"))
    peak = exp.sku.bf16_dense_tflops
    if exp.gpus >= 2:
        out.append(_transport(g.get("ddp"), exp))
    for i, r in sorted(rows.items()):
        tf, loss = r.get("model_tflops"), list(r.get("loss") or [])
        mfu = round(100 * tf / peak, 1) if tf and peak else None
        first = fmean(loss[:5]) if len(loss) >= 10 else None
        last = fmean(loss[-5:]) if len(loss) >= 10 else None
        m = {"model_tflops": tf, "mfu_pct": mfu, "tokens_per_s": r.get("tokens_per_s"), "params": r.get("params"),
             "tokens_per_step": r.get("tokens_per_step"), "steps": r.get("steps"), "loss": loss,
             "loss_drop": round(first - last, 3) if first is not None and last is not None else None,
             "peak_mem_gib": r.get("peak_mem_gib")}
        kw: dict[str, Any] = {"gpu": i, "measured": m, "expected": expected, "unit": "TFLOP/s",
                              "evidence": "raw.goodput"}
        if tf is None or first is None or last is None:
            out.append(exp.result(GATE, E, f"GPU {i}: training run incomplete ({len(loss)} losses, model TFLOP/s "
                                  f"{tf})", **kw))
        elif not r.get("loss_finite", True) or any(v != v for v in loss):
            out.append(exp.result(GATE, F, f"GPU {i}: loss not finite during training: {loss[-5:]}", **kw))
        elif first - last < LOSS_DROP_MIN:
            out.append(exp.result(GATE, F, f"GPU {i}: loss did not fall ({first:.2f} -> {last:.2f}, mean of the "
                                  f"first and last 5 of {len(loss)} steps; at least {LOSS_DROP_MIN} expected)", **kw))
        elif tf < (expected.floor or 0):
            out.append(exp.result(GATE, F, f"GPU {i}: {tf:.1f} model TFLOP/s ({mfu}% MFU of {peak:g}) is below "
                                  f"{expected.floor:g}", **kw))
        else:
            out.append(exp.result(GATE, P, f"GPU {i}: {tf:.1f} model TFLOP/s, {mfu}% MFU of {peak:g}, loss "
                                  f"{first:.2f} -> {last:.2f} in {len(loss)} steps", **kw))
    return out


INTRA_NODE_OK = ("P2P", "NVLS")


def _transport(ddp: dict[str, Any] | None, exp: Expectations) -> GateResult:
    """The data-parallel run's NCCL transports: P2P/NVLS only inside a node."""
    if not ddp or not ddp.get("present"):
        why = (ddp or {}).get("reason") or "no data-parallel run recorded"
        return exp.result(GATE, E, f"data-parallel training over {exp.gpus} GPUs: {why}", evidence="goodput.ddp")
    t = ddp.get("transports") or {}
    fams = t.get("families") or {}
    m = {"world": ddp.get("world"), "transports": fams, "model_tflops_per_gpu": ddp.get("model_tflops_per_gpu"),
         "loss": ddp.get("loss")}
    kw: dict[str, Any] = {"measured": m, "evidence": "raw.goodput (ddp.nccl_debug_tail)",
                          "expected": Expected(equals=list(INTRA_NODE_OK), source="NCCL transports inside a node: "
                                               "NVLink/PCIe peer access or NVLS, never sockets or host memory")}
    if not t.get("connections"):
        return exp.result(GATE, E, "data-parallel run: no NCCL channel line recorded (NCCL_DEBUG=INFO): the "
                          "transport NCCL chose is unknown", **kw)
    bad = {f: n for f, n in fams.items() if f not in INTRA_NODE_OK}
    if bad:
        first = next(iter(bad))
        return exp.result(GATE, F, f"data-parallel run over {ddp.get('world')} GPUs: NCCL fell back to "
                          + ", ".join(f"{f} ({n} connections)" for f, n in bad.items())
                          + f" instead of NVLink/P2P — e.g. {(t.get('examples') or {}).get(first, '')}", **kw)
    return exp.result(GATE, P, f"data-parallel run over {ddp.get('world')} GPUs: NCCL chose "
                      + ", ".join(f"{f} x{n}" for f, n in fams.items()), **kw)
