"""`invoke plan`: what each stage would do, without changing anything.

provision runs in Ansible check mode (with --diff); certify lists the gates per node group and profile;
serve renders what would be deployed (manifests for Kubernetes, units and engine arguments for hosts).
`invoke plan --offline` reads the inventory alone (no SSH, no fleet): per host the roles provision would run and
what each is set to do, per node group the gates certification judges, per tier where and how it would serve.
"""

from __future__ import annotations

from typing import Any

from gridready import console
from gridready.artifacts import RunContext, write_json_atomic
from gridready.inventory import Inventory
from gridready.provision_vars import role_vars
from gridready.spec.gates import FABRIC_GATE_NAMES, FLEET_GATE_NAMES, NODE_GATE_NAMES
from gridready.spec.parallel import resolve
from gridready.stages import provision, serve


def _certify_plan(inv: Inventory) -> dict[str, Any]:
    cert = inv.spec.certification
    return {
        "profile": cert.profile.value,
        "dcgm_level": cert.effective_dcgm_level(),
        "nccl": cert.nccl.model_dump(),
        "waived": cert.waive,
        "not_applicable": cert.not_applicable,
        "groups": {g.name: {"sku": g.catalog_sku.name, "nodes": inv.groups.get(g.name, [])}
                   for g in inv.spec.node_groups},
    }


# playbooks/provision.yml `__gridready_provision_roles`, in its order
PROVISION_ROLES = ("preflight", "nvidia_driver", "fabricmanager", "nccl", "dcgm", "rdma", "container_engine",
                   "container_toolkit", "probe_runtime", "host_tuning")


def _roles(v: dict[str, Any]) -> dict[str, str]:
    """What each provision role is set to do on a host of a group with role variables `v` (provision_vars)."""
    fm = "skipped: no NVSwitch (not an HGX 8-GPU board)" if not v["gridready_fabricmanager_nvswitch"] else \
        "nvidia-fabricmanager at the driver's version" if v.get("gridready_fabricmanager_on_node", True) else \
        "skipped: runs in the host or service VM of this passthrough guest (fabric state still checked)"
    nccl_tests = ("from the release gridready ships" if v.get("gridready_nccl_tests_bundled_tarball")
                  else "from upstream, checksum " + v.get("gridready_nccl_tests_checksum", "(none: set one)"))
    gdr = "nvidia-peermem" if v["gridready_rdma_peermem"] else "DMA-BUF"
    rdma = "skipped: no InfiniBand/RoCE NIC in the group" if not v["gridready_rdma_enabled"] else \
        f"{v['gridready_rdma_stack']} stack, GPUDirect via {gdr}"
    torch = v.get("gridready_probe_runtime_torch_version")
    return {
        "preflight": f"OS {', '.join(v['gridready_preflight_supported_os'])}, kernel >= "
                     f"{v['gridready_preflight_min_kernel']}, {v['gridready_preflight_gpu_count']} GPUs "
                     f"{v['gridready_preflight_gpu_device_id']}",
        "nvidia_driver": f"branch {v['gridready_nvidia_driver_branch']}, release "
                         f"{v['gridready_nvidia_driver_version'] or 'the newest of the branch'}, "
                         f"{'open' if v.get('gridready_nvidia_driver_open_kernel_modules', True) else 'proprietary'} "
                         "kernel modules",
        "fabricmanager": fm,
        "nccl": f"libnccl2 {v['gridready_nccl_version']}+cuda{v['gridready_nccl_cuda']}, nccl-tests "
                f"{v['gridready_nccl_tests_version']} {nccl_tests}",
        "dcgm": f"DCGM {v['gridready_dcgm_major']} for CUDA {v['gridready_dcgm_cuda_major']}",
        "rdma": rdma,
        "container_engine": "Docker Engine from Docker's repository (roles/gridready_container_engine defaults)",
        "container_toolkit": "NVIDIA Container Toolkit, the installed runtimes configured for the GPUs",
        "probe_runtime": f"PyTorch {torch} for the GPU gates" if torch else "none (software.probe_torch: null)",
        "host_tuning": f"iommu=pt {'on' if v['gridready_host_tuning_iommu_passthrough'] else 'off'}, ACS "
                       f"{v['gridready_host_tuning_acs'].replace('_', ' ')}",
    }


def _gates(inv: Inventory) -> list[str]:
    cert = inv.spec.certification
    chosen = {f"nccl_{c.replace('all_reduce', 'allreduce')}" for c in cert.nccl.collectives}
    nodes = [g for g in NODE_GATE_NAMES if not g.startswith("nccl_") or g in chosen]
    kinds = {n.kind for g in inv.spec.node_groups for n in g.nics}
    fabric = [g for g in FABRIC_GATE_NAMES if cert.fabric.enabled and len(inv.gpu_hosts()) > 1
              and (g == "nccl_multinode_all_reduce" or kinds & {"infiniband", "roce"})
              and (not g.startswith("roce_") or "roce" in kinds)]
    return [g for g in [*nodes, *FLEET_GATE_NAMES, *fabric] if g not in cert.not_applicable]


RDMA_KINDS = ("infiniband", "roce")


