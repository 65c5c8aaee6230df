"""Router candidates side by side: what each adds to a request, how many requests/s it passes, what CPU it burns.

One run, one machine, the same simulated tier behind every candidate: two replicas of gridready's simulated engine
(sandbox.engine, the engine the sandbox fleet runs on its hosts, here on 127.0.0.1) with 5 ms TTFT and 1 ms ITL.
Candidates, each started, measured and stopped in turn:
- direct: the client picks a replica itself (the baseline)
- litellm: LiteLLM's proxy as the gridready_router role runs it today (gridready.serving.router.litellm_config,
  the custom_auth key hook, Prometheus callback, background health checks, one worker)
- litellm-tuned: the same routes and key hook, `--tuned-workers` workers (default one per core), no Prometheus
  callback or background health checks, no spend or error logs, uvloop (in the lock: uvicorn's loop "auto")
- haproxy: HAProxy from the OS's package (`haproxy` on PATH) as the gridready_router role runs it with
  `serving.router.proxy: haproxy` (gridready.serving.router_haproxy: keys by SHA-256 map, routing by the body's
  model, per-key stick table, health checks), master-worker mode, its default threads (one per core)
- vllm-router / sglang-router: the Rust routers from PyPI (wheels `vllm-router`, `sglang-router`), cache_aware
  policy, their `--api-key` check on
Per candidate:
- added latency: `pairs` interleaved pairs of a 1-token chat completion, direct then through the candidate, on
  keep-alive connections (gridready.bench.router_overhead.measure, the measurement serve records in data.router);
- saturation: a closed loop of `concurrency` clients for `seconds`: requests/s answered 200, and the candidate's
  CPU (utime + stime of every process in its session, from /proc) per 1,000 requests/s.
Everything shares the machine's cores (engines, candidate, load client): compare the candidates' ratios within one
run, not absolute numbers across machines. Results: JSON on stdout (and --out), a Markdown table on stderr.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/router_overhead.py --rust-venv /tmp/router-venv \
        [--pairs 200] [--seconds 8] [--concurrency 32] [--only litellm-tuned vllm-router] [--out result.json]

`--rust-venv`: a venv with `pip install vllm-router==0.1.17 sglang-router==0.3.2` (exact pins, PyPI wheels);
LiteLLM comes from the role's hash-pinned lock (sandbox.litellm_venv, built once per lock).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready.bench.http import Connection, Url  # noqa: E402
from gridready.bench.router_overhead import measure  # noqa: E402
from gridready.serving import router, router_haproxy  # noqa: E402
from gridready.spec.router import Route, RouterKey, RouterSpec, RouteTarget  # noqa: E402
from sandbox import litellm_venv  # noqa: E402
from tests.router.harness import Proc, free_port, wait_http  # noqa: E402

MODEL = "llama-sim"
TIER = "hot"
CANDIDATES = ("direct", "haproxy", "litellm", "litellm-tuned", "vllm-router", "sglang-router")
BODY = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}).encode()
CLK_TCK = os.sysconf("SC_CLK_TCK")


def session_cpu_s(sid: int) -> float:
    """utime + stime (seconds) of every live process of session `sid` (the candidate and its workers)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the command: state ppid pgrp session ...
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def start(workdir: Path, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Proc:
    log = workdir / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                cwd=workdir, start_new_session=True)
    return Proc(proc, log)


def start_engines(workdir: Path, n: int, flags: list[str] | None = None) -> tuple[list[Proc], list[str]]:
    """`n` simulated engines on free loopback ports (5 ms TTFT, 1 ms ITL unless `flags` say otherwise)."""
    procs, urls = [], []
    for i in range(n):
        port = free_port()
        procs.append(start(workdir, f"engine-{i}", [
            sys.executable, "-m", "sandbox.engine", "--model", MODEL, "--host", "127.0.0.1", "--port", str(port),
            "--hardware-profile", "none", "--ttft-ms", "5", "--itl-ms", "1", "--seed", str(i), *(flags or [])],
            {"PYTHONPATH": str(REPO)}))
        urls.append(f"http://127.0.0.1:{port}")
    for url in urls:
        wait_http(f"{url}/v1/models", 60)
    return procs, urls


