"""`invoke discover --host H [--group G] [--write]`: read a reachable host through Ansible (the node probe with its
measurements skipped), print the node group for cluster.yml; `--write` puts it into the inventory's cluster.yml
(replacing the group of that name, keeping the keys it does not discover) and validates the inventory, restoring
the file when it does not validate (exit 2, nothing written)."""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar

from pydantic import Field

from gridready import ansible
from gridready.artifacts import RunContext, read_json, write_atomic
from gridready.contracts import HostOutcome, StageSummary
from gridready.discovery import DiscoveryError, node_group
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, load
from gridready.stages.certify import extravars as certify_vars
from gridready.stages.common import Timer, outcome_from_playbook
from gridready.yamlio import YamlError, read_capped

STAGE = "discover"


class DiscoverSummary(StageSummary):
    """summary.json of `invoke discover`: `data.node_group` is the group read from the host."""

    STAGE: ClassVar[str] = STAGE
    SCHEMA: ClassVar[str] = "gridready.discover-summary/1"

    hosts: dict[str, HostOutcome] = Field(default_factory=dict)
SKIP = ["dcgm", "nccl_tests", "nvbandwidth", "gpu_burn", "torch", "kernel_log"]  # read only, measure nothing


def _write(inv: Inventory, group: dict[str, Any]) -> None:
    """Replace (or add) the node group in cluster.yml, comments kept; validate; restore on failure."""
    from ruamel.yaml import YAML

    path = inv.path / "cluster.yml"
    try:
        before = read_capped(path, root=inv.path).decode()
    except YamlError as err:
        raise InvalidInput(f"{path}: {err.where}: {err}") from None
    yaml = YAML()
    yaml.preserve_quotes = True
    doc = yaml.load(before)
    groups = doc.setdefault("node_groups", [])
    old = next((g for g in groups if g.get("name") == group["name"]), None)
    if old is None:
        groups.append(dict(group))
    else:
        for key, value in group.items():
            old[key] = value
    text = io.StringIO()
    yaml.dump(doc, text)
    write_atomic(path, text.getvalue(), root=inv.path, mode=0o644)  # never through a link
    try:
        load(inv.path)
    except InvalidInput:
        write_atomic(path, before, root=inv.path, mode=0o644)
        raise


def run(inv: Inventory, ctx: RunContext, *, host: str, group: str | None = None,
        write: bool = False) -> DiscoverSummary:
    timer = Timer()
    if host not in inv.hosts:
        raise InvalidInput([f"inventories/{inv.name}/hosts.yml: {host}: not a host of this inventory (add it to "
                              "hosts.yml first)"])
    name = group or inv.node_group_of(host) or "discovered"
    if write and host not in inv.groups.get(name, []):
        raise InvalidInput([f"inventories/{inv.name}/hosts.yml: {name}: {host} is not in Ansible group {name!r}; "
                              "put it there, then --write"])
    stage_dir = ctx.stage_dir(STAGE)
    fetch_dir = stage_dir / "probes"
    extra = {**certify_vars(inv, fetch_dir), "gridready_discover_host": host, "gridready_certify_skip": SKIP,
             "gridready_certify_profile": "quick", "gridready_certify_dcgm_level": 0}
    result = ansible.run_playbook(inv, "discover.yml", stage_dir, check=False, limit=host, extravars=extra)
    status, code, outcomes = outcome_from_playbook(result)
    messages: list[str] = []
    data: dict[str, Any] = {}
    probe = fetch_dir / host / "probe.json"
    if code is ExitCode.OK:
        try:
            found = node_group(read_json(probe, ctx.root), name)
            data["node_group"] = found
            if write:
                _write(inv, found)
                data["written"] = str(inv.path / "cluster.yml")
            messages.append(f"node group of {host}: {json.dumps(found)}")
        except (OSError, ValueError, DiscoveryError) as exc:
            status, code = "failed", ExitCode.STAGE_FAILED
            messages.append(f"{host}: {exc}")
    return DiscoverSummary(customer=inv.customer, run_id=ctx.run_id, status=status,  # type: ignore[arg-type]
                           exit_code=int(code), check=False, started_at=timer.started_at, seconds=timer.seconds,
                           hosts=outcomes, messages=messages, data=data).close(ctx)
