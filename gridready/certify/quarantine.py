"""Quarantine outputs, always scheduler-side (ANCH section 0.4): an Ansible group, Kubernetes labels and taints
as data for the platform stack, and Slurm drain commands for the report. Nothing here touches a cluster.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gridready.artifacts import write_atomic

GROUP = "gridready_quarantine"
LABEL = "gridready.io/certified"
TAINT = "gridready.io/quarantined"


def quarantine_inventory(quarantined: Mapping[str, str], run_id: str | None = None) -> dict[str, Any]:
    """An Ansible inventory fragment: group `gridready_quarantine` with the reason as a host var."""
    hosts = {
        h: {"gridready_quarantine_reason": reason, **({"gridready_quarantine_run": run_id} if run_id else {})}
        for h, reason in sorted(quarantined.items())
    }
    return {"all": {"children": {GROUP: {"hosts": hosts}}}}


def quarantine_yml(quarantined: Mapping[str, str], run_id: str | None = None) -> str:
    head = "# Written by gridready certify: hosts that failed fabric or node certification. Do not edit.\n"
    return head + yaml.safe_dump(quarantine_inventory(quarantined, run_id), sort_keys=True, width=200)


def k8s_node_patches(certified: Iterable[str], quarantined: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per node: labels and taints for the platform stack (node name = inventory host name)."""
    out = []
    for node in sorted(set(certified) | set(quarantined)):
        bad = node in quarantined
        taints = [{"key": TAINT, "value": "true", "effect": "NoSchedule"}] if bad else []
        out.append({
            "node": node,
            "labels": {LABEL: "false" if bad else "true"},
            "annotations": {"gridready.io/quarantine-reason": quarantined[node][:250]} if bad else {},
            "taints": taints,
        })
    return out


def slurm_drain_commands(quarantined: Mapping[str, str]) -> list[str]:
    """`scontrol update` lines for the report (Slurm reasons are short: trimmed to 100 characters)."""
    return [
        f"scontrol update nodename={shlex.quote(h)} state=drain reason={shlex.quote('gridready: ' + r[:88])}"
        for h, r in sorted(quarantined.items())
    ]


def write_outputs(
    out_dir: Path, certified: Iterable[str], quarantined: Mapping[str, str], run_id: str | None = None
) -> dict[str, Path]:
    """quarantine.yml, k8s-node-patches.json and slurm-drain.sh in `out_dir` (atomic writes)."""
    certified = sorted(certified)
    paths = {
        "quarantine_yml": write_atomic(out_dir / "quarantine.yml", quarantine_yml(quarantined, run_id)),
        "k8s": write_atomic(out_dir / "k8s-node-patches.json",
                            json.dumps(k8s_node_patches(certified, quarantined), indent=2) + "\n"),
        "slurm": write_atomic(out_dir / "slurm-drain.sh",
                              "#!/bin/sh\n# gridready: drain quarantined nodes (review before running)\n"
                              + "".join(c + "\n" for c in slurm_drain_commands(quarantined))),
    }
    return paths
