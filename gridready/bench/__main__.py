"""`python -m gridready.bench run --url ... --model ...`: readiness, smoke, benchmark and SLO gate against any
endpoint, without an inventory. Exit 0 pass, 3 SLO failed (named on stderr), 2 bad usage."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from gridready.bench.endpoint import Endpoint
from gridready.bench.outputs import write_tier_reports
from gridready.bench.protocols import Api
from gridready.bench.verify import verify_tier
from gridready.bench.workload import Workload
from gridready.exitcodes import ExitCode
from gridready.spec.serving import Slo, Tier


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m gridready.bench", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="verify one endpoint: readiness, smoke, benchmark, SLO gate")
    r.add_argument("--url", required=True, help="base URL, e.g. http://10.77.0.11:8000")
    r.add_argument("--model", required=True, help="served model name")
    r.add_argument("--api", choices=[a.value for a in Api if a is not Api.KSERVE_INFER],
                   default=Api.OPENAI_CHAT.value,
                   help="LLM protocols; a fixed-cost tier's tensors come from its cluster.yml (invoke bench)")
    r.add_argument("--tier", default="adhoc", help="a name for the report")
    r.add_argument("--gpus", type=int, default=1)
    load = r.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, nargs="+", help="fixed-concurrency levels (default 1 4 16)")
    load.add_argument("--rate", type=float, nargs="+", help="Poisson request rates, req/s")
    r.add_argument("--max-concurrency", type=int)
    r.add_argument("--num-prompts", type=int, default=200)
    r.add_argument("--duration", type=float, default=20.0, help="seconds per level at most")
    r.add_argument("--input-len", type=int, default=128)
    r.add_argument("--output-len", type=int, default=64)
    r.add_argument("--dataset", type=Path)
    r.add_argument("--ttft-ms-p99", type=float)
    r.add_argument("--tpot-ms-p99", type=float)
    r.add_argument("--e2e-ms-p99", type=float)
    r.add_argument("--goodput-min", type=float, default=0.9)
    r.add_argument("--ready-timeout", type=float, default=60.0)
    r.add_argument("--out", type=Path, help="write <out>/bench/<tier>.json, junit.xml, gridready_bench.prom")
    r.add_argument("--customer", default="adhoc", help="customer label of the Prometheus metrics")
    r.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        api = Api(a.api)
        engine = "triton-trtllm" if api is Api.TRITON_GENERATE else "vllm"
        slo = Slo(ttft_ms_p99=a.ttft_ms_p99, tpot_ms_p99=a.tpot_ms_p99, e2e_ms_p99=a.e2e_ms_p99,
                  goodput_min=a.goodput_min)
        tier = Tier.model_validate({"name": a.tier, "engine": engine, "model": {"local_path": a.model},
                                    "served_name": a.model, "slo": slo})
        wl = Workload(api=api, concurrency=a.concurrency or [1, 4, 16], request_rate=a.rate,
                      max_concurrency=a.max_concurrency, num_prompts=a.num_prompts, duration_s=a.duration,
                      input_len=a.input_len, output_len=a.output_len, dataset=a.dataset)
        ep = Endpoint(url=a.url, api=api, model=a.model)
    except (ValidationError, ValueError) as err:
        print(f"gridready.bench: invalid arguments: {err}", file=sys.stderr)
        return ExitCode.INVALID
    report = verify_tier(ep, tier, wl, gpus=a.gpus, ready_timeout_s=a.ready_timeout,
                         progress=lambda m: print(m, file=sys.stderr))
    if a.out:
        write_tier_reports(a.out, [report], a.customer)
    if a.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    for lv in report.levels:
        print(f"{lv.level.label:>10}: {lv.completed} ok {lv.failed} failed | TTFT p50 {lv.ttft.p50 or 0:.1f} "
              f"p99 {lv.ttft.p99 or 0:.1f} ms | TPOT p50 {lv.tpot.p50 or 0:.1f} p99 {lv.tpot.p99 or 0:.1f} ms | "
              f"{lv.output_throughput:.1f} tok/s | goodput {100 * (lv.goodput or 0):.1f}%", file=sys.stderr)
    print(report.gate.message, file=sys.stderr)
    return int(report.exit_code)


if __name__ == "__main__":
    sys.exit(main())
