"""serve: the serving tiers on certified nodes only, then readiness, smoke, benchmark and the SLO gate.

1. Certification from disk (the newest certify summary.json), fail closed: none, stale, check-mode or error ->
   exit 5. Quarantined nodes are left out; tiers are sized on what remains (too few -> exit 5; a TP x PP that
   can never fit the inventory -> exit 2).
2. target hosts: playbooks/serve.yml (Ray clusters + vllm-<tier> units; Triton role for Triton tiers).
   target kubernetes: stacks/platform and stacks/serving through the Automation API when the pulumi CLI
   exists, else (and always with --render) the manifests rendered from the same programs under mocks,
   validated offline, written to <stage_dir>/render/.
3. gridready.bench per tier (hosts target): readiness -> smoke -> benchmark -> SLO gate, decision record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gridready import ansible, bench, contracts, vault
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.bench.endpoint import Endpoint as BenchEndpoint
from gridready.contracts import CertifySummary, Endpoint, HostOutcome, ServeSummary
from gridready.errors import GridreadyError, InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.monitoring.write import write_monitoring
from gridready.serving import consistency, manifests, sglang, topology, triton, vllm
from gridready.serving.topology import Certification, TierPlan
from gridready.stages import serve_router
from gridready.stages.common import Timer, base_extravars, outcome_from_playbook
from gridready.stages.fabric import SshRunner

STAGE = "serve"
# SIMULATED sandbox hosts (2 vCPUs, a small /dev/shm): Ray gets explicit, small resources there
SANDBOX_RAY = {"num_cpus": 1, "memory_bytes": 2_000_000_000, "object_store_bytes": 100_000_000,
               "include_dashboard": False}
# the sandbox image ships ray[client]; the dashboard extras would need the network the hosts do not have
SANDBOX_RAY_PIP = "ray=={version}"


def engine_mode(inv: Inventory) -> str:
    """simulated on sandbox inventories (they have sandbox.yml), real vLLM elsewhere."""
    return "simulated" if (inv.path / "sandbox.yml").exists() else "vllm"


def _result(inv: Inventory, ctx: RunContext, timer: Timer, status: str, code: ExitCode,
            hosts: dict[str, HostOutcome], messages: list[str], data: dict[str, Any],
            cert: Certification | None = None, endpoints: list[Endpoint] | None = None) -> ServeSummary:
    return ServeSummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, hosts=hosts, messages=messages,
        data=data, certification=cert.source if cert else None, endpoints=endpoints or [],
    ).close(ctx)


def current_certification(inv: Inventory, ctx: RunContext) -> Certification:
    """The newest certify summary, validated against its contract (exit 2 when foreign), read fail closed."""
    return topology.read_certification(inv, contracts.latest(ctx.root, inv.customer, CertifySummary))


def endpoints(plans: list[TierPlan], cert: Certification) -> list[Endpoint]:
    """Where each tier answers on target hosts (its first replica's head), for clients and `invoke bench`."""
    out = []
    for plan in plans:
        heads = [r.head for r in plan.replicas]
        ep = BenchEndpoint.for_tier(plan.tier, cert.certified[heads[0]].ip)
        out.append(Endpoint(tier=plan.tier.name, engine=plan.tier.engine, api=str(ep.api), model=ep.model,
                            url=ep.url, metrics_url=ep.metrics_url, heads=heads))
    return out


def plan_summary(plans: list[TierPlan], cert: Certification) -> list[dict[str, Any]]:
    return [{
        "tier": p.tier.name, "engine": p.tier.engine, "node_group": p.group.name,
        "tensor_parallel": p.tensor_parallel, "pipeline_parallel": p.pipeline_parallel,
        "nodes_per_replica": p.nodes_per_replica,
        "replicas": [{"index": r.index, "head": r.head, "head_ip": cert.certified[r.head].ip,
                      "workers": list(r.workers)} for r in p.replicas],
    } for p in plans]


def run(inv: Inventory, ctx: RunContext) -> ServeSummary:
    timer = Timer()
    ctx.stage_dir(STAGE)
    hosts: dict[str, HostOutcome] = {}
    try:
        cert = current_certification(inv, ctx)
        for host in cert.quarantined:
            hosts[host] = HostOutcome(status="skipped", detail={"reason": "quarantined or not certified"})
        plans = topology.plan_tiers(inv, cert)
    except (NotCertified, InvalidInput) as err:
        status = "not-certified" if err.code == ExitCode.NOT_CERTIFIED else "error"
        return _result(inv, ctx, timer, status, err.code, hosts, str(err).splitlines(), {})
    data: dict[str, Any] = {"certification": cert.source, "certified": sorted(cert.certified),
                            "quarantined": cert.quarantined, "plan": plan_summary(plans, cert)}
    messages = list(cert.messages)
    if not plans:
        return _result(inv, ctx, timer, "success", ExitCode.OK, hosts, [*messages, "no serving tiers"], data, cert)
    try:
        if ctx.render or inv.spec.serving.target == "kubernetes":
            status, code = _kubernetes(inv, ctx, cert, plans, data, messages)
        else:
            status, code = _hosts(inv, ctx, cert, plans, hosts, data, messages)
    except GridreadyError as err:
        status = {ExitCode.NOT_CERTIFIED: "not-certified", ExitCode.INVALID: "error"}.get(err.code, "failed")
        code = err.code
        messages += str(err).splitlines()
    served = endpoints(plans, cert) if inv.spec.serving.target == "hosts" and not ctx.render else []
    return _result(inv, ctx, timer, status, code, hosts, messages, data, cert, served)


def render(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    """What `invoke plan` shows: the sizing on the current certification, then the validated manifests
    (target kubernetes, written to <stage_dir>/render) or each node's Ray role, env and each tier's command."""
    try:
        cert = current_certification(inv, ctx)
        plans = topology.plan_tiers(inv, cert)
    except (NotCertified, InvalidInput) as err:
        return {"refused": str(err), "exit_code": int(err.code)}
    out: dict[str, Any] = {"target": inv.spec.serving.target, "plan": plan_summary(plans, cert),
                           "quarantined": cert.quarantined}
    if inv.spec.serving.target == "kubernetes":
        out["manifests"] = render_manifests(inv, cert, plans, ctx.stage_dir(STAGE) / "render")
    else:
        serve_vars = hosts_extravars(inv, cert, plans)["gridready_serve"]
        out["engine_mode"] = serve_vars["engine_mode"]
        out["hosts"] = {h: {k: v[k] for k in ("role", "cluster", "node_ip", "head_address", "env")}
                        for h, v in serve_vars["hosts"].items()}
        out["tiers"] = [{k: t[k] for k in ("name", "head", "expected_gpus", "expected_nodes", "args")}
                        for t in serve_vars["tiers"]]
    return out


# --- target hosts -------------------------------------------------------------------------------------------

def hosts_extravars(inv: Inventory, cert: Certification, plans: list[TierPlan]) -> dict[str, Any]:
    mode = engine_mode(inv)
    out = base_extravars(inv) | vllm.hosts_extravars(plans, cert, inv.spec.serving, mode)
    out["gridready_serve"]["sglang_units"] = sglang.units(plans, cert, inv.spec.serving, mode)
    if mode == "simulated":
        out["gridready_serve"]["ray_sizing"] = dict(SANDBOX_RAY)
        out["gridready_serve"]["ray_pip_spec"] = SANDBOX_RAY_PIP.format(version=inv.spec.serving.ray_version)
    return out


def triton_units(inv: Inventory, cert: Certification, plans: list[TierPlan], stage_dir: Path
                 ) -> list[tuple[list[str], dict[str, Any], dict[str, Any]]]:
    """Per Triton tier replica: (its hosts, role variables of gridready_triton_trtllm, summary entry).

    gridready.serving.triton renders and validates the model repository."""
    tiers = [p for p in plans if p.tier.engine == "triton-trtllm"]
    if not tiers:
        return []

    units = []
    for plan in tiers:
        tplan = triton.plan_for(plan, simulated=engine_mode(inv) == "simulated")
        repo = triton.write_repository(tplan, stage_dir / "triton" / plan.tier.name / "repo")
        for replica in plan.replicas:
            addresses = [cert.certified[n].ip for n in replica.nodes]
            units.append((list(replica.nodes), triton.hosts_extravars(tplan, repo, addresses),
                          triton.summary_entry(tplan, repo)))
    return units


def _hosts(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
           hosts: dict[str, HostOutcome], data: dict[str, Any], messages: list[str]) -> tuple[str, ExitCode]:
    stage_dir = ctx.stage_dir(STAGE)
    if any(p.tier.engine == "vllm" for p in plans):
        vault.ensure_api_key(inv.customer, inv.path)  # Ansible reads it from the vault itself, never from here
    extravars = hosts_extravars(inv, cert, plans) | serve_router.extravars(inv, ctx.root, cert, plans)
    serve_router.open_router_port(extravars)
    data["engine_mode"] = extravars["gridready_serve"]["engine_mode"]
    units = triton_units(inv, cert, plans, stage_dir)
    data["triton"] = [entry for _, _, entry in units]
    # the first Triton replica rides along with Ray and vLLM; each further one is its own `--tags triton` run
    runs: list[tuple[dict[str, Any], str | None, str | None, Path]] = []
    first_vars = units[0][1] if units else {}
    runs.append((extravars | first_vars | {"gridready_serve_triton_hosts": units[0][0] if units else []},
                 ctx.limit, ctx.tags, stage_dir))
    for unit_hosts, role_vars, _ in units[1:]:
        runs.append((extravars | role_vars | {"gridready_serve_triton_hosts": unit_hosts}, ",".join(unit_hosts),
                     "triton", stage_dir / f"triton-{role_vars.get('gridready_triton_trtllm_tier', 'tier')}-"
                                           f"{unit_hosts[0]}"))
    status, code = "success", ExitCode.OK
    changed: list[str] = []
    for run_vars, limit, tags, run_dir in runs:
        run_dir.mkdir(parents=True, exist_ok=True)
        result = ansible.run_playbook(inv, "serve.yml", run_dir, check=ctx.check, limit=limit, tags=tags,
                                      extravars=run_vars)
        run_status, run_code, outcomes = outcome_from_playbook(result)
        for host, outcome in outcomes.items():
            plan_entry = extravars["gridready_serve"]["hosts"].get(host, {})
            outcome.detail = {k: plan_entry.get(k) for k in ("role", "cluster", "tier", "node_ip", "env")}
            for res in result.task_results(host, "Record the firewall decision"):
                record = (res.get("ansible_facts") or {}).get("gridready_ray_node_firewall_record")
                if record:
                    outcome.detail["firewall"] = record
            if host in hosts and hosts[host].status != "skipped":
                outcome.changed += hosts[host].changed
            hosts[host] = outcome
        changed += result.changed_hosts
        data.setdefault("playbook_runs", []).append({
            "playbook": result.playbook, "limit": limit, "tags": tags, "runner_status": result.status,
            "runner_rc": result.rc, "seconds": result.seconds})
        if run_code != ExitCode.OK:
            bad = result.failed_hosts + result.unreachable_hosts
            messages.append(f"serve.yml ({result.status}, rc {result.rc}) failed on {', '.join(bad) or 'no host'}; "
                            f"see {run_dir}/ansible-serve")
            status, code = run_status, run_code
            break
    if code == ExitCode.OK and ctx.check and changed:
        messages.append(f"check mode: changes pending on {', '.join(sorted(set(changed)))}")
        return "changes-pending", ExitCode.CHANGES_PENDING
    if code != ExitCode.OK or ctx.check:
        return status, code
    return verify_tiers(inv, ctx, cert, plans, data, messages)


def unit_name(tier: Any) -> str:
    """The systemd unit that serves a tier on its head node (roles gridready_vllm, gridready_triton_trtllm)."""
    if tier.engine == "sglang":
        return f"sglang-{tier.name}"  # role gridready_sglang
    return f"vllm-{tier.name}" if tier.engine == "vllm" else f"gridready-triton-{tier.name}"


def unit_probes(inv: Inventory, host: str, unit: str) -> tuple[Any, Any]:
    """(unit state, last log lines) of `unit` on `host` over SSH, for the not-ready report."""
    runner = SshRunner.from_inventory(inv)

    def state() -> str:
        res = runner.run(host, ["systemctl", "is-active", unit], 20)
        return f"{unit} on {host}: {res.stdout.strip() or res.stderr.strip() or 'unknown'}"

    def logs() -> list[str]:
        res = runner.run(host, ["journalctl", "-u", unit, "-n", "20", "--no-pager", "-o", "cat"], 20)
        return res.stdout.splitlines()[-20:]

    return state, logs


def verify_tiers(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan], data: dict[str, Any],
           messages: list[str], stage: str = STAGE) -> tuple[str, ExitCode]:
    """Readiness, smoke, benchmark and SLO gate per tier (first replica's head), decision per model."""
    if os.environ.get("GRIDREADY_SERVE_SKIP_BENCH"):
        messages.append("benchmark skipped (GRIDREADY_SERVE_SKIP_BENCH)")
        return "success", ExitCode.OK
    stage_dir = ctx.stage_dir(stage)
    api_key = vault.ensure_api_key(inv.customer, inv.path) if any(p.tier.engine == "vllm" for p in plans) else None
    reports = []
    reuse = inv.spec.serving.decision.prefix_reuse
    workload = (bench.Workload(shared_prefix_len=reuse.system_prompt_tokens, shared_prefix_share=reuse.share)
                if reuse else bench.Workload())
    for plan in plans:
        head = plan.replicas[0].head
        endpoint = bench.Endpoint.for_tier(plan.tier, cert.certified[head].ip, api_key=api_key)
        unit_state, log_lines = unit_probes(inv, head, unit_name(plan.tier))
        reports.append(bench.verify_tier(endpoint, plan.tier, workload,
                                         gpus=plan.gpus,
                                         ready_timeout_s=float(inv.spec.serving.wait_timeout_s),
                                         unit_state=unit_state, log_lines=log_lines))
    bench.write_tier_reports(stage_dir, reports, inv.customer)
    write_monitoring(stage_dir / "monitoring", inv.customer, [p.tier for p in plans], target="hosts",
                     tier_hosts={p.tier.name: [cert.certified[r.head].ip for r in p.replicas] for p in plans},
                     nodes=[c.ip for c in cert.certified.values()])
    by_model: dict[str, list[Any]] = {}
    for plan, report in zip(plans, reports, strict=True):
        by_model.setdefault(plan.tier.model.source, []).append(report)
    for model, group in by_model.items():
        if len(group) > 1:
            decision = bench.decide(group, inv.spec.serving.decision)
            bench.write_decision(stage_dir / "decision" / model.replace("/", "--"), decision, group)
    data["bench"] = {r.tier: {"passed": r.gate.passed, "message": r.gate.message, "simulated": r.simulated}
                     for r in reports}
    serve_router.measure_overhead(inv.spec.serving.router, cert, plans, data, messages)
    failed = [r for r in reports if not r.gate.passed]
    messages += [r.gate.message for r in failed]
    return ("failed", ExitCode.STAGE_FAILED) if failed else ("success", ExitCode.OK)


# --- target kubernetes --------------------------------------------------------------------------------------

def stack_configs(inv: Inventory, cert: Certification, plans: list[TierPlan]) -> dict[str, dict[str, Any]]:
    groups = {h: inv.node_group_of(h) or "" for h in inv.gpu_hosts()}
    serving = inv.spec.serving
    config = vllm.serving_stack_config(inv.customer, serving, cert, plans)
    triton_plans = [p for p in plans if p.tier.engine == "triton-trtllm"]
    if triton_plans:  # the Triton stack component builds its own config from its plan
        k = serving.kubernetes
        component = gpulumi.stack_module("serving", "triton")
        config["triton_tiers"] = [
            component.tier_config(triton.plan_for(p, simulated=False), k.namespace, env=vllm.pod_env(p, cert, serving),
                                  rdma_resource=k.rdma_resource, gpu_product_label=k.gpu_product_label)
            for p in triton_plans
        ]
    config["sglang_tiers"] = [sglang.k8s_tier(p, vllm.pod_env(p, cert, serving), serving)
                              for p in plans if p.tier.engine == "sglang"]
    return {
        "platform": vllm.platform_stack_config(inv.customer, serving, cert, inv.hosts, groups),
        "serving": config,
    }


def render_manifests(inv: Inventory, cert: Certification, plans: list[TierPlan], out_dir: Path) -> dict[str, Any]:
    """Render both stacks under mocks, validate every manifest, write them; InvalidInput when one is invalid."""
    k8s_version = inv.spec.serving.kubernetes.kubernetes_version
    written, errors, counts = [], [], {}
    docs: list[dict[str, Any]] = []
    releases: list[dict[str, Any]] = []
    for stack, config in stack_configs(inv, cert, plans).items():
        rendered = gpulumi.render(stack, config, inv.customer)
        errors += manifests.validate(rendered.manifests, k8s_version)
        docs += rendered.manifests
        releases += rendered.helm_releases
        written += [str(p) for p in gpulumi.write_rendered(rendered, out_dir)]
        counts[stack] = {"manifests": len(rendered.manifests), "helm_releases": len(rendered.helm_releases)}
    errors += consistency.check(docs, releases)
    if errors:
        raise GridreadyError("rendered manifests do not validate:\n" + "\n".join(errors), ExitCode.STAGE_FAILED)
    return {"files": written, "counts": counts, "validated_against": f"kubernetes {k8s_version} + CRDs"}


def _secrets(inv: Inventory) -> dict[str, str]:
    """kubeconfig from serving.kubeconfig (relative to the inventory), HF token from the environment (vault), the
    vLLM API key from the customer's vault (generated there when absent): Pulumi secret config, never plain."""
    path = Path(inv.spec.serving.kubeconfig or "")
    path = path if path.is_absolute() else inv.path / path
    try:
        kubeconfig = path.read_text()
    except OSError as err:
        raise InvalidInput(f"{topology.cluster_file(inv)}: serving.kubeconfig: cannot read {path}: "
                           f"{err.strerror}") from err
    return {"kubeconfig": kubeconfig, "hfToken": os.environ.get("GRIDREADY_HF_TOKEN", ""),
            "vllmApiKey": vault.ensure_api_key(inv.customer, inv.path)}


def _kubernetes(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
                data: dict[str, Any], messages: list[str]) -> tuple[str, ExitCode]:
    stage_dir = ctx.stage_dir(STAGE)
    data["render"] = render_manifests(inv, cert, plans, stage_dir / "render")
    if ctx.render or inv.spec.serving.target != "kubernetes":
        messages.append(f"rendered {sum(c['manifests'] for c in data['render']['counts'].values())} manifests "
                        f"to {stage_dir / 'render'} (validated)")
        return "success", ExitCode.OK
    if not gpulumi.cli_available():
        messages.append("the pulumi CLI is not installed: manifests rendered (not applied) to "
                        f"{stage_dir / 'render'}")
        return "success", ExitCode.OK
    secrets = _secrets(inv)
    state = gpulumi.state_dir(inv.customer)  # apart from artifacts/, which CI uploads
    outputs: dict[str, Any] = {}
    for stack, config in stack_configs(inv, cert, plans).items():
        wanted = {k: secrets[k] for k in gpulumi.SECRET_KEYS[stack]}
        outputs[stack] = gpulumi.up(stack, inv.customer, config, wanted, state, preview=ctx.check)
    data["pulumi"] = outputs
    messages.append("kubernetes: bench runs from inside the cluster (endpoints are ClusterIP Services)")
    return "success", ExitCode.OK