def litellm_config(urls: list[str], tuned: bool) -> dict[str, Any]:
    spec = RouterSpec(enabled=True, keys=[{"name": "bench", "vault_var": "k"}])
    ups = {TIER: [router.Upstream(TIER, f"{u}/v1", MODEL) for u in urls]}
    config = router.litellm_config(spec, [Route(model=MODEL, targets=[RouteTarget(tier=TIER)])], ups)
    if tuned:
        config["litellm_settings"] = {"callbacks": [], "set_verbose": False, "json_logs": False}
        config["general_settings"] |= {"background_health_checks": False, "disable_spend_logs": True,
                                       "disable_error_logs": True}
        config["router_settings"]["enable_health_check_routing"] = False
    return config


def start_litellm(workdir: Path, urls: list[str], key: str, tuned: bool, args_workers: int = 1) -> tuple[Proc, str]:
    exe = litellm_venv.ensure_venv()
    hook = REPO / "roles" / "gridready_router" / "files" / "gridready_router_auth.py"
    shutil.copy(hook, workdir / hook.name)
    (workdir / "keys.json").write_text(json.dumps([{"name": "bench", "sha256": hashlib.sha256(key.encode()).hexdigest(),
                                                    "rpm_limit": None, "tpm_limit": None}]))
    name = "litellm-tuned" if tuned else "litellm"
    (workdir / f"{name}.yaml").write_text(yaml.safe_dump(litellm_config(urls, tuned)))
    port = free_port()
    workers = str(args_workers) if tuned else "1"
    env = {"PYTHONPATH": str(workdir), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "GRIDREADY_ROUTER_KEYS_FILE": str(workdir / "keys.json"),
           router.MASTER_KEY_ENV: "sk-" + secrets.token_hex(8)}
    proc = start(workdir, name, [str(exe), "--config", str(workdir / f"{name}.yaml"), "--host", "127.0.0.1",
                                 "--port", str(port), "--num_workers", workers], env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health/liveliness", 900)  # its imports take minutes on a loaded machine
    except TimeoutError:
        proc.stop()
        raise
    return proc, url


def start_haproxy(workdir: Path, urls: list[str], key: str) -> tuple[Proc, str]:
    exe = shutil.which("haproxy")
    if not exe:
        raise TimeoutError("no haproxy binary on PATH (apt-get install haproxy)")
    spec = RouterSpec(enabled=True, proxy="haproxy", keys=[RouterKey(name="bench", vault_var="k")])
    ups = {TIER: [router.Upstream(TIER, f"{u}/v1", MODEL) for u in urls]}
    port = free_port()
    files = router_haproxy.render(spec, [Route(model=MODEL, targets=[RouteTarget(tier=TIER)])], ups,
                                  bind="127.0.0.1", port=port, directory=str(workdir))
    (workdir / router_haproxy.KEYS_MAP).write_text(router_haproxy.keys_map({"bench": key}))
    (workdir / router_haproxy.MODELS_MAP).write_text(files.models_map)
    (workdir / router_haproxy.MODELS_JSON).write_text(files.models_json)
    (workdir / "haproxy.cfg").write_text(files.config)
    proc = start(workdir, "haproxy", [exe, "-W", "-db", "-f", str(workdir / "haproxy.cfg")])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}{router_haproxy.LIVE_PATH}", 30)
    except TimeoutError:
        proc.stop()
        raise
    return proc, url


def start_rust(workdir: Path, venv: Path, name: str, urls: list[str], key: str) -> tuple[Proc, str]:
    port = free_port()
    cmd = ([str(venv / "bin" / "vllm-router")] if name == "vllm-router"
           else [str(venv / "bin" / "sglang-router"), "launch"])
    log_level = "warning" if name == "vllm-router" else "warn"
    proc = start(workdir, name, [*cmd, "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls,
                                 "--policy", "cache_aware", "--api-key", key, "--log-level", log_level])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/v1/models", 120, {"Authorization": f"Bearer {key}"})
    except TimeoutError:
        proc.stop()
        raise
    return proc, url


