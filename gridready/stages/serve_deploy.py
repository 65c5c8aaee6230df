"""Deploy the planned tiers: playbooks/serve.yml on target hosts, the Pulumi stacks on target kubernetes.

target hosts: Ray clusters, vllm-<tier> and sglang-<tier> units and the first Triton replica in one run of
serve.yml; every further Triton replica is its own `--tags triton` run limited to its hosts.
target kubernetes: stacks/platform and stacks/serving through the Automation API when the pulumi CLI exists,
else (and always with --render) only the manifests rendered from the same programs under mocks, validated
offline, written to <stage_dir>/render/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gridready import ansible, console, vault
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.contracts import HostOutcome
from gridready.errors import InvalidInput, StageFailed
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import mpi_ssh, topology
from gridready.serving.topology import Certification, TierPlan
from gridready.spec import API_KEY_ENGINES
from gridready.stages import serve_config, serve_k8s_bucket, serve_k8s_wait, serve_router
from gridready.stages.common import outcome_from_playbook
from gridready.stages.serve_config import STAGE
from gridready.yamlio import YamlError, read_capped


def hosts(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
          outcomes: dict[str, HostOutcome], data: dict[str, Any], messages: list[str]) -> tuple[str, ExitCode]:
    """Run serve.yml (once, plus once per further Triton replica); stops at the first run that fails."""
    stage_dir = ctx.stage_dir(STAGE)
    if any(p.tier.engine in API_KEY_ENGINES for p in plans):
        vault.ensure_api_key(inv.customer, inv.path)  # Ansible reads it from the vault itself, never from here
    extravars = (serve_config.hosts_extravars(inv, cert, plans)
                 | serve_router.extravars(inv, ctx.root, cert, plans, ctx.canary))
    serve_router.open_router_port(extravars)
    units = serve_config.triton_units(inv, cert, plans, stage_dir)
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
        run_status, run_code, run_outcomes = outcome_from_playbook(result)
        for host, outcome in run_outcomes.items():
            plan_entry = extravars["gridready_serve"]["hosts"].get(host, {})
            outcome.detail = {k: plan_entry.get(k) for k in ("role", "cluster", "tier", "node_ip", "env")}
            for res in result.task_results(host, "Record the firewall decision"):
                record = (res.get("ansible_facts") or {}).get("gridready_ray_node_firewall_record")
                if record:
                    outcome.detail["firewall"] = record
            if host in outcomes and outcomes[host].status != "skipped":
                outcome.changed += outcomes[host].changed
            outcomes[host] = outcome
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
    return status, code


def redeploy_embedding(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
                       plan: TierPlan, delay_us: int | None, stage: str) -> ansible.PlaybookResult:
    """The first replica of a fixed-cost tier again, with max_queue_delay_microseconds `delay_us` (None: the
    tier's own): `--tags triton` limited to its node (check mode with ctx.check); the role's handler restarts
    Triton on a changed config. Raises StageFailed when the run fails."""
    stage_dir = ctx.stage_dir(stage)
    unit_hosts, role_vars, _ = serve_config.embedding_units(inv, cert, plan, stage_dir, delay_us)[0]
    label = "configured" if delay_us is None else f"qd{delay_us}"
    run_dir = stage_dir / f"triton-{plan.tier.name}-{label}"
    run_dir.mkdir(parents=True, exist_ok=True)
    extravars = (serve_config.hosts_extravars(inv, cert, plans) | role_vars
                 | {"gridready_serve_triton_hosts": unit_hosts})
    result = ansible.run_playbook(inv, "serve.yml", run_dir, check=ctx.check, limit=",".join(unit_hosts),
                                  tags="triton", extravars=extravars)
    _status, code, _outcomes = outcome_from_playbook(result)
    if code != ExitCode.OK:
        raise StageFailed(f"tier {plan.tier.name}: redeploying with max_queue_delay_microseconds "
                          f"{label.removeprefix('qd')} failed ({result.status}, rc {result.rc}); see {run_dir}")
    return result


def _pulumi_line(stack: str) -> Callable[[str], None]:
    """Pulumi's own progress lines (resources created, waited for), passed on as they come: a rollout that waits
    for an engine build or a 70B load says what it waits for (the Automation API keeps its output otherwise)."""

    def show(line: str) -> None:
        if line.strip():
            console.info(f"[pulumi {stack}] {line.rstrip()}")

    return show


def kubeconfig(inv: Inventory) -> str:
    """serving.kubeconfig (relative to the inventory), read; exit 2 naming the key when it cannot be."""
    path = Path(inv.spec.serving.kubeconfig or "")
    path = path if path.is_absolute() else inv.path / path
    where = f"{topology.cluster_file(inv)}: serving.kubeconfig: {path}"
    try:  # a regular file of bounded size: a FIFO would block the deploy, a huge file fill the memory
        text = read_capped(path).decode("utf-8")
    except YamlError as err:
        raise InvalidInput(f"{where}: {err}") from None
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{where}: not UTF-8 (byte {err.start})") from None
    return text


def _secrets(inv: Inventory) -> dict[str, str]:
    """kubeconfig; the HF token and the vLLM API key from the customer's vault (the key generated there when
    absent): Pulumi secret config, never the plain stack config."""
    return {"kubeconfig": kubeconfig(inv), "hfToken": vault.hf_token(inv.customer, inv.path),
            "vllmApiKey": vault.ensure_api_key(inv.customer, inv.path),
            # mpirun's ssh between the pods of a multi-node Triton tier (gridready/serving/mpi_ssh.py)
            "routerKeys": serve_router.client_key_digests(inv),
            # object-storage LoRA adapters of the vLLM tiers: the bucket's credentials, env of the Ray pods
            "loraBucketEnv": serve_k8s_bucket.env_json(inv.customer, inv.path),
            "mpiSshKeys": mpi_ssh.keys_json(*(vault.ensure_ssh_key(inv.customer, inv.path, var, mpi_ssh.new_private_key)
                                              for var in (vault.MPI_CLIENT_KEY_VAR, vault.MPI_HOST_KEY_VAR)))}


def kubernetes(inv: Inventory, ctx: RunContext, cert: Certification, plans: list[TierPlan],
               data: dict[str, Any], messages: list[str]) -> tuple[str, ExitCode]:
    """Render and validate the manifests; then `pulumi up` (preview in check mode) both stacks when applying."""
    stage_dir = ctx.stage_dir(STAGE)
    configs = serve_config.stack_configs(inv, cert, plans, ctx.root, ctx.canary, ctx.canary_weight)
    data["render"] = serve_config.render_manifests(inv, cert, plans, stage_dir / "render", configs)
    if ctx.render or inv.spec.serving.target != "kubernetes":
        messages.append(f"rendered {sum(c['manifests'] for c in data['render']['counts'].values())} manifests "
                        f"to {stage_dir / 'render'} (validated)")
        return "success", ExitCode.OK
    if not gpulumi.cli_available():
        messages.append("the pulumi CLI is not installed: manifests rendered (not applied) to "
                        f"{stage_dir / 'render'}")
        return "success", ExitCode.OK
    secrets = _secrets(inv)
    where = f"{topology.cluster_file(inv)}: serving.kubeconfig"
    # the status reader's kubeconfig is checked (exit 2) before anything is applied
    api = None if ctx.check else serve_k8s_wait.ApiReader(secrets["kubeconfig"], where)
    state = gpulumi.state_dir(inv.customer)  # apart from artifacts/, which CI uploads
    outputs: dict[str, Any] = {}
    for stack, config in configs.items():
        wanted = {k: secrets[k] for k in gpulumi.SECRET_KEYS[stack]}
        outputs[stack] = gpulumi.up(stack, inv.customer, config, wanted, state, preview=ctx.check,
                                    on_output=_pulumi_line(stack))
    data["pulumi"] = outputs
    if api is not None:  # pulumi up returns before the custom resources serve (pulumi-kubernetes #3143)
        serve_k8s_wait.after_up(secrets["kubeconfig"], where, stage_dir / "render" / "serving" / "manifests.yaml",
                                inv.spec.serving.ready_timeout_s, data, messages, reader=api)
    messages.append("kubernetes: bench runs from inside the cluster (endpoints are ClusterIP Services)")
    return "success", ExitCode.OK
