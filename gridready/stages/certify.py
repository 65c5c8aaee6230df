"""certify: probe every GPU node in parallel (playbooks/certify.yml), judge the gates on the controller, run the
fabric phase on the nodes that passed, write the reports, apply the failure policy.

In check mode the probes (read-only) run and the verdicts are written, but none is enforced: exit 0 unless no
node was reachable, and later stages ignore the summary.

Exit codes: 0 certified (or, with failure_policy quarantine, at least min_certified_nodes certified: the rest are
quarantined with a warning); 5 not certified; 4 when no node could be reached at all. Nodes whose certification
from an earlier run is still inside the validity window are not probed again unless --force.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridready import ansible
from gridready.artifacts import RunContext, latest_summary
from gridready.certify.judge import FleetVerdict, NodeVerdict, judge_fleet, judge_node, still_valid
from gridready.certify.profile import CertificationSpec
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.report import write_all
from gridready.stages.common import HostOutcome, StageResult, Timer, base_extravars

STAGE = "certify"
PROBES = "probes"


def extravars(inv: Inventory, fetch_dir: Path) -> dict[str, Any]:
    """Role variables from the spec's certification section."""
    c: CertificationSpec = inv.spec.certification
    return {
        **base_extravars(inv),
        "gridready_certify_fetch_dir": str(fetch_dir),
        "gridready_certify_profile": str(c.profile),
        "gridready_certify_dcgm_level": c.effective_dcgm_level() if "dcgm" not in c.not_applicable else 0,
        "gridready_certify_skip": ["dcgm"] if "dcgm" in c.not_applicable else [],
        "gridready_certify_algo": c.nccl.algo,
        "gridready_certify_nccl_min_bytes": c.nccl.min_bytes,
        "gridready_certify_nccl_max_bytes": c.nccl.max_bytes,
        "gridready_certify_best_of": c.nccl.best_of,
        "gridready_certify_collectives": list(c.nccl.collectives),
        "gridready_certify_dcgm_precision": c.dcgm_precision,
        "gridready_certify_gate_timeout_s": c.gate_timeout_s,
        "gridready_certify_timeout_s": c.probe_timeout_s,
    }


def _in_limit(inv: Inventory, host: str, limit: str | None) -> bool:
    """A plain host/group list (`a,b` or `a:b`); patterns beyond that are left to Ansible (host kept)."""
    if not limit:
        return True
    tokens = [t for t in limit.replace(":", ",").split(",") if t]
    if any(t.startswith("!") or "*" in t or "~" in t for t in tokens):
        return True
    return any(host == t or host in inv.groups.get(t, []) for t in tokens)


def reusable(ctx: RunContext, spec: CertificationSpec, hosts: list[str]) -> dict[str, dict[str, Any]]:
    """Hosts whose last certification is still valid (certified, same profile, inside the window)."""
    if ctx.force:
        return {}
    found = latest_summary(ctx.root, ctx.customer, STAGE)
    if not found:
        return {}
    summary_path, summary = found
    out = {}
    for host in hosts:
        detail = ((summary.get("hosts") or {}).get(host) or {}).get("detail") or {}
        cert_path = Path(detail.get("certification") or summary_path.parent / "nodes" / host / "certification.json")
        try:
            cert = json.loads(cert_path.read_text())
        except (OSError, ValueError):
            continue
        if still_valid(cert, spec):
            out[host] = {"valid_until": cert["valid_until"], "certification": str(cert_path)}
    return out


def judge_probes(inv: Inventory, hosts: list[str], fetch_dir: Path) -> list[NodeVerdict]:
    spec = inv.spec.certification
    verdicts = []
    for host in hosts:
        path = fetch_dir / host / "probe.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = None
        group = inv.spec.group(inv.node_group_of(host) or "")
        verdicts.append(judge_node(spec, group, doc, node=host, node_group=group.name if group else None,
                                   driver_branch=inv.spec.software.driver_branch,
                                   evidence=f"{PROBES}/{host}/probe.json"))
    return verdicts


def fabric_results(inv: Inventory, ctx: RunContext, verdicts: list[NodeVerdict]) -> Any:
    """The multi-node phase (gridready.certify.fabric_phase, issue 6) over the nodes that passed single-node:
    its FabricResult, or None when it does not apply."""
    passed = [v.node for v in verdicts if v.certified]
    if not inv.spec.certification.fabric.enabled or len(passed) < 2:
        return None  # the fabric phase needs a pair of nodes that passed on their own
    from gridready.certify.fabric_phase import run_fabric_phase
    probe_hca = {}
    for v in verdicts:
        try:
            probe_hca[v.node] = json.loads((ctx.stage_dir(STAGE) / PROBES / v.node / "probe.json").read_text()).get(
                "hca")
        except (OSError, ValueError):
            probe_hca[v.node] = None
    return run_fabric_phase(inv, ctx, passed, probe_hca=probe_hca)