async def saturate(urls: list[str], key: str | None, concurrency: int, seconds: float) -> tuple[int, int]:
    """(answered 200, failed) by `concurrency` keep-alive clients over `urls` (client i on urls[i % n])."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
    stop = time.monotonic() + seconds
    counts = [0, 0]

    async def client(url: str) -> None:
        conn = Connection(Url.parse(url))
        try:
            while time.monotonic() < stop:
                try:
                    resp = await conn.request("POST", "/v1/chat/completions", BODY, headers)
                    await conn.read(resp)
                    counts[0 if resp.status == 200 else 1] += 1
                except OSError:
                    counts[1] += 1
                    conn.close()
                    conn = Connection(Url.parse(url))
        finally:
            conn.close()

    await asyncio.gather(*(client(urls[i % len(urls)]) for i in range(concurrency)))
    return counts[0], counts[1]


def measure_candidate(name: str, url: str | None, proc: Proc | None, engines: list[str], key: str,
                      args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"candidate": name}
    if url is not None:
        report = asyncio.run(measure(engines[0], url, MODEL, key, n=args.pairs))
        out["added"] = report.model_dump()
    targets = engines if url is None else [url]
    asyncio.run(saturate(targets, None if url is None else key, args.concurrency, 1.0))  # warm the connections
    sid = proc.proc.pid if proc else 0
    cpu0 = session_cpu_s(sid) if proc else 0.0
    t0 = time.monotonic()
    ok, failed = asyncio.run(saturate(targets, None if url is None else key, args.concurrency, args.seconds))
    wall = time.monotonic() - t0
    rps = ok / wall
    out["saturation"] = {"concurrency": args.concurrency, "seconds": round(wall, 1), "ok": ok, "failed": failed,
                         "rps": round(rps, 1)}
    if proc:
        cores = (session_cpu_s(sid) - cpu0) / wall
        out["saturation"] |= {"router_cores": round(cores, 2),
                              "router_cores_per_1k_rps": round(cores / (rps / 1000), 2) if rps else None}
    return out


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| candidate | direct p50 / p99 ms | routed p50 / p99 ms | added p50 / p99 ms | req/s at saturation "
            "(failed) | router cores | cores per 1k req/s |", "|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['candidate']} | did not start: {r['error']} | | | | | |")
            continue
        a, s = r.get("added"), r["saturation"]
        lat = (f"{a['direct']['p50_ms']} / {a['direct']['p99_ms']} | {a['routed']['p50_ms']} / {a['routed']['p99_ms']}"
               f" | **{a['added_p50_ms']} / {a['added_p99_ms']}**") if a else "- | - | -"
        rows.append(f"| {r['candidate']} | {lat} | {s['rps']} ({s['failed']}) | {s.get('router_cores', '-')} | "
                    f"{s.get('router_cores_per_1k_rps', '-')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rust-venv", type=Path, help="venv with vllm-router and sglang-router (their candidates)")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--only", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    ap.add_argument("--tuned-workers", type=int, default=os.cpu_count() or 1,
                    help="litellm-tuned's --num_workers (default one per core; see docs/layer3.md on more than one)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if any(c.endswith("-router") for c in args.only) and not args.rust_venv:
        ap.error("--rust-venv: needed for the vllm-router and sglang-router candidates")
    workdir = Path(tempfile.mkdtemp(prefix="gridready-router-bench-"))
    key = "sk-" + secrets.token_hex(16)
    engines, urls = start_engines(workdir, args.replicas)
    results: list[dict[str, Any]] = []
    starters: dict[str, Callable[[], tuple[Proc, str]]] = {
        "haproxy": lambda: start_haproxy(workdir, urls, key),
        "litellm": lambda: start_litellm(workdir, urls, key, tuned=False),
        "litellm-tuned": lambda: start_litellm(workdir, urls, key, tuned=True, args_workers=args.tuned_workers),
        "vllm-router": lambda: start_rust(workdir, args.rust_venv, "vllm-router", urls, key),
        "sglang-router": lambda: start_rust(workdir, args.rust_venv, "sglang-router", urls, key)}
    try:
        for name in args.only:
            try:
                proc, url = starters[name]() if name != "direct" else (None, None)
            except TimeoutError as err:  # recorded, and the other candidates still measured
                results.append({"candidate": name, "error": str(err)})
                print(f"{name}: {err}", file=sys.stderr, flush=True)
                continue
            try:
                results.append(measure_candidate(name, url, proc, urls, key, args))
            finally:
                if proc:
                    proc.stop()
            print(f"{name}: {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    finally:
        for proc in engines:
            proc.stop()
    doc = {"cpus": os.cpu_count(), "load_avg": os.getloadavg(), "replicas": args.replicas,
           "tuned_workers": args.tuned_workers,
           "engine": "sandbox.engine (SIMULATED, 5 ms TTFT, 1 ms ITL)", "results": results}
    text = json.dumps(doc, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(table(results), file=sys.stderr)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
