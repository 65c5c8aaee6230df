"""Write the monitoring hand-off files of one customer into a folder (the serve stage's artifacts)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gridready.artifacts import make_dirs, write_atomic
from gridready.monitoring.dashboard import render
from gridready.monitoring.prometheus import Ports, alert_rules, kubernetes_monitors, scrape_config
from gridready.spec.serving import Tier


def _dump(path: Path, docs: list[object]) -> Path:
    text = yaml.safe_dump_all(docs, sort_keys=False) if len(docs) > 1 else yaml.safe_dump(docs[0], sort_keys=False)
    return write_atomic(path, text, mode=0o644)


def write_monitoring(out_dir: Path, customer: str, tiers: list[Tier], *, target: str = "hosts",
                     tier_hosts: dict[str, list[str]] | None = None, nodes: list[str] | None = None,
                     controller: str | None = None, namespace: str = "gridready-serving",
                     ports: Ports | None = None) -> dict[str, Path]:
    """hosts: prometheus.yml + gridready-rules.yml; kubernetes: monitors.yaml + gridready-rules.yml (as a
    PrometheusRule); both: grafana-dashboard.json."""
    make_dirs(out_dir)  # never through a link
    rules = alert_rules(customer, tiers)
    paths: dict[str, Path] = {}
    if target == "hosts":
        cfg = scrape_config(customer, tiers, tier_hosts or {}, nodes or [], controller=controller, ports=ports,
                            rule_files=["gridready-rules.yml"])
        paths["prometheus"] = _dump(out_dir / "prometheus.yml", [cfg])
        paths["rules"] = _dump(out_dir / "gridready-rules.yml", [rules])
    else:
        monitors = kubernetes_monitors(customer, tiers, namespace)
        rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                "metadata": {"name": f"gridready-{customer}", "namespace": namespace,
                             "labels": monitors[0]["metadata"]["labels"]}, "spec": rules}
        paths["monitors"] = _dump(out_dir / "monitors.yaml", [*monitors, rule])
    paths["dashboard"] = write_atomic(out_dir / "grafana-dashboard.json", render(), mode=0o644)
    return paths
