"""Benchmark results on disk: JSON (the TierReport), JUnit XML (one case per check) and a Prometheus textfile."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gridready.artifacts import write_atomic
from gridready.bench.verify import TierReport


def write_text_atomic(path: Path, text: str) -> Path:
    return write_atomic(path, text)


def write_json(path: Path, obj: Any) -> Path:
    data = obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def junit_xml(reports: list[TierReport], suite: str = "gridready.serve") -> str:
    """testsuite per tier; testcases readiness, smoke and each SLO check of the gate."""
    root = ET.Element("testsuites", name=suite)
    for r in reports:
        cases: list[tuple[str, bool, str]] = [("readiness", r.readiness.ready, r.readiness.reason)]
        if r.smoke is not None:
            cases.append(("smoke", r.smoke.ok, r.smoke.reason))
        cases += [(f"slo.{c.slo}", c.passed, c.reason) for c in r.gate.checks if c.slo not in ("readiness", "smoke")]
        failures = sum(1 for _n, ok, _m in cases if not ok)
        ts = ET.SubElement(root, "testsuite", name=f"{suite}.{r.tier}", tests=str(len(cases)),
                           failures=str(failures), errors="0", timestamp=r.started)
        for name, ok, msg in cases:
            tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{r.tier}", name=name)
            if not ok:
                ET.SubElement(tc, "failure", message=msg, type="SloFailed").text = msg
            else:
                ET.SubElement(tc, "system-out").text = msg
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, reports: list[TierReport]) -> Path:
    return write_text_atomic(path, junit_xml(reports))


def write_prom(path: Path, reports: list[TierReport], customer: str) -> Path:
    """node_exporter textfile-collector metrics (gridready_bench_*), one series per tier and level."""
    reg = CollectorRegistry()
    base = ["customer", "tier", "engine", "model", "simulated"]
    lat = Gauge("gridready_bench_latency_seconds", "Benchmark latency percentiles at each load level",
                [*base, "level", "metric", "quantile"], registry=reg)
    thr = Gauge("gridready_bench_output_tokens_per_second", "Output token throughput", [*base, "level"], registry=reg)
    rps = Gauge("gridready_bench_requests_per_second", "Completed requests per second", [*base, "level"],
                registry=reg)
    good = Gauge("gridready_bench_goodput_ratio", "Share of requests meeting every SLO", [*base, "level"],
                 registry=reg)
    slo = Gauge("gridready_bench_slo_pass", "1 if the SLO check passed at the gate level", [*base, "slo"],
                registry=reg)
    ready = Gauge("gridready_serve_tier_ready", "1 if the tier passed readiness and smoke", base, registry=reg)
    gate = Gauge("gridready_serve_gate_pass", "1 if the tier passed its SLO gate", base, registry=reg)
    ts = Gauge("gridready_bench_last_run_timestamp_seconds", "When the benchmark finished", base, registry=reg)
    for r in reports:
        b = [customer, r.tier, r.engine, r.model, str(r.simulated).lower()]
        for s in r.levels:
            lv = s.level.label
            for metric in ("ttft", "tpot", "itl", "e2e"):
                st = getattr(s, metric)
                for q in ("p50", "p90", "p99"):
                    v = getattr(st, q)
                    if v is not None:
                        lat.labels(*b, lv, metric, f"0.{q[1:]}").set(v / 1000.0)
            thr.labels(*b, lv).set(s.output_throughput)
            rps.labels(*b, lv).set(s.request_throughput)
            if s.goodput is not None:
                good.labels(*b, lv).set(s.goodput)
        for c in r.gate.checks:
            slo.labels(*b, c.slo).set(1 if c.passed else 0)
        ready.labels(*b).set(1 if r.readiness.ready and (r.smoke is not None and r.smoke.ok) else 0)
        gate.labels(*b).set(1 if r.gate.passed else 0)
        ts.labels(*b).set(datetime.fromisoformat(r.finished).timestamp())
    return write_atomic(path, generate_latest(reg), mode=0o644)


def write_tier_reports(out_dir: Path, reports: list[TierReport], customer: str) -> dict[str, Path]:
    """<out_dir>/bench/<tier>.json per tier, plus junit.xml and gridready_bench.prom for all tiers."""
    paths = {r.tier: write_json(out_dir / "bench" / f"{r.tier}.json", r) for r in reports}
    paths["junit"] = write_junit(out_dir / "bench" / "junit.xml", reports)
    paths["prom"] = write_prom(out_dir / "bench" / "gridready_bench.prom", reports, customer)
    return paths
