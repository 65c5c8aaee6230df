"""Monitoring hand-off: scrape config, alert rules, Service/PodMonitors and the committed Grafana dashboard."""

from __future__ import annotations

import json
import re

import yaml

from gridready.monitoring import (
    DASHBOARD_PATH,
    build_dashboard,
    kubernetes_monitors,
    names,
    scrape_config,
    write_monitoring,
)
from gridready.monitoring.dashboard import render
from gridready.spec.serving import Slo, Tier

TIERS = [
    Tier(name="llama-a", engine="vllm", model={"local_path": "/m"}, served_name="llama", port=8000,
         slo=Slo(ttft_ms_p99=500, tpot_ms_p99=50)),
    Tier(name="llama-b", engine="triton-trtllm", model={"local_path": "/m"}, served_name="ensemble", port=8010),
]


def test_scrape_config_for_hosts():
    cfg = scrape_config("acme", TIERS, {"llama-a": ["10.77.0.11"], "llama-b": ["10.77.0.12", "10.77.0.13"]},
                        ["10.77.0.11", "10.77.0.12"], controller="10.77.0.1")
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"gridready-vllm", "gridready-triton", "gridready-node", "gridready-dcgm", "gridready-ray",
                         "gridready-textfile"}
    assert jobs["gridready-vllm"]["static_configs"] == [
        {"targets": ["10.77.0.11:8000"], "labels": {"customer": "acme", "tier": "llama-a", "engine": "vllm",
                                                    "model": "llama"}}]
    # Triton's OpenAI frontend (the default) serves /metrics on the tier port; nothing listens on 8002 there
    assert jobs["gridready-triton"]["static_configs"][0]["targets"] == ["10.77.0.12:8010", "10.77.0.13:8010"]
    assert jobs["gridready-textfile"]["static_configs"][0]["targets"] == ["10.77.0.1:9100"]
    assert cfg["global"]["external_labels"] == {"customer": "acme"}


def test_kubernetes_monitors():
    objs = kubernetes_monitors("acme", TIERS)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [("PodMonitor", "llama-a-engine"), ("ServiceMonitor", "llama-b-engine"),
                     ("ServiceMonitor", "gridready-dcgm-exporter")]
    pm = objs[0]
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert pm["spec"]["selector"] == {"matchLabels": {"gridready.io/tier": "llama-a"}}
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert pm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    relabel = pm["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert relabel[1]["sourceLabels"] == ["__meta_kubernetes_pod_label_gridready_io_tier"]


def test_write_monitoring_both_targets(tmp_path):
    hosts = write_monitoring(tmp_path / "h", "acme", TIERS, tier_hosts={"llama-a": ["10.77.0.11"]},
                             nodes=["10.77.0.11"])
    rules = yaml.safe_load(hosts["rules"].read_text())["groups"][0]["rules"]
    alerts = {r["alert"] for r in rules}
    assert {"GridreadyEngineDown", "GridreadyServeGateFailed", "GridreadyTtftOverSlo", "GridreadyTpotOverSlo"} <= alerts
    ttft = next(r for r in rules if r["alert"] == "GridreadyTtftOverSlo")
    assert ttft["expr"].endswith("> 0.5") and 'tier="llama-a"' in ttft["expr"]
    assert yaml.safe_load(hosts["prometheus"].read_text())["rule_files"] == ["gridready-rules.yml"]
    k8s = write_monitoring(tmp_path / "k", "acme", TIERS, target="kubernetes")
    docs = list(yaml.safe_load_all(k8s["monitors"].read_text()))
    assert [d["kind"] for d in docs][-1] == "PrometheusRule"
    assert json.loads(k8s["dashboard"].read_text())["uid"] == "gridready-main"


def test_dashboard_is_committed_in_sync_and_well_formed():
    assert DASHBOARD_PATH.read_text() == render(), "run: python -m gridready.monitoring dashboard --write"
    d = build_dashboard()
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    exprs = " ".join(t["expr"] for p in d["panels"] for t in p.get("targets", []))
    for name in (names.CERT_NODE_CERTIFIED, names.SERVE_GATE_PASS, names.BENCH_GOODPUT, "vllm:num_requests_running",
                 "vllm:time_to_first_token_seconds_bucket", "nv_inference_request_success"):
        assert name in exprs, name
    for p in d["panels"]:  # panels never overlap and fit 24 columns
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24
    boxes = [(p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"], p["gridPos"]["h"]) for p in d["panels"]]
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
    assert all(re.fullmatch(r"[A-Z]", t["refId"]) for p in d["panels"] for t in p.get("targets", []))


def test_plain_tritonserver_is_scraped_on_its_metrics_port():
    plain = Tier.model_validate({**TIERS[1].model_dump(), "triton": {"openai_frontend": False, "metrics_port": 8102}})
    cfg = scrape_config("acme", [plain], {"llama-b": ["10.77.0.12"]}, ["10.77.0.12"])
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "gridready-triton"]
    assert job["static_configs"][0]["targets"] == ["10.77.0.12:8102"]
    (monitor,) = [o for o in kubernetes_monitors("acme", [plain]) if o["metadata"]["name"] == "llama-b-engine"]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    (default,) = [o for o in kubernetes_monitors("acme", TIERS) if o["metadata"]["name"] == "llama-b-engine"]
    assert default["spec"]["endpoints"][0]["port"] == "openai"
