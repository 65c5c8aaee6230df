"""Step 3, deploy: what the render step made, applied: playbooks/serve.yml on target hosts, the Pulumi stacks on
target kubernetes.

target hosts: Ray clusters, vllm-<tier> and sglang-<tier> units and the first Triton replica in one run of
serve.yml; every further Triton replica is its own `--tags triton` run limited to its hosts.
target kubernetes: stacks/platform and stacks/serving through the Automation API when the pulumi CLI exists,
else (and always with --render) only the manifests the render step wrote (nothing applied).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gridready import ansible, console, vault
from gridready import pulumi as gpulumi
from gridready.artifacts import make_dirs
from gridready.errors import GridreadyError, InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import mpi_ssh, topology
from gridready.stages.common import outcome_from_playbook
from gridready.stages.serve import k8s_bucket, k8s_verify, k8s_wait
from gridready.stages.serve import router as serve_router
from gridready.stages.serve.context import STAGE, Deployed, KubernetesServed, Rendered
from gridready.yamlio import YamlError, read_capped


def hosts(rendered: Rendered) -> tuple[str, ExitCode]:
    """Run serve.yml (once, plus once per further Triton replica); stops at the first run that fails."""
    inv, ctx = rendered.ctx.inv, rendered.ctx.run
    outcomes, data, messages = rendered.ctx.hosts, rendered.ctx.data, rendered.ctx.messages
    stage_dir = ctx.stage_dir(STAGE)
    extravars, units = rendered.extravars, rendered.triton_units
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
        make_dirs(run_dir)
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


def _pulumi_line(stack: str) -> Callable[[str], None]:
    """Pulumi's own progress lines (resources created, waited for), passed on as they come: a rollout that waits
    for an engine build or a 70B load says what it waits for (the Automation API keeps its output otherwise)."""

    def show(line: str) -> None:
        if line.strip():
            console.info(f"[pulumi {stack}] {line.rstrip()}")

    return show


def kubeconfig(inv: Inventory) -> str:
    """serving.kubeconfig (relative to the inventory, and then read beneath it: no link or `..` out; an absolute
    path is the operator's choice), read; exit 2 naming the key when it cannot be."""
    path = Path(inv.spec.serving.kubeconfig or "")
    root = None if path.is_absolute() else inv.path
    path = path if path.is_absolute() else inv.path / path
    where = f"{topology.cluster_file(inv)}: serving.kubeconfig: {path}"
    try:  # a regular file of bounded size: a FIFO would block the deploy, a huge file fill the memory
        text = read_capped(path, root=root).decode("utf-8")
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
            "loraBucketEnv": k8s_bucket.env_json(inv.customer, inv.path),
            "mpiSshKeys": mpi_ssh.keys_json(*(vault.ensure_ssh_key(inv.customer, inv.path, var, mpi_ssh.new_private_key)
                                              for var in (vault.MPI_CLIENT_KEY_VAR, vault.MPI_HOST_KEY_VAR)))}


def kubernetes(rendered: Rendered) -> tuple[str, ExitCode, KubernetesServed | None]:
    """`pulumi up` (preview in check mode) both stacks with the rendered config, unless only rendering; then the
    wait for every workload and, unless the checks are skipped, the router's URL for verify."""
    inv, ctx = rendered.ctx.inv, rendered.ctx.run
    data, messages, configs = rendered.ctx.data, rendered.ctx.messages, rendered.stack_configs
    stage_dir = ctx.stage_dir(STAGE)
    if ctx.render or inv.spec.serving.target != "kubernetes":
        return "success", ExitCode.OK, None
    if not gpulumi.cli_available():
        messages.append("the pulumi CLI is not installed: manifests rendered (not applied) to "
                        f"{stage_dir / 'render'}")
        return "success", ExitCode.OK, None
    secrets = _secrets(inv)
    where = f"{topology.cluster_file(inv)}: serving.kubeconfig"
    # the status reader's kubeconfig, and how serve reaches the tiers through the router, are checked (exit 2)
    # before anything is applied
    api = None if ctx.check else k8s_wait.ApiReader(secrets["kubeconfig"], where)
    reach = None if ctx.check else k8s_verify.reach(inv, ctx.root, rendered.plans)
    state = gpulumi.state_dir(inv.customer)  # apart from artifacts/, which CI uploads
    outputs: dict[str, Any] = {}
    for stack, config in configs.items():
        wanted = {k: secrets[k] for k in gpulumi.SECRET_KEYS[stack]}
        outputs[stack] = gpulumi.up(stack, inv.customer, config, wanted, state, preview=ctx.check,
                                    on_output=_pulumi_line(stack))
    data["pulumi"] = outputs
    if api is None:
        return "success", ExitCode.OK, None
    # pulumi up returns before the custom resources serve (pulumi-kubernetes #3143)
    watches = k8s_wait.after_up(secrets["kubeconfig"], where, stage_dir / "render" / "serving" / "manifests.yaml",
                                inv.spec.serving.ready_timeout_s, data, messages, reader=api)
    if reach is None:
        messages.append(f"kubernetes: readiness, smoke, benchmark and SLO gate skipped ({k8s_verify.SKIP_ENV})")
        return "success", ExitCode.OK, None
    url = k8s_verify.router_url(reach, api)
    messages.append(f"kubernetes: the router answers at {url} ({reach.how})")
    return "success", ExitCode.OK, KubernetesServed(reach=reach, url=url, read=api, watches=watches)


def run(rendered: Rendered) -> Deployed:
    ctx = rendered.ctx
    served = None
    if rendered.proceeds:
        with ctx.failing_on(GridreadyError):
            if rendered.on_hosts:
                ctx.outcome(*hosts(rendered))
            else:
                status, code, served = kubernetes(rendered)
                ctx.outcome(status, code)
    return Deployed.after(rendered, k8s=served)
