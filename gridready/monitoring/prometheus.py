"""Prometheus hand-off: scrape configuration and alert rules for hosts, ServiceMonitor/PodMonitor for Kubernetes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gridready.monitoring import names
from gridready.spec.serving import Tier


class Ports(BaseModel):
    """Exporter ports on the hosts (defaults are the exporters' own)."""

    model_config = ConfigDict(extra="forbid")

    node_exporter: int = 9100  # node_exporter with --collector.textfile.directory (gridready_* textfiles)
    dcgm_exporter: int = 9400
    ray_metrics: int = Field(8080, description="ray start --metrics-export-port")
    triton_metrics: int = 8002


def _triton_setting(tier: Tier, key: str, default: Any) -> Any:
    settings = getattr(tier, "triton", None)
    value = settings.get(key) if isinstance(settings, dict) else getattr(settings, key, None)
    return default if value is None else value


def triton_metrics_port(tier: Tier, default: int = 8002) -> int:
    """Where a Triton tier serves /metrics: tritonserver on --metrics-port; Triton's OpenAI frontend and
    trtllm-serve on the tier's OpenAI port, where no metrics port listens (server:python/openai/openai_frontend/
    frontend/fastapi/routers/observability.py; TensorRT-LLM docs, trtllm-serve: /metrics). A fixed-cost tier's
    tritonserver has no OpenAI frontend: its embedding.metrics_port."""
    if tier.engine == "triton-embedding" and tier.embedding is not None:
        return tier.embedding.metrics_port
    if _triton_setting(tier, "frontend", "triton") == "trtllm-serve" or _triton_setting(tier, "openai_frontend", True):
        return tier.port
    return int(_triton_setting(tier, "metrics_port", default))


def triton_metrics_port_name(tier: Tier) -> str:
    """The Service port name of a Triton tier's /metrics (gridready/stacks/serving/triton.py names ports after the
    plan)."""
    metrics = _triton_setting(tier, "frontend", "triton") != "trtllm-serve" and not _triton_setting(
        tier, "openai_frontend", True)
    return "metrics" if metrics else "openai"


def _job(name: str, groups: list[tuple[list[str], dict[str, str]]], interval: str) -> dict[str, Any]:
    return {"job_name": name, "scrape_interval": interval, "metrics_path": "/metrics",
            "static_configs": [{"targets": sorted(t), "labels": lb} for t, lb in groups if t]}


def scrape_config(customer: str, tiers: list[Tier], tier_hosts: dict[str, list[str]], nodes: list[str], *,
                  controller: str | None = None, ports: Ports | None = None, interval: str = "15s",
                  rule_files: list[str] | None = None) -> dict[str, Any]:
    """prometheus.yml for a hosts deployment.

    tier_hosts: the addresses serving each tier's API (the Ray head for vLLM, each Triton host);
    nodes: every certified node (node_exporter, DCGM exporter, Ray); controller: where gridready runs, whose
    node_exporter textfile directory receives the serve/certify .prom files.
    """
    p = ports or Ports()
    base = {"customer": customer}
    vllm, triton, sglang = [], [], []
    for t in tiers:
        hosts = tier_hosts.get(t.name, [])
        labels = {**base, "tier": t.name, "engine": t.engine, "model": t.served_name}
        if t.engine == "vllm":
            vllm.append(([f"{h}:{t.port}" for h in hosts], labels))
        elif t.engine == "sglang":  # /metrics on the API port of node rank 0 (--enable-metrics)
            sglang.append(([f"{h}:{t.port}" for h in hosts], labels))
        else:
            triton.append(([f"{h}:{triton_metrics_port(t, p.triton_metrics)}" for h in hosts], labels))
    jobs = [
        _job("gridready-vllm", vllm, interval),
        _job("gridready-triton", triton, interval),
        _job("gridready-sglang", sglang, interval),
        _job("gridready-node", [([f"{n}:{p.node_exporter}" for n in nodes], {**base, "role": "gpu-node"})], interval),
        _job("gridready-dcgm", [([f"{n}:{p.dcgm_exporter}" for n in nodes], base)], interval),
        _job("gridready-ray", [([f"{n}:{p.ray_metrics}" for n in nodes], base)], interval),
    ]
    if controller:
        jobs.append(_job("gridready-textfile", [([f"{controller}:{p.node_exporter}"], {**base, "role": "controller"})],
                         interval))
    cfg: dict[str, Any] = {"global": {"scrape_interval": interval, "external_labels": base},
                           "scrape_configs": [j for j in jobs if j["static_configs"]]}
    if rule_files:
        cfg["rule_files"] = rule_files
    return cfg


def alert_rules(customer: str, tiers: list[Tier]) -> dict[str, Any]:
    """Prometheus rule groups: engines down, live p99 over the SLO, failed serve gate, uncertified nodes."""
    sel = f'customer="{customer}"'
    rules: list[dict[str, Any]] = [
        {"alert": "GridreadyEngineDown", "expr": f'up{{job=~"gridready-(vllm|triton|sglang)",{sel}}} == 0', "for": "2m",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "{{ $labels.tier }} engine on {{ $labels.instance }} is not scraped"}},
        {"alert": "GridreadyServeGateFailed", "expr": f"{names.SERVE_GATE_PASS}{{{sel}}} == 0",
         "labels": {"severity": "warning"},
         "annotations": {"summary": "tier {{ $labels.tier }} failed its SLO gate in the last serve/bench run"}},
        {"alert": "GridreadyNodeNotCertified", "expr": f"{names.CERT_NODE_CERTIFIED}{{{sel}}} == 0",
         "labels": {"severity": "warning"},
         "annotations": {"summary": "node {{ $labels.node }} is not certified"}},
        {"alert": "GridreadyGpuXid", "expr": f"changes(DCGM_FI_DEV_XID_ERRORS{{{sel}}}[10m]) > 0",
         "labels": {"severity": "critical"},
         "annotations": {"summary": "Xid {{ $value }} on {{ $labels.instance }} GPU {{ $labels.gpu }}"}},
    ]
    for t in tiers:
        if t.engine == "sglang":
            rules += _sglang_rules(t, sel)
            continue
        if t.engine != "vllm":
            continue
        tsel = f'{sel},tier="{t.name}"'
        rules += _ttft_rule(t, tsel, "vllm:time_to_first_token_seconds_bucket")
        if t.slo.tpot_ms_p99:
            rules.append({
                "alert": "GridreadyTpotOverSlo",
                "expr": f"histogram_quantile(0.99, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket"
                        f"{{{tsel}}}[5m]))) > {t.slo.tpot_ms_p99 / 1000.0:g}",
                "for": "10m", "labels": {"severity": "warning", "tier": t.name},
                "annotations": {"summary": f"tier {t.name}: live p99 TPOT above the SLO {t.slo.tpot_ms_p99:g} ms"}})
    return {"groups": [{"name": f"gridready-{customer}", "rules": rules}]}