def _tiers(inv: Inventory) -> dict[str, dict[str, Any]]:
    """Each tier with the values serve will use: TP, PP, nodes per replica and GPUs resolved by the one resolver
    (gridready.spec.parallel) as if every node of hosts.yml were certified, tiers taking whole nodes in spec
    order; a warning where pipeline stages would cross nodes without an RDMA NIC."""
    left = {g.name: len(inv.groups.get(g.name, [])) for g in inv.spec.node_groups}
    out: dict[str, dict[str, Any]] = {}
    for t in inv.spec.serving.tiers:
        group = inv.spec.group(t.node_group) if t.node_group else inv.spec.node_groups[0]
        assert group is not None  # inventory.load checked every tier's node group
        par = resolve(t, group)
        nodes = par.nodes_per_replica * t.replicas
        left[group.name] = max(left[group.name] - nodes, 0)
        warnings = []
        if par.nodes_per_replica > 1 and not any(n.kind in RDMA_KINDS for n in group.nics):
            warnings.append(f"warning: tier {t.name}: pipeline parallel {par.pipeline} spans "
                            f"{par.nodes_per_replica} nodes of {group.name}, which has no RDMA NIC (InfiniBand or "
                            "RoCE): activations cross nodes over TCP; pipeline_parallel: 1 keeps a replica on one "
                            "node")
        out[t.name] = {
            "engine": t.engine, "model": t.model.source, "served_name": t.served_name, "node_group": group.name,
            "target": inv.spec.serving.target, "tensor_parallel": par.tensor, "pipeline_parallel": par.pipeline,
            "derived": [k for k in ("tensor_parallel", "pipeline_parallel") if getattr(t, k) == "derive"],
            "replicas": t.replicas, "nodes_per_replica": par.nodes_per_replica, "nodes": nodes,
            "gpus": par.world_size * t.replicas, "port": t.port, "warnings": warnings,
            "placement": "chosen at serve time among the certified nodes of the group"}
    return out


def offline(inv: Inventory) -> dict[str, Any]:
    """The plan from the inventory alone: nothing is contacted."""
    groups = {g.name: role_vars(inv.spec, g) for g in inv.spec.node_groups}
    hosts = {h: {"group": inv.node_group_of(h), "roles": _roles(groups[inv.node_group_of(h)])}
             for h in inv.gpu_hosts() if inv.node_group_of(h) in groups}
    cert = inv.spec.certification
    tiers = _tiers(inv)
    return {
        "offline": True,
        "provision": {"hosts": hosts},
        "certify": {**_certify_plan(inv), "gates": _gates(inv), "waived": cert.waive},
        "serve": {"tiers": tiers},
    }


def _serve_plan(inv: Inventory, ctx: RunContext) -> dict[str, Any]:
    return {"rendered": serve.render(inv, ctx)}


def run(inv: Inventory, ctx: RunContext, as_json: bool = False, *, offline_only: bool = False) -> dict[str, Any]:
    plan_dir = ctx.stage_dir("plan")
    if offline_only:
        result = offline(inv)
        write_json_atomic(plan_dir / "plan.json", result)
        _print(result, as_json, plan_dir)
        return result
    prov = provision.run(inv, ctx)
    result = {
        "provision": {"status": prov.status, "exit_code": prov.exit_code,
                      "changes": {h: o.detail.get("changed_tasks", []) for h, o in prov.hosts.items()}},
        "certify": _certify_plan(inv),
        "serve": _serve_plan(inv, ctx),
    }
    write_json_atomic(plan_dir / "plan.json", result)
    _print(result, as_json, plan_dir)
    return result


def _print(result: dict[str, Any], as_json: bool, plan_dir: Any) -> None:
    if as_json:
        import json
        import sys

        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
        return
    if result.get("offline"):
        for host, h in sorted(result["provision"]["hosts"].items()):
            console.info(f"provision {host} ({h['group']}):")
            for role, what in h["roles"].items():
                console.info(f"  - {role}: {what}")
        cert = result["certify"]
        console.info(f"certify: profile {cert['profile']}, DCGM level {cert['dcgm_level']}, "
                     f"{len(cert['gates'])} gates: {', '.join(cert['gates'])}")
        for name, t in result["serve"]["tiers"].items():
            derived = f" (derived: {', '.join(t['derived'])})" if t["derived"] else ""
            console.info(f"serve {name}: {t['engine']} {t['model']} as {t['served_name']} on {t['node_group']} "
                         f"({t['target']}), TP {t['tensor_parallel']} x PP {t['pipeline_parallel']}{derived}, "
                         f"{t['replicas']} replica(s) x {t['nodes_per_replica']} node(s) = {t['gpus']} GPUs, "
                         f"port {t['port']}")
            for line in t["warnings"]:
                console.info(f"  {line}")
    else:
        for host, changes in sorted(result["provision"]["changes"].items()):
            console.info(f"provision {host}: {len(changes)} change(s) pending")
            for change in changes:
                console.info(f"  - {change}")
        console.info(f"certify: profile {result['certify']['profile']}, DCGM level {result['certify']['dcgm_level']}")
    console.info(f"plan written to {plan_dir / 'plan.json'}")
