"""gridready's vLLM metric names and the canary gate against the pinned vLLM's own metric definitions
(gridready/data/engine_cli/vllm-<pin>-metrics.json, read from vllm/v1/metrics/loggers.py and buckets.py by
tools/vllm_metrics_witness.py). The scrape is rendered by prometheus_client, the library vLLM exposes its metrics
with, from those definitions: vLLM's names, bucket bounds and label names (model_name, engine), two engines."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from gridready.bench import canary_gate, prefix_reading
from gridready.spec import Slo

REPO = Path(__file__).resolve().parents[3]
NAME = re.compile(r"\bvllm:[a-z][a-z0-9_]*")
SUFFIX = re.compile(r"_(bucket|sum|count|total)$")


def _pin() -> str:
    files = sorted((REPO / "gridready/data/engine_cli").glob("vllm-*-metrics.json"))
    assert files, "no vLLM metrics witness: run tools/vllm_metrics_witness.py"
    return files[-1].name.removeprefix("vllm-").removesuffix("-metrics.json")


WITNESS = json.loads((REPO / f"gridready/data/engine_cli/vllm-{_pin()}-metrics.json").read_text())


def test_the_witness_is_of_the_pinned_vllm() -> None:
    cli = sorted(p.name for p in (REPO / "gridready/data/engine_cli").glob("vllm-*.json")
                 if not p.name.endswith("-metrics.json"))
    assert cli == [f"vllm-{WITNESS['vllm']}.json"], "the metrics witness and the parser witness name one pin"
    assert WITNESS["labelnames"] == ["model_name", "engine"]


def _known(name: str) -> bool:
    base, suffix = SUFFIX.sub("", name), (SUFFIX.search(name) or [None, None])[1]
    if suffix in ("bucket", "sum", "count"):
        return base in WITNESS["histograms"]
    if suffix == "total":
        return base in WITNESS["counters"]
    return name in WITNESS["histograms"] or name in WITNESS["counters"] or name in WITNESS["gauges"]


def test_every_vllm_metric_gridready_names_exists_in_the_pinned_vllm() -> None:
    """Alerts, dashboards, the canary gate and the prefix-cache reading name only metrics the pin exposes."""
    named: dict[str, set[str]] = {}
    roots = [REPO / "gridready", REPO / "roles", REPO / "stacks"]
    for path in (p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".json", ".yml", ".yaml", ".j2")):
        if "engine_cli" in path.parts:
            continue
        for name in NAME.findall(path.read_text(errors="replace")):
            if name != "vllm:foo":  # the placeholder of a comment on Ray's renaming
                named.setdefault(name, set()).add(str(path.relative_to(REPO)))
    assert len(named) >= 10
    unknown = {n: sorted(p) for n, p in named.items() if not _known(n)}
    assert not unknown, unknown
    assert set(canary_gate.SLO_METRICS.values()) <= set(WITNESS["histograms"])
    hits, queries, _ = prefix_reading.SERIES["vllm"]
    assert _known(hits) and _known(queries)


def _registry() -> tuple[CollectorRegistry, dict[str, Histogram]]:
    reg = CollectorRegistry()
    hists = {name: Histogram(name, WITNESS["histograms"][name]["documentation"],
                             WITNESS["histograms"][name]["labelnames"],
                             buckets=WITNESS["histograms"][name]["buckets"], registry=reg)
             for name in canary_gate.SLO_METRICS.values()}
    return reg, hists


def _observe(hists: dict[str, Histogram], n: int, ttft: float, tpot: float, engine: str) -> None:
    for _ in range(n):
        hists["vllm:time_to_first_token_seconds"].labels("llama", engine).observe(ttft)
        hists["vllm:request_time_per_output_token_seconds"].labels("llama", engine).observe(tpot)
        hists["vllm:e2e_request_latency_seconds"].labels("llama", engine).observe(ttft + 64 * tpot)


def _bounds(name: str, value: float) -> tuple[float, float]:
    """The bucket of the pinned vLLM that holds `value`: (lower, upper]."""
    bounds = WITNESS["histograms"][name]["buckets"]
    upper = next(b for b in bounds if value <= b)
    lower = max((b for b in bounds if b < upper), default=0.0)
    return lower, upper


def test_the_gate_reads_vllms_own_exposition_over_two_engines() -> None:
    reg, hists = _registry()
    _observe(hists, 300, ttft=4.0, tpot=0.5, engine="0")  # before the window: slow, must not count
    before = generate_latest(reg).decode()
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="llama"}' in before
    _observe(hists, 60, ttft=0.15, tpot=0.03, engine="0")
    _observe(hists, 40, ttft=0.15, tpot=0.03, engine="1")  # a second engine (data parallel): its own label set
    after = generate_latest(reg).decode()
    window = canary_gate.delta(canary_gate.histogram(before, "vllm:time_to_first_token_seconds"),
                               canary_gate.histogram(after, "vllm:time_to_first_token_seconds"))
    assert window[math.inf] == 100  # both engines summed, the earlier 300 left out
    lower, upper = _bounds("vllm:time_to_first_token_seconds", 0.15)
    p99 = canary_gate.quantile(0.99, window)
    assert lower < p99 <= upper
    ttft_ms = p99 * 1000
    passed = canary_gate.judge(before, after, Slo(ttft_ms_p99=upper * 1000 + 1, tpot_ms_p99=1000), 50)
    assert passed.passed and passed.requests == 100, passed.reason
    assert passed.checks[0].measured_ms == pytest.approx(round(ttft_ms, 2))
    failed = canary_gate.judge(before, after, Slo(ttft_ms_p99=lower * 1000), 50)
    assert not failed.passed and failed.failed_slo == "ttft_ms_p99"
    few = canary_gate.judge(before, after, Slo(ttft_ms_p99=10_000), 101)
    assert not few.passed and few.failed_slo == "requests"


def test_the_simulated_vllm_exposes_the_pinned_layout() -> None:
    """The sandbox's simulated vLLM (sandbox/engine) writes each of its vllm: histograms with the pin's bounds and
    help text, and only metric names the pin has: what the canary gate and the alerts read there is vLLM's."""
    from sandbox.engine.core import Engine
    from sandbox.engine.profile import Profile

    engine = Engine(Profile(), ["llama"], "openai")
    hists = [h for name, h in vars(engine).items() if name.startswith("h_")]
    assert len(hists) >= 7
    for h in hists:
        h.observe(engine._labels("llama"), 0.2)
    text = engine.metrics_text()
    helps = dict(re.findall(r"^# HELP (vllm:\S+) (.*)$", text, re.M))
    assert len(helps) >= 10
    for name, help_ in helps.items():
        assert _known(name), name
        if name in WITNESS["histograms"]:
            assert help_ == WITNESS["histograms"][name]["documentation"], name
            bounds = {float(b) for b in re.findall(rf'^{re.escape(name)}_bucket{{[^}}]*le="([0-9.e+-]+)"', text,
                                                   re.M)}
            assert sorted(bounds) == WITNESS["histograms"][name]["buckets"], name
    assert 'engine="0"' in text and 'model_name="llama"' in text