def run(inv: Inventory, ctx: RunContext) -> StageResult:
    timer = Timer()
    stage_dir = ctx.stage_dir(STAGE)
    spec = inv.spec.certification
    hosts = [h for h in inv.gpu_hosts() if _in_limit(inv, h, ctx.limit)]
    reused = reusable(ctx, spec, hosts)
    todo = [h for h in hosts if h not in reused]
    fetch_dir = stage_dir / PROBES
    messages: list[str] = []
    unreachable: list[str] = []
    playbook: dict[str, Any] = {}
    if todo:
        limit = ",".join([ctx.limit or "all", *(f"!{h}" for h in reused)]) if reused or ctx.limit else None
        result = ansible.run_playbook(inv, "certify.yml", stage_dir, check=ctx.check, limit=limit, tags=ctx.tags,
                                      extravars=extravars(inv, fetch_dir))
        unreachable = sorted(result.unreachable_hosts)
        playbook = {"runner_status": result.status, "runner_rc": result.rc, "playbook_seconds": result.seconds}
    if reused:
        messages.append(f"still certified from an earlier run (use --force to re-probe): {', '.join(sorted(reused))}")
    verdicts = judge_probes(inv, todo, fetch_dir)
    fabric = fabric_results(inv, ctx, verdicts) if todo else None
    extra = fabric.node_results if fabric is not None else {}
    fleet = judge_fleet(spec, verdicts, reused=reused, customer=inv.customer, run_id=ctx.run_id, extra=extra)
    reports = write_all(fleet, stage_dir, command=f"invoke certify ({inv.name})", fabric=fabric)
    code = ExitCode(fleet.exit_code)
    if todo and set(unreachable) >= set(todo) and not reused:
        code = ExitCode.UNREACHABLE
        messages.append(f"no node reachable: {', '.join(unreachable)}")
    messages += fleet.messages
    outcomes: dict[str, HostOutcome] = {}
    for host in hosts:
        if host in reused:
            outcomes[host] = HostOutcome(status="certified", detail={**reused[host], "reused": True})
            continue
        v = fleet.nodes[host]
        state = "unreachable" if host in unreachable else "certified" if v.certified else "quarantined"
        outcomes[host] = HostOutcome(status=state, detail={  # type: ignore[arg-type]
            "valid_until": v.valid_until, "blocking": v.blocking,
            "certification": str(stage_dir / "nodes" / host / "certification.json")})
    if ctx.check and code is ExitCode.NOT_CERTIFIED:
        code = ExitCode.OK  # check mode records verdicts and enforces none; serve never reads a check summary
        messages.append("check mode: verdicts recorded, nothing quarantined; would quarantine "
                        + ", ".join(fleet.quarantined))
    status = "success" if code is ExitCode.OK else "unreachable" if code is ExitCode.UNREACHABLE else "not-certified"
    summary = StageResult(
        stage=STAGE, customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=outcomes, messages=messages,
        data={"certified": fleet.certified, "quarantined": fleet.quarantined, "reused": sorted(reused),
              "fleet_status": fleet.status, "profile": fleet.profile, "failure_policy": fleet.failure_policy,
              "valid_until": {h: (fleet.nodes[h].valid_until if h in fleet.nodes else reused[h]["valid_until"])
                              for h in fleet.certified},
              "reports": {k: str(p.relative_to(stage_dir)) for k, p in reports.items()}, **playbook,
              "fabric": None if fabric is None else {
                  "status": fabric.status, "reason": fabric.reason, "quarantined": fabric.quarantined,
                  "pairwise_run_count": fabric.pairwise_run_count, "floor_gbps": fabric.floor_gbps,
                  "set_busbw_gbps": [r.busbw_gbps for r in fabric.set_runs]}},
    )
    summary.finished_at = Timer().started_at
    summary.write(ctx)
    return summary


def certified_nodes(summary: Mapping[str, Any]) -> list[str]:
    """For `serve`: the nodes a certify summary.json lists as certified (valid_until checked by the caller)."""
    return list((summary.get("data") or {}).get("certified") or [])


__all__ = ["STAGE", "FleetVerdict", "certified_nodes", "run"]
