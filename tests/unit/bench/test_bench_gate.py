"""verify_tier end to end on a local engine: readiness (bounded, says why), smoke, SLO gate exit 3 naming the SLO,
and the JSON / JUnit / Prometheus outputs."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET

import pytest

from gridready.bench import Endpoint, Workload, verify_tier, write_tier_reports
from gridready.bench.gate import slo_gate
from gridready.bench.stats import LevelSummary, Stats
from gridready.bench.workload import Level
from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.spec.serving import Slo, Tier

FAST = ("--ttft-ms", "30", "--itl-ms", "10", "--prefill-us-per-token", "0", "--batch-slowdown", "0")
WL = Workload(concurrency=[1, 2], num_prompts=6, duration_s=5, input_len=8, output_len=6, warmup=0)


def tier(name: str = "fast", **slo: float) -> Tier:
    return Tier(name=name, engine="vllm", model={"local_path": "/m"}, served_name="m", slo=Slo(**slo))


def test_tight_slo_fails_with_exit_3_naming_the_slo(engine_factory):
    e = engine_factory("--model", "m", *FAST)
    report = verify_tier(Endpoint(url=e.url, model="m"), tier(ttft_ms_p99=5, tpot_ms_p99=1000), WL, gpus=1)
    assert report.readiness.ready and report.smoke is not None and report.smoke.ok
    assert report.simulated and [lv.level.label for lv in report.levels] == ["c=1", "c=2"]
    assert not report.ok and report.exit_code == ExitCode.STAGE_FAILED == 3
    assert "ttft_ms_p99" in report.gate.failed_slos and "tpot_ms_p99" not in report.gate.failed_slos
    assert "goodput_min" in report.gate.failed_slos  # no request met the TTFT SLO
    assert "ttft_ms_p99: p99 TTFT" in report.gate.message and "> 5 ms" in report.gate.message
    with pytest.raises(StageFailed) as err:
        report.gate.raise_if_failed()
    assert err.value.code == 3 and "ttft_ms_p99" in str(err.value)


def test_passing_tier_and_outputs(engine_factory, tmp_path):
    e = engine_factory("--model", "m", *FAST)
    report = verify_tier(Endpoint(url=e.url, model="m"), tier(ttft_ms_p99=2000, e2e_ms_p99=5000), WL, gpus=1)
    assert report.ok and report.exit_code == 0 and report.gate.level == "c=2"
    bad = verify_tier(Endpoint(url=e.url, model="m"), tier("tight", e2e_ms_p99=1), WL, gpus=1)
    paths = write_tier_reports(tmp_path, [report, bad], customer="acme")
    data = json.loads(paths["fast"].read_text())
    assert data["gate"]["passed"] and data["levels"][1]["level"] == {"kind": "concurrency", "value": 2.0}
    suites = ET.parse(paths["junit"]).getroot().findall("testsuite")
    assert [s.get("failures") for s in suites] == ["0", "2"]  # tight: e2e_ms_p99 and goodput_min
    failed = [tc.get("name") for tc in suites[1] if tc.find("failure") is not None]
    assert failed == ["slo.e2e_ms_p99", "slo.goodput_min"]
    prom = paths["prom"].read_text()
    assert 'gridready_serve_gate_pass{customer="acme",engine="vllm",model="m",simulated="true",tier="fast"} 1.0' \
        in prom
    assert 'gridready_bench_slo_pass{customer="acme",engine="vllm",model="m",simulated="true",slo="e2e_ms_p99",' \
           'tier="tight"} 0.0' in prom
    assert "gridready_bench_latency_seconds{" in prom and 'quantile="0.99"' in prom


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readiness_times_out_and_says_why():
    calls = []

    def unit_state() -> str:
        calls.append("state")
        return "vllm-fast.service: activating (auto-restart), exit-code 1"

    def log_lines() -> list[str]:
        calls.append("logs")
        return ["Traceback ...", "RuntimeError: CUDA out of memory"]

    port = _free_port()
    report = verify_tier(Endpoint(url=f"http://127.0.0.1:{port}", model="m"), tier(), WL, gpus=1, ready_timeout_s=1.5,
                         unit_state=unit_state, log_lines=log_lines)
    r = report.readiness
    assert not r.ready and r.waited_s < 3 and r.attempts >= 1
    assert "cannot connect" in r.reason and "auto-restart" in r.reason
    assert r.log_tail[-1] == "RuntimeError: CUDA out of memory" and calls == ["state", "logs"]
    assert report.exit_code == 3 and report.gate.failed_slos == ["readiness"] and report.levels == []


def test_readiness_names_a_missing_model(engine_factory):
    e = engine_factory("--model", "other", *FAST)
    report = verify_tier(Endpoint(url=e.url, model="m"), tier(), WL, gpus=1, ready_timeout_s=1)
    assert "model 'm' not in /v1/models (served: other)" in report.readiness.reason


def test_gate_never_passes_on_missing_data():
    empty = LevelSummary(level=Level(kind="concurrency", value=4), completed=0, failed=3, duration_s=0,
                         request_throughput=0, output_throughput=0, total_token_throughput=0, goodput=0,
                         goodput_rps=0, ttft=Stats(), tpot=Stats(), itl=Stats(), e2e=Stats(), send_lag=Stats(),
                         mean_input_tokens=0, mean_output_tokens=0, max_in_flight=0, errors=["HTTP 500: boom"],
                         simulated=False)
    g = slo_gate("t", empty, Slo(ttft_ms_p99=100))
    assert not g.passed and g.failed_slos == ["requests"] and "HTTP 500" in g.message
    assert not slo_gate("t", None, Slo()).passed


def test_the_benchmark_says_each_level_as_it_ends(engine_factory, capsys):
    """A benchmark runs for minutes: each level's figures are said when it ends (progress lines with the time since
    the tier's verification began), then the gate's verdict."""
    from gridready import console

    e = engine_factory("--model", "m", *FAST)
    report = verify_tier(Endpoint(url=e.url, model="m"), tier(ttft_ms_p99=2000), WL, gpus=1,
                         progress=console.Steps("bench fast"))
    said = capsys.readouterr().err
    for lv in report.levels:
        line = next(ln for ln in said.splitlines() if f"fast: {lv.level.label}: " in ln)
        assert line.startswith("[bench fast +") and f"{lv.completed} done, {lv.failed} failed" in line
        assert f"{lv.request_throughput:.2f} req/s" in line and f"p99 TTFT {lv.ttft.p99:.0f} ms" in line
    assert said.splitlines()[-1].endswith(report.gate.message.splitlines()[-1])
