"""Helpers the stages share; the summaries themselves are the stage contracts in gridready/contracts.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from gridready.ansible import PlaybookResult
from gridready.contracts import HostOutcome
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory


class Timer:
    def __init__(self) -> None:
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._t0 = time.monotonic()

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self._t0, 2)


def base_extravars(inv: Inventory) -> dict[str, Any]:
    """Every stage playbook gets the customer and the GPU node groups (its preflight play asserts them), and the
    pip arguments of the nodes' Python package index (software.python_index; PyPI when unset)."""
    return {"gridready_customer": inv.customer, "gridready_node_groups": [g.name for g in inv.spec.node_groups],
            "gridready_pip_index_args": pip_index_args(inv)}


def pip_index_args(inv: Inventory) -> list[str]:
    """pip's index arguments for the nodes (gridready.spec.cluster.SoftwarePins.pip_index_args)."""
    return inv.spec.software.pip_index_args()


def outcome_from_playbook(result: PlaybookResult) -> tuple[str, ExitCode, dict[str, HostOutcome]]:
    """Map per-host stats to (status, exit code, hosts): unreachable 4, failed 3, pending changes in check 6."""
    hosts: dict[str, HostOutcome] = {}
    for host, stats in result.hosts.items():
        if stats.unreachable:
            state = "unreachable"
        elif stats.failures:
            state = "failed"
        elif stats.changed:
            state = "changed"
        else:
            state = "ok"
        hosts[host] = HostOutcome(status=state, changed=stats.changed)  # type: ignore[arg-type]
    if result.unreachable_hosts:
        return "unreachable", ExitCode.UNREACHABLE, hosts
    if result.failed_hosts or result.status not in ("successful",) or not hosts:
        return "failed", ExitCode.STAGE_FAILED, hosts
    return "success", ExitCode.OK, hosts