def _ttft_rule(t: Tier, tsel: str, bucket: str) -> list[dict[str, Any]]:
    """Live p99 TTFT over the tier's SLO, from the engine's own TTFT histogram (seconds)."""
    if not t.slo.ttft_ms_p99:
        return []
    return [{"alert": "GridreadyTtftOverSlo",
             "expr": f"histogram_quantile(0.99, sum by (le) (rate({bucket}{{{tsel}}}[5m]))) > "
                     f"{t.slo.ttft_ms_p99 / 1000.0:g}",
             "for": "10m", "labels": {"severity": "warning", "tier": t.name},
             "annotations": {"summary": f"tier {t.name}: live p99 TTFT above the SLO {t.slo.ttft_ms_p99:g} ms"}}]


def _sglang_rules(t: Tier, sel: str) -> list[dict[str, Any]]:
    """SGLang's own series (production_metrics.md): TTFT histogram and the prefix-cache hit rate gauge."""
    tsel = f'{sel},tier="{t.name}"'
    rules = _ttft_rule(t, tsel, "sglang:time_to_first_token_seconds_bucket")
    if t.enable_prefix_caching:
        rules.append({
            "alert": "GridreadyPrefixCacheCold",
            "expr": f"rate(sglang:cached_tokens_total{{{tsel}}}[15m]) "
                    f"/ rate(sglang:prompt_tokens_total{{{tsel}}}[15m]) < 0.05",
            "for": "30m", "labels": {"severity": "info", "tier": t.name},
            "annotations": {"summary": f"tier {t.name}: under 5 % of prompt tokens come from the radix cache"}})
    return rules


