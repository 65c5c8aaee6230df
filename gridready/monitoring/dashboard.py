"""The Grafana dashboard for certification and serving, built in code; gridready/data/grafana/gridready.json is
its output (`python -m gridready.monitoring dashboard`), kept in sync by a test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gridready.monitoring import names as n

DASHBOARD_PATH = Path(__file__).resolve().parents[1] / "data" / "grafana" / "gridready.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
C = 'customer=~"$customer"'
T = f'{C},tier=~"$tier"'


class _Layout:
    """Places panels left to right, 24 columns wide, in rows."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = self.y = 0
        self.row_h = 0
        self.next_id = 1

    def row(self, title: str) -> None:
        self._newline()
        self._add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self._newline()

    def panel(self, kind: str, title: str, targets: list[tuple[str, str]], w: int = 8, h: int = 8,
              unit: str | None = None, desc: str = "", **extra: Any) -> None:
        if self.x + w > 24:
            self._newline()
        p: dict[str, Any] = {
            "type": kind, "title": title, "description": desc, "datasource": DS,
            "targets": [{"datasource": DS, "expr": e, "legendFormat": lf, "refId": chr(65 + i)}
                        for i, (e, lf) in enumerate(targets)],
            "fieldConfig": {"defaults": {"unit": unit} if unit else {}, "overrides": []},
            "options": {},
        }
        p.update(extra)
        self._add(p, w, h)

    def _add(self, p: dict[str, Any], w: int, h: int) -> None:
        p["id"] = self.next_id
        self.next_id += 1
        p["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _newline(self) -> None:
        if self.x:
            self.y += self.row_h
        self.x, self.row_h = 0, 0


def _var(name: str, query: str, label: str) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DS, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


def build() -> dict[str, Any]:
    lay = _Layout()
    lay.row("Certification")
    lay.panel("stat", "Certified nodes", [(f"sum({n.CERT_NODE_CERTIFIED}{{{C}}})", "certified")], w=4, h=5,
              desc="Nodes whose latest certification passed (gridready certify textfile).")
    lay.panel("stat", "Not certified", [(f"count({n.CERT_NODE_CERTIFIED}{{{C}}} == 0) or vector(0)", "not certified")],
              w=4, h=5, fieldConfig={"defaults": {"thresholds": {"mode": "absolute", "steps": [
                  {"color": "green", "value": None}, {"color": "red", "value": 1}]}}, "overrides": []})
    lay.panel("stat", "Quarantined", [(f"sum({n.CERT_QUARANTINED}{{{C}}}) or vector(0)", "quarantined")], w=4, h=5)
    lay.panel("stat", "Last certification", [(f"max({n.CERT_LAST_RUN}{{{C}}}) * 1000", "")], w=4, h=5,
              unit="dateTimeFromNow")
    lay.panel("table", "Failed or errored gates",
              [(f'{n.CERT_GATE_STATUS}{{{C},status=~"fail|error"}} == 1', "{{node}} {{gate}}")], w=8, h=5,
              desc="One row per node and gate whose latest verdict is fail or error.",
              options={"showHeader": True}, transformations=[{"id": "labelsToFields", "options": {}}])
    lay.panel("timeseries", "Gate measurements", [(f"{n.CERT_GATE_MEASURED}{{{C}}}", "{{node}} {{gate}} {{gpu}}")],
              w=12, h=8)
    lay.panel("timeseries", "GPU utilisation (DCGM)", [(f"DCGM_FI_DEV_GPU_UTIL{{{C}}}", "{{instance}} {{gpu}}")],
              w=6, h=8, unit="percent")
    lay.panel("timeseries", "Xid errors (DCGM)", [(f"DCGM_FI_DEV_XID_ERRORS{{{C}}}", "{{instance}} {{gpu}}")],
              w=6, h=8)

    lay.row("Serving: verification (last serve / bench run)")
    lay.panel("stat", "SLO gate", [(f"{n.SERVE_GATE_PASS}{{{T}}}", "{{tier}}")], w=6, h=5,
              fieldConfig={"defaults": {"mappings": [{"type": "value", "options": {
                  "0": {"text": "FAIL", "color": "red"}, "1": {"text": "pass", "color": "green"}}}]},
                  "overrides": []})
    lay.panel("bargauge", "Goodput at each level", [(f"{n.BENCH_GOODPUT}{{{T}}}", "{{tier}} {{level}}")], w=6, h=5,
              unit="percentunit")
    lay.panel("table", "SLO checks", [(f"{n.BENCH_SLO_PASS}{{{T}}}", "{{tier}} {{slo}}")], w=12, h=5,
              transformations=[{"id": "labelsToFields", "options": {}}])
    lay.panel("barchart", "p99 TTFT by level",
              [(f'{n.BENCH_LATENCY}{{{T},metric="ttft",quantile="0.99"}}', "{{tier}} {{level}}")], w=8, unit="s")
    lay.panel("barchart", "p99 TPOT by level",
              [(f'{n.BENCH_LATENCY}{{{T},metric="tpot",quantile="0.99"}}', "{{tier}} {{level}}")], w=8, unit="s")
    lay.panel("barchart", "Output tokens/s by level", [(f"{n.BENCH_OUTPUT_TPS}{{{T}}}", "{{tier}} {{level}}")], w=8)

    lay.row("Serving: live engines")
    lay.panel("timeseries", "Requests running / waiting",
              [(f"sum by (tier) (vllm:num_requests_running{{{T}}})", "{{tier}} running"),
               (f"sum by (tier) (vllm:num_requests_waiting{{{T}}})", "{{tier}} waiting"),
               (f'sum by (tier) (nv_trt_llm_request_metrics{{{T},request_type="active"}})', "{{tier}} active (trt)"),
               (f"sum by (tier) (sglang:num_running_reqs{{{T}}})", "{{tier}} running (sglang)"),
               (f"sum by (tier) (sglang:num_queue_reqs{{{T}}})", "{{tier}} waiting (sglang)")],
              w=8)
    lay.panel("timeseries", "Output tokens/s",
              [(f"sum by (tier) (rate(vllm:generation_tokens_total{{{T}}}[1m]))", "{{tier}}"),
               (f"sum by (tier) (rate(sglang:generation_tokens_total{{{T}}}[1m]))", "{{tier}} (sglang)")], w=8)
    lay.panel("timeseries", "KV cache usage",
              [(f"max by (tier) (vllm:kv_cache_usage_perc{{{T}}})", "{{tier}}"),
               (f'max by (tier) (nv_trt_llm_kv_cache_block_metrics{{{T},kv_cache_block_type="fraction"}})',
                "{{tier}} (trt)")], w=8, unit="percentunit")
    for q in ("0.5", "0.99"):
        lay.panel("timeseries", f"TTFT p{int(float(q) * 100)}",
                  [(f"histogram_quantile({q}, sum by (le, tier) (rate(vllm:time_to_first_token_seconds_bucket"
                    f"{{{T}}}[5m])))", "{{tier}}"),
                   (f"histogram_quantile({q}, sum by (le, tier) (rate(nv_inference_first_response_histogram_ms_bucket"
                    f"{{{T}}}[5m]))) / 1000", "{{tier}} (triton)"),
                   (f"histogram_quantile({q}, sum by (le, tier) (rate(sglang:time_to_first_token_seconds_bucket"
                    f"{{{T}}}[5m])))", "{{tier}} (sglang)")], w=6, unit="s")
    lay.panel("timeseries", "Inter-token latency p99",
              [(f"histogram_quantile(0.99, sum by (le, tier) (rate(vllm:inter_token_latency_seconds_bucket"
                f"{{{T}}}[5m])))", "{{tier}}")], w=6, unit="s")
    lay.panel("timeseries", "Prefix-cache hit rate (share of prompt tokens)",
              [(f"sum by (tier) (rate(vllm:prefix_cache_hits_total{{{T}}}[5m])) / "
                f"sum by (tier) (rate(vllm:prefix_cache_queries_total{{{T}}}[5m]))", "{{tier}} (vllm)"),
               (f"sum by (tier) (rate(sglang:cached_tokens_total{{{T}}}[5m])) / "
                f"sum by (tier) (rate(sglang:prompt_tokens_total{{{T}}}[5m]))", "{{tier}} (sglang)")],
              w=6, unit="percentunit")
    lay.panel("timeseries", "Triton request rate / failures",
              [(f"sum by (tier) (rate(nv_inference_request_success{{{T}}}[1m]))", "{{tier}} ok"),
               (f"sum by (tier) (rate(nv_inference_request_failure{{{T}}}[1m]))", "{{tier}} failed")], w=6,
              unit="reqps")
    return {
        "title": "gridready: certification and serving",
        "uid": "gridready-main",
        "description": "Certification verdicts, serving SLO gate results and live engine metrics "
                       "(simulated engines report gridready_sim_info).",
        "tags": ["gridready", "gpu", "llm-serving"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            _var("customer", "label_values(up{job=~\"gridready-.*\"}, customer)", "customer"),
            _var("tier", f"label_values({n.SERVE_GATE_PASS}{{{C}}}, tier)", "tier"),
        ]},
        "annotations": {"list": []},
        "panels": lay.panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"
