"""What one batch of a BERT-small embedding model costs on a GPU, per batch size: the figure the simulated Triton's
fixed-cost model (`--fixed-cost-ms`, `--per-item-us`) stands for, measured.

The encoder has bge-small-en-v1.5's shape (BertModel: 12 layers, hidden 384, 12 heads, FFN 1536, vocabulary
30522; its config.json) with random weights: the cost of a forward pass depends on the shape, not on the
weights. fp16, torch.inference_mode, CUDA-event timing, median of --iters after --warmup per batch size. A
least-squares line through (batch, ms) gives the fixed cost per execution and the cost per item; the record
shows how well a line fits (the largest residual).

    python benchmarks/embedding_batch_cost.py --out OUT [--seq-len 128] [--batches 1 2 4 ... 128]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

HIDDEN, LAYERS, HEADS, FFN, VOCAB, MAX_POS = 384, 12, 12, 1536, 30522, 512


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, HIDDEN)
        self.positions = nn.Embedding(MAX_POS, HIDDEN)
        self.types = nn.Embedding(2, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, FFN, activation="gelu", batch_first=True,
                                           norm_first=False, dropout=0.0)
        self.layers = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.norm(self.tokens(ids) + self.positions(pos) + self.types(types))
        return self.layers(x, src_key_padding_mask=mask == 0)  # last_hidden_state [batch, seq, 384]


def _time_ms(fn: object, iters: int, cuda: bool) -> list[float]:
    out = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()  # type: ignore[operator]
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            out.append((time.perf_counter() - t0) * 1000.0)
    return out


def fit(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(fixed ms, per-item us, largest residual ms) of the least-squares line ms = fixed + per_item * batch."""
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(m for _, m in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (m - my) for b, m in points) / sxx if sxx else 0.0
    fixed = my - slope * mx
    worst = max(abs(m - (fixed + slope * b)) for b, m in points)
    return fixed, slope * 1000.0, worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (a check of the script, not a figure)")
    a = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not a.cpu
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = torch.float16 if cuda else torch.float32
    torch.manual_seed(0)
    model = Encoder().to(dev, dtype).eval()
    rows = []
    with torch.inference_mode():
        for batch in a.batches:
            ids = torch.randint(1000, 30000, (batch, a.seq_len), device=dev)
            mask = torch.ones_like(ids)
            types = torch.zeros_like(ids)

            def step(ids: torch.Tensor = ids, mask: torch.Tensor = mask, types: torch.Tensor = types) -> None:
                model(ids, mask, types)

            _time_ms(step, a.warmup, cuda)
            times = _time_ms(step, a.iters, cuda)
            rows.append({"batch": batch, "median_ms": statistics.median(times), "p90_ms":
                         statistics.quantiles(times, n=10)[-1], "per_item_ms": statistics.median(times) / batch})
    fixed, per_item_us, worst = fit([(r["batch"], r["median_ms"]) for r in rows])
    result = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
        "dtype": str(dtype), "seq_len": a.seq_len, "iters": a.iters, "rows": rows,
        "fit": {"fixed_ms": round(fixed, 3), "per_item_us": round(per_item_us, 1),
                "worst_residual_ms": round(worst, 3)},
        "model": f"BertModel shape of bge-small-en-v1.5: {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, FFN {FFN}",
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "embedding_batch_cost.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# One batch of a bge-small-shaped encoder on {result['device']} ({dtype}, seq {a.seq_len})", "",
             "| batch | median ms | p90 ms | ms per item |", "|---:|---:|---:|---:|"]
    lines += [f"| {r['batch']} | {r['median_ms']:.3f} | {r['p90_ms']:.3f} | {r['per_item_ms']:.4f} |" for r in rows]
    lines += ["", f"Least-squares line: {fixed:.3f} ms per execution + {per_item_us:.1f} us per item "
                  f"(largest residual {worst:.3f} ms)."]
    (a.out / "embedding_batch_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
