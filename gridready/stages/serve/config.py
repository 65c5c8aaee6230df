"""What `serve` hands each target, built from the certification and the tier plans, and nothing run.

target hosts: the extra variables of playbooks/serve.yml (Ray topology and sizing, vLLM and SGLang
units) and, per Triton replica, the role variables of gridready_triton_trtllm with its rendered model repository.
target kubernetes: the config of the Pulumi stacks `platform` and `serving`, and the manifests rendered from them
under mocks and validated offline. The render step calls these for the run; the embedding redeploy
(gridready/stages/serve/embedding.py), the canary's router runs and the drain's router play read them again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gridready import ledger
from gridready import pulumi as gpulumi
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, project_root, site_pins
from gridready.monitoring.prometheus import kubernetes_monitors
from gridready.serving import consistency, manifests, sglang, topology, triton, vllm, weights
from gridready.serving.topology import Certification, TierPlan
from gridready.serving.triton import embedding as triton_embedding
from gridready.stacks.serving import triton as triton_stack
from gridready.stages.common import base_extravars
from gridready.stages.serve import router as serve_router

# --- target hosts -------------------------------------------------------------------------------------------

def hosts_extravars(inv: Inventory, cert: Certification, plans: list[TierPlan]) -> dict[str, Any]:
    out = base_extravars(inv) | vllm.hosts_extravars(plans, cert, inv.spec.serving)
    out["gridready_serve"]["sglang_units"] = sglang.units(plans, cert, inv.spec.serving)
    out["gridready_serve"]["model_downloads"] = weights.downloads_by_host(plans)
    sizing = inv.spec.serving.ray_node
    out["gridready_serve"]["ray_sizing"] = {
        "num_cpus": sizing.num_cpus or 0, "memory_bytes": sizing.memory_bytes or 0,
        "object_store_bytes": sizing.object_store_bytes or 0, "include_dashboard": sizing.include_dashboard}
    return out


def triton_units(inv: Inventory, cert: Certification, plans: list[TierPlan], stage_dir: Path
                 ) -> list[tuple[list[str], dict[str, Any], dict[str, Any]]]:
    """Per Triton tier replica: (its hosts, role variables of gridready_triton_trtllm, summary entry).

    gridready.serving.triton renders and validates the model repository."""
    units = []
    for plan in plans:
        if plan.tier.engine == "triton-embedding":
            units += embedding_units(inv, cert, plan, stage_dir)
            continue
        if plan.tier.engine != "triton-trtllm":
            continue
        tplan = triton.plan_for(plan, site_pins=site_pins(inv.path),
                                source=topology.cluster_file(inv))
        repo = triton.write_repository(tplan, stage_dir / "triton" / plan.tier.name / "repo")
        for replica in plan.replicas:
            addresses = [cert.certified[n].ip for n in replica.nodes]
            units.append((list(replica.nodes), triton.hosts_extravars(tplan, repo, addresses),
                          triton.summary_entry(tplan, repo)))
    return units


def embedding_units(inv: Inventory, cert: Certification, plan: TierPlan, stage_dir: Path,
                    delay_us: int | None = None) -> list[tuple[list[str], dict[str, Any], dict[str, Any]]]:
    """Per replica of a fixed-cost tier: (its node, role variables, summary entry); `delay_us` overrides
    max_queue_delay_microseconds (the queue-delay sweep)."""
    eplan = triton_embedding.plan_for(plan, site_pins=site_pins(inv.path),
                                      source=topology.cluster_file(inv))
    repo = triton_embedding.write_repository(eplan, stage_dir / "triton" / plan.tier.name / "repo", delay_us)
    return [(list(replica.nodes),
             triton_embedding.hosts_extravars(eplan, repo, [cert.certified[n].ip for n in replica.nodes]),
             triton_embedding.summary_entry(eplan, repo))
            for replica in plan.replicas]


# --- target kubernetes --------------------------------------------------------------------------------------

def drained_nodes(root: Path, customer: str) -> frozenset[str]:
    """The nodes the watcher drained, from the ledger (none without one)."""
    return frozenset(n for n, e in ledger.read(root, customer)[1].nodes.items() if e.drained)


def stack_configs(inv: Inventory, cert: Certification, plans: list[TierPlan], root: Path | None = None,
                  canary: str | None = None, canary_weight: int = 0) -> dict[str, dict[str, Any]]:
    """Both stacks' config; `root`: the artifacts root whose decision records weight the routes that ask for it
    (default: the project's artifacts/); `canary` at canary_weight % in its route's HTTPRoute."""
    groups = {h: inv.node_group_of(h) or "" for h in inv.gpu_hosts()}
    serving = inv.spec.serving
    config = vllm.serving_stack_config(inv.customer, serving, cert, plans)
    triton_plans = [p for p in plans if p.tier.engine == "triton-trtllm"]
    if triton_plans:  # the Triton stack component builds its own config from its plan
        k = serving.kubernetes
        config["triton_tiers"] = [
            triton_stack.tier_config(triton.plan_for(p, site_pins=site_pins(inv.path),
                                                     source=topology.cluster_file(inv)), k.namespace,
                                     env=vllm.pod_env(p, cert, serving), rdma_resource=k.rdma_resource,
                                     mpi_image=k.triton_mpi_image,
                                     gpu_product_label=k.gpu_product_label, storage_class=k.storage_class,
                                     weights_size=k.weights_volume_size, engine_cache_size=k.engine_cache_size,
                                     engine_cache_access_mode=k.pvc_access_mode)
            for p in triton_plans
        ]
    config["sglang_tiers"] = [sglang.k8s_tier(p, vllm.pod_env(p, cert, serving), serving)
                              for p in plans if p.tier.engine == "sglang"]
    config["router_routes"] = serve_router.k8s_routes(inv, root or project_root() / "artifacts", plans, canary,
                                                      canary_weight)
    config["router"] = serve_router.k8s_router(inv, root or project_root() / "artifacts", plans, canary,
                                               canary_weight)
    return {
        "platform": vllm.platform_stack_config(inv.customer, serving, cert, inv.hosts, groups,
                                               drained_nodes(root or project_root() / "artifacts", inv.customer)),
        "serving": config,
    }


def render_manifests(inv: Inventory, cert: Certification, plans: list[TierPlan], out_dir: Path,
                     configs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Render both stacks under mocks, validate every manifest, write them; exit 3 when one is invalid."""
    k8s_version = inv.spec.serving.kubernetes.kubernetes_version
    written, errors, counts = [], [], {}
    docs: list[dict[str, Any]] = []
    releases: list[dict[str, Any]] = []
    for stack, config in (configs or stack_configs(inv, cert, plans)).items():
        rendered = gpulumi.render(stack, config, inv.customer)
        errors += manifests.validate(rendered.manifests, k8s_version)
        docs += rendered.manifests
        releases += rendered.helm_releases
        written += [str(p) for p in gpulumi.write_rendered(rendered, out_dir)]
        counts[stack] = {"manifests": len(rendered.manifests), "helm_releases": len(rendered.helm_releases)}
    # the Prometheus operator's monitors (written beside the manifests) are checked against the tiers' Services and
    # pods too; their controller is the customer's, outside the stacks
    k = inv.spec.serving.kubernetes
    monitors = kubernetes_monitors(inv.customer, [p.tier for p in plans], k.namespace)
    errors += consistency.check([*docs, *monitors], releases,
                                external_controllers={"monitoring.coreos.com": "the customer's Prometheus operator"},
                                monitoring_namespaces=k.monitoring_namespaces)
    if errors:
        raise GridreadyError("rendered manifests do not validate:\n" + "\n".join(errors), ExitCode.STAGE_FAILED)
    return {"files": written, "counts": counts, "validated_against": f"kubernetes {k8s_version} + CRDs"}