# Under Ray Serve LLM the engine's metrics go through Ray's metrics agent: vLLM's Ray wrappers replace ':' with '_'
# (vllm/v1/metrics/ray_wrappers.py, _get_sanitized_opentelemetry_name) and Ray prefixes `ray_`, so vllm:foo is
# exported as ray_vllm_foo (ray_vllm:foo in older releases). Renamed back at scrape time, the alerts and dashboard
# written for `vllm:*` work on both targets.
RAY_VLLM_RENAME = [{"sourceLabels": ["__name__"], "regex": "ray_vllm[:_](.+)", "targetLabel": "__name__",
                    "replacement": "vllm:$1", "action": "replace"}]


def kubernetes_monitors(customer: str, tiers: list[Tier], namespace: str = "gridready-serving", *,
                        release: str = "kube-prometheus-stack", gpu_operator_namespace: str = "gpu-operator",
                        tier_label: str = "gridready.io/tier") -> list[dict[str, Any]]:
    """monitoring.coreos.com/v1 objects: a PodMonitor per vLLM tier (Ray pods, port `metrics`: Ray exports the
    engine's metrics there, no Service fronts it; Ray's ray_vllm_* names renamed back to vllm:*), a ServiceMonitor
    per Triton tier (Service port `metrics`, or `openai` for its OpenAI frontend) and per SGLang tier (the leader
    Service's port `http`, where --enable-metrics serves /metrics), and a ServiceMonitor for the GPU Operator's
    DCGM exporter. `release` is the label the Prometheus operator of kube-prometheus-stack selects monitors by."""
    meta_labels = {"release": release, "app.kubernetes.io/managed-by": "gridready", "gridready.io/customer": customer}
    relabel = [{"targetLabel": "customer", "replacement": customer},
               {"sourceLabels": [f"__meta_kubernetes_pod_label_{_label_key(tier_label)}"], "targetLabel": "tier"}]
    out: list[dict[str, Any]] = []
    for t in tiers:
        selector = {"matchLabels": {tier_label: t.name}}
        if t.engine == "vllm":
            out.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
                        "metadata": {"name": f"{t.name}-engine", "namespace": namespace, "labels": meta_labels},
                        "spec": {"selector": selector, "namespaceSelector": {"matchNames": [namespace]},
                                 "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s",
                                                          "relabelings": relabel,
                                                          "metricRelabelings": RAY_VLLM_RENAME}]}})
        else:
            out.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                        "metadata": {"name": f"{t.name}-engine", "namespace": namespace, "labels": meta_labels},
                        "spec": {"selector": selector, "namespaceSelector": {"matchNames": [namespace]},
                                 "endpoints": [{"port": "http" if t.engine == "sglang"
                                                else triton_metrics_port_name(t), "path": "/metrics",
                                                "interval": "15s", "relabelings": relabel}]}})
    out.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                "metadata": {"name": "gridready-dcgm-exporter", "namespace": gpu_operator_namespace,
                             "labels": meta_labels},
                "spec": {"selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                         "namespaceSelector": {"matchNames": [gpu_operator_namespace]},
                         "endpoints": [{"port": "gpu-metrics", "path": "/metrics", "interval": "15s",
                                        "relabelings": [{"targetLabel": "customer", "replacement": customer}]}]}})
    return out


def _label_key(label: str) -> str:
    """Prometheus' sanitized form of a Kubernetes label name in __meta_kubernetes_pod_label_<name>."""
    return "".join(c if c.isalnum() else "_" for c in label)
