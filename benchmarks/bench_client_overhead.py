"""How fast can gridready's load client drive an endpoint on this machine while its timing stays honest?

Starts the simulated engine (a separate process, 127.0.0.1) and drives it with Poisson arrivals at rising
rates. For every request the client's TTFT is compared with the TTFT the engine recorded (token write time
minus request receipt, /gridready/requests): the difference is the client's timing error (its own overhead
plus two process wakeups on loopback). Also reported: send lag (actual minus scheduled send time) and the
achieved rate. The answer is the highest rate whose timing error (p50, p90, p99 reported) stays under 1 ms while the
achieved rate keeps within 10 % of the target.

    .venv/bin/python benchmarks/bench_client_overhead.py [--rates 25 50 100 200 400 800] [--seconds 3]

Bounded: at most seconds x rate requests per level (capped at 4000), levels run one after another.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready.bench.client import run_level  # noqa: E402
from gridready.bench.http import Url  # noqa: E402
from gridready.bench.protocols import Api  # noqa: E402
from gridready.bench.stats import percentile  # noqa: E402
from gridready.bench.workload import Level, Workload  # noqa: E402


def start_engine(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    pf = tmp / "ports.json"
    proc = subprocess.Popen([sys.executable, "-m", "sandbox.engine", "--model", "m", "--host", "127.0.0.1",
                             "--port", "0", "--port-file", str(pf), "--ttft-ms", "10", "--itl-ms", "5",
                             "--prefill-us-per-token", "0", "--batch-slowdown", "0", "--max-num-seqs", "4096",
                             "--hardware-profile", "none",
                             "--log-level", "WARNING"], cwd=REPO, stdout=subprocess.DEVNULL)
    for _ in range(500):
        if pf.exists():
            return proc, f"http://127.0.0.1:{json.loads(pf.read_text())['http']}"
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError("engine did not start")


def server_ttft(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/gridready/requests", timeout=30) as r:
        return {x["request_id"]: x["ttft_s"] for x in json.loads(r.read()) if x["ttft_s"] is not None}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, rate: float, seconds: float, engine_pid: int) -> dict[str, float]:
    n = min(4000, int(rate * seconds) + 1)
    wl = Workload(request_rate=[rate], num_prompts=n, duration_s=seconds, input_len=8, output_len=4, warmup=2,
                  seed=int(rate))
    tag = f"r{rate:g}-"
    cpu0, eng0 = time.process_time(), cpu_seconds(engine_pid)
    run = asyncio.run(run_level(Url.parse(url), Api.OPENAI_COMPLETIONS, "m", Level(kind="rate", value=rate), wl,
                                tag=tag))
    client_cpu, engine_cpu = time.process_time() - cpu0, cpu_seconds(engine_pid) - eng0
    srv = server_ttft(url)
    ok = [r for r in run.results if r.ok and r.ttft is not None and r.request_id in srv]
    err_ms = [(r.ttft - srv[r.request_id]) * 1000 for r in ok]  # type: ignore[operator]
    lag_ms = [max(0.0, r.sent - r.scheduled) * 1000 for r in run.results]
    span = max((r.sent for r in run.results), default=0) - min((r.sent for r in run.results), default=0)
    return {"rate": rate, "requests": len(run.results), "failed": len(run.results) - len(ok),
            "achieved_rate": (len(run.results) - 1) / span if span > 0 else 0.0,
            "ttft_err_p50_ms": percentile(err_ms, 50), "ttft_err_p90_ms": percentile(err_ms, 90),
            "ttft_err_p99_ms": percentile(err_ms, 99),
            "send_lag_p50_ms": percentile(lag_ms, 50), "send_lag_p99_ms": percentile(lag_ms, 99),
            # CPU per request does not depend on what else runs: the load-independent overhead figure
            "client_cpu_us_per_request": client_cpu / max(1, len(run.results) + wl.warmup) * 1e6,
            "engine_cpu_us_per_request": engine_cpu / max(1, len(run.results) + wl.warmup) * 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[25, 50, 100, 200, 400, 800])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--limit-ms", type=float, default=1.0, help="timing error bound (p99)")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_engine(Path(tmp))
        try:
            rows = []
            print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
            print(f"{'rate/s':>7} {'achieved':>9} {'reqs':>5} {'fail':>4} {'err p50':>8} {'err p90':>8} {'err p99':>8} "
                  f"{'lag p50':>8} {'lag p99':>8}  (ms) {'client':>7} {'engine':>7} (CPU us/request)")
            for rate in a.rates:
                row = measure(url, rate, a.seconds, proc.pid)
                rows.append(row)
                print(f"{row['rate']:>7g} {row['achieved_rate']:>9.1f} {row['requests']:>5} {row['failed']:>4} "
                      f"{row['ttft_err_p50_ms']:>8.3f} {row['ttft_err_p90_ms']:>8.3f} {row['ttft_err_p99_ms']:>8.3f} "
                      f"{row['send_lag_p50_ms']:>8.3f} {row['send_lag_p99_ms']:>8.3f}       "
                      f"{row['client_cpu_us_per_request']:>7.0f} {row['engine_cpu_us_per_request']:>7.0f}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    best: dict[str, float | None] = {}
    for q in ("p50", "p90", "p99"):
        good = [r["rate"] for r in rows if r[f"ttft_err_{q}_ms"] < a.limit_ms and r["failed"] == 0
                and r["achieved_rate"] >= 0.9 * r["rate"]]
        best[q] = max(good, default=None)
        print(f"highest rate with {q} timing error < {a.limit_ms:g} ms: "
              f"{best[q] if best[q] is not None else 'none'} req/s")
    if a.out:
        a.out.write_text(json.dumps({"rows": rows, "best_rate": best, "limit_ms": a.limit_ms}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
