"""Certification reports: certification.json per node, fleet report.json, JUnit XML, Markdown and HTML with plots,
Prometheus textfile metrics and quarantine.yml. `write_all(fleet, out_dir)` writes every format."""

from gridready.report.writer import write_all

__all__ = ["write_all"]
