"""Shared fixtures. The sandbox fleet (`fleet`, `make_fleet`): gridready/sandbox/pytest_plugin.py, docs/sandbox.md."""

from gridready.sandbox.pytest_plugin import fleet, make_fleet  # noqa: F401
