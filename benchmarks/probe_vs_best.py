"""Is each figure of gridready's node probe within 3% of the best method, measured side by side in one run?

On a GPU machine: runs the probe's torch benchmarks (gridready/probe/torch_bench.py, with a certification
profile's sizes and trials) and, on the same GPUs in the same process, a reference per figure that spends far more
time to find the best the hardware gives:
  - bf16 / fp8 GEMM: the same sizes, best of 10 runs of 50 calls (the reference_probe.json method of
    ../shared/fixtures/h200x1, 5 x 20, doubled);
  - HBM copy: 8 GiB buffers, best of 10 runs of 20 copies (bytes read + written);
  - host<->device: 2 GiB pinned, best of 10 runs of 10 copies each way;
  - peer copy (2+ GPUs): best of 10 runs of 20 copies of 2 GiB per ordered pair;
  - busbw of every collective (2+ GPUs, where nccl-tests' `<collective>_perf` is found: all_reduce, all_gather,
    reduce_scatter, alltoall, sendrecv): nccl-tests' validated busbw (the one parser) against the probe's
    torch.distributed sweep of the same collective at every size >= 512 MiB (NCCL_NVLS_ENABLE=0 as the machines need).
Prints one JSON document (figures, ratios probe/best, within_3pct) and writes a Markdown table with --md.

    python3 benchmarks/probe_vs_best.py --profile quick --out probe_vs_best.json --md probe_vs_best.md

`--goodput` compares the training goodput probe (gridready/probe/goodput.py) with an independent implementation of
the same model, side by side on each GPU: PyTorch's own nn.TransformerEncoderLayer (norm_first, GELU 4d MLP, no
biases, causal), the same tied embedding, data, optimizer, steps and FLOP count; goal probe/reference >= 0.95 of
model TFLOP/s. `--goodput-only` skips the micro-benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridready.probe import nccl_tests, torch_bench
from gridready.probe.profiles import PROFILES, GiB, MiB

TOLERANCE = 0.03
GOODPUT_GOAL = 0.95


def reference_decoder(torch: Any, cfg: dict[str, int], dev: int) -> Any:
    """The goodput probe's model written with PyTorch's own transformer layer (an independent implementation)."""
    nn = torch.nn
    d = cfg["d"]

    class Ref(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(cfg["vocab"], d)
            layer = nn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True, bias=False)
            self.enc = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d, bias=False)
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx: Any) -> Any:
            s = idx.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(s, device=idx.device, dtype=torch.bfloat16)
            x = self.enc(self.emb(idx), mask=mask, is_causal=True)
            return nn.functional.linear(self.norm(x), self.emb.weight)

    return Ref().to(device=dev, dtype=torch.bfloat16)


def goodput_rows(steps: int) -> list[dict[str, Any]]:
    import torch

    from gridready.probe import goodput

    rows = []
    for dev in range(torch.cuda.device_count()):
        probe = goodput.train(dev, steps)
        ref = goodput.train(dev, steps, model_builder=reference_decoder)
        ratio = probe["model_tflops"] / ref["model_tflops"] if probe["model_tflops"] and ref["model_tflops"] else None
        rows.append({"gpu": dev, "figure": "goodput_model_tflops", "probe": probe["model_tflops"],
                     "best": ref["model_tflops"], "ratio": ratio, "goal": GOODPUT_GOAL,
                     "within_3pct": ratio is not None and ratio >= GOODPUT_GOAL,
                     "best_source": "nn.TransformerEncoderLayer (same model, data, optimizer)",
                     "probe_run": probe, "reference_run": ref})
    return rows


def reference(dev: int, prof: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"bf16_gemm_tflops": {}, "fp8_gemm_tflops": {}}
    for n in prof["gemm_sizes"]:
        out["bf16_gemm_tflops"][str(n)] = torch_bench.gemm_bf16(dev, n, 50, 10)
    for n in prof["fp8_sizes"]:
        out["fp8_gemm_tflops"][str(n)] = torch_bench.gemm_fp8(dev, n, 50, 10)
    out["hbm_copy_tbps"] = torch_bench.hbm_copy(dev, 8 * GiB, 20, 10)
    out.update(torch_bench.host_copies(dev, 2 * GiB, 10, None, 10))
    return out


def _pairs(probe: dict[str, Any], ref: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    rows: list[tuple[str, float | None, float | None]] = []
    for kind in ("bf16_gemm_tflops", "fp8_gemm_tflops"):
        for size, val in probe[kind].items():
            rows.append((f"{kind}[{size}]", val, ref[kind].get(size)))
    for key in ("hbm_copy_tbps", "h2d_gbps", "d2h_gbps"):
        rows.append((key, probe.get(key), ref.get(key)))
    return rows


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


def nccl_tests_busbw(collective: str, world: int, max_bytes: int, raw_dir: Path | None) -> dict[int, float]:
    """<collective>_perf -g <world> (one process): validated busbw per size, read by the one nccl-tests parser."""
    binary = nccl_tests.find_binary(f"{collective}_perf", os.environ.get("NCCL_TESTS_DIR"))
    if binary is None:
        return {}
    res = subprocess.run([binary, "-b", str(512 * MiB), "-e", str(max_bytes), "-f", "2", "-g", str(world),
                          "-n", "20", "-w", "5"], capture_output=True, text=True, timeout=600, check=False,
                         env={**os.environ, "NCCL_NVLS_ENABLE": "0"})
    if raw_dir is not None:
        (raw_dir / f"{collective}_perf.txt").write_text(res.stdout)
    parsed = nccl_tests.parse_text(res.stdout)
    return {r["bytes"]: bw for r in parsed["rows"] if (bw := nccl_tests.validated_busbw(r)) is not None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick", choices=sorted(PROFILES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--raw-dir", type=Path, help="keep each <collective>_perf output here (2+ GPUs)")
    ap.add_argument("--goodput", action="store_true", help="also the training goodput probe vs a reference")
    ap.add_argument("--goodput-only", action="store_true", help="only the training goodput comparison")
    ap.add_argument("--goodput-steps", type=int, default=35)
    args = ap.parse_args()
    import torch

    prof = PROFILES[args.profile]
    world = torch.cuda.device_count()
    t0 = time.monotonic()
    errors: list[dict[str, str]] = []
    probe = torch_bench.run_all(prof, None, errors) if not args.goodput_only else {"gpus": [], "peer": []}
    probe_s = round(time.monotonic() - t0, 1)
    rows: list[dict[str, Any]] = []
    if args.goodput or args.goodput_only:
        rows += goodput_rows(args.goodput_steps)
    for g in probe["gpus"]:
        ref = reference(g["index"], prof)
        for name, got, best in _pairs(g, ref):
            ratio = got / best if got and best else None
            rows.append({"gpu": g["index"], "figure": name, "probe": got, "best": best, "ratio": ratio,
                         "within_3pct": ratio is not None and ratio >= 1 - TOLERANCE})
    for p in probe["peer"]:
        best = torch_bench.peer_copy(p["src"], p["dst"], 2 * GiB, 20, 10)
        ratio = p["gbps"] / best if p.get("gbps") and best else None
        rows.append({"gpu": f"{p['src']}->{p['dst']}", "figure": "peer_gbps", "probe": p.get("gbps"), "best": best,
                     "ratio": ratio, "within_3pct": ratio is not None and ratio >= 1 - TOLERANCE})
    for coll in COLLECTIVES if world >= 2 and not args.goodput_only else ():
        from gridready.probe import torch_allreduce

        ref_bw = nccl_tests_busbw(coll, world, 8 * GiB, args.raw_dir)
        sizes = sorted(ref_bw) or [512 * MiB, GiB, 2 * GiB, 4 * GiB, 8 * GiB]
        sweep = torch_allreduce.sweep(world, sizes, prof["ar_iters"], prof["ar_warmup"], 2,
                                      {"NCCL_NVLS_ENABLE": "0"}, 600.0, collective=coll)
        for r in sweep["sizes"]:
            best = ref_bw.get(r["bytes"])
            ratio = r["busbw_gbps"] / best if best else None
            rows.append({"gpu": "all", "figure": f"{coll}_busbw_gbps[{r['bytes'] >> 20} MiB]",
                         "probe": r["busbw_gbps"], "best": best, "ratio": ratio, "wrong": sweep["wrong"],
                         "within_3pct": ratio is not None and ratio >= 1 - TOLERANCE, "best_source": "nccl-tests"})
    doc = {"schema": "gridready.probe-vs-best/1", "profile": args.profile, "gpus": world,
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "probe_wall_s": probe_s,
           "tolerance": TOLERANCE, "rows": rows, "errors": errors,
           "all_within_3pct": all(r["within_3pct"] for r in rows if r["best"] is not None)}
    text = json.dumps(doc, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    if args.md:
        lines = [f"probe ({args.profile} profile, {probe_s} s) vs best method on {world} x {doc['device']}", "",
                 "| GPU | figure | probe | best | probe/best | within 3% |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['gpu']} | {r['figure']} | {r['probe']:.2f} | "
                  + (f"{r['best']:.2f} | {r['ratio']:.3f} | {'yes' if r['within_3pct'] else 'NO'} |"
                     if r["best"] else "- | - | no reference |") for r in rows]
        args.md.write_text("\n".join(lines) + "\n")
    print(text)
    return 0 if doc["all_within_3pct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
