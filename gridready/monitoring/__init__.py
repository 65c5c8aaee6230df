"""Monitoring hand-off: Prometheus scrape config and alert rules (hosts), Service/PodMonitors (Kubernetes),
and the Grafana dashboard for certification and serving. See docs/monitoring.md."""

from gridready.monitoring.dashboard import DASHBOARD_PATH
from gridready.monitoring.dashboard import build as build_dashboard
from gridready.monitoring.prometheus import Ports, alert_rules, kubernetes_monitors, scrape_config
from gridready.monitoring.write import write_monitoring

__all__ = ["DASHBOARD_PATH", "Ports", "alert_rules", "build_dashboard", "kubernetes_monitors", "scrape_config",
           "write_monitoring"]
