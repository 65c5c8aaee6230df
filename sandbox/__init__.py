"""The sandbox fleet: simulated NVIDIA GPU hosts as systemd-nspawn containers on this machine (DESIGN.md s. 5).

Public API: `sandbox.fleet` (up, down, status, ensure_up, format_status); pytest fixtures `fleet` and
`make_fleet` in `sandbox.pytest_plugin`; docs/sandbox.md.
"""
