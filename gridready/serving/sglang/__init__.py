"""An SGLang tier plan -> `python -m sglang.launch_server` arguments per node, and the serve playbook's variables.

SGLang runs without Ray: every node of a replica runs the launcher with `--nnodes`, its `--node-rank` and the
replica's `--dist-init-addr` (rank 0's address); only rank 0 serves HTTP. TP stays inside a node (NVLink) and
the nodes of a replica are pipeline stages, as for the vLLM tiers. Every flag is cited in docs/serving-sglang.md
(server_arguments.md at sgl-project/sglang b36e8e1).
"""

from __future__ import annotations

from typing import Any

from gridready.serving import weights
from gridready.serving.sglang.versions import pin
from gridready.serving.topology import Certification, CertifiedNode, ReplicaPlan, TierPlan, rdma_hcas
from gridready.serving.vllm import STOP_MARGIN_S
from gridready.spec import ServingSpec, Tier, engine_options
from gridready.spec.sglang import SglangSettings


def settings(tier: Tier) -> SglangSettings:
    return tier.sglang or SglangSettings()


def dist_init_addr(plan: TierPlan, replica: ReplicaPlan, cert: Certification) -> str:
    """host:port of the replica's rank-0 node (`--dist-init-addr`)."""
    return f"{cert.certified[replica.head].ip}:{settings(plan.tier).dist_init_port}"


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def launch_args(plan: TierPlan, node_rank: int = 0, init_addr: str | None = None,
                host: str = "0.0.0.0") -> list[str]:
    """Arguments after `python -m sglang.launch_server` on the node of rank `node_rank`.

    The API key is not here: it goes into the tier's `--config` file (0600), never argv."""
    tier = plan.tier
    s = settings(tier)
    nnodes = plan.nodes_per_replica
    if not 0 <= node_rank < nnodes:
        raise ValueError(f"node_rank {node_rank} outside 0..{nnodes - 1}")
    args = [
        "--model-path", tier.model.source,
        "--served-model-name", tier.served_name,
        "--host", host,
        "--port", str(tier.port),
        "--tp-size", str(plan.tensor_parallel),
        "--pp-size", str(plan.pipeline_parallel),
        "--context-length", str(tier.max_model_len),
        "--mem-fraction-static", str(tier.gpu_memory_utilization),
        "--max-running-requests", str(tier.max_num_seqs),
        "--dtype", tier.dtype,
        "--kv-cache-dtype", tier.kv_cache_dtype,
        "--schedule-policy", s.schedule_policy,
        "--page-size", str(s.page_size),
        "--enable-metrics",
    ]
    if tier.model.revision:
        args += ["--revision", tier.model.revision]
    if nnodes > 1:
        if not init_addr:
            raise ValueError("a multi-node replica needs --dist-init-addr (rank 0's host:port)")
        args += ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--dist-init-addr", init_addr]
    if tier.quantization:
        args += ["--quantization", tier.quantization]
    if not tier.enable_prefix_caching:
        args.append("--disable-radix-cache")
    chunk = -1 if not tier.enable_chunked_prefill else (s.chunked_prefill_size or tier.max_num_batched_tokens)
    if chunk is not None:
        args += ["--chunked-prefill-size", str(chunk)]
    if tier.lora_adapters:
        args += ["--enable-lora", "--max-loras-per-batch", str(tier.max_loras),
                 "--max-lora-rank", str(tier.max_lora_rank),
                 "--lora-paths", *(f"{a.name}={a.path}" for a in tier.lora_adapters)]
    if tier.trust_remote_code:
        args.append("--trust-remote-code")
    release = pin(s.version).version
    for name, value in tier.extra_engine_args.items():
        key = engine_options.canonical_key("sglang", release, name)  # an abbreviation in full (spec.engine_options)
        if isinstance(value, bool):
            if value:
                args.append(_flag(key))
        else:
            args += [_flag(key), str(value)]
    return args


def node_env(plan: TierPlan, node: CertifiedNode, serving: ServingSpec) -> dict[str, str]:
    """NCCL/Gloo bootstrap on the node's interface and its certified HCAs (no Ray, no vLLM variables)."""
    env: dict[str, str] = {}
    ifname = serving.socket_ifname or plan.group.mgmt_interface
    if ifname:
        env.update(NCCL_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname)
    hcas = rdma_hcas(plan, node)
    if hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(hcas)
    elif plan.nodes_per_replica > 1:
        env["NCCL_IB_DISABLE"] = "1"
    env.update(weights.engine_env(plan.tier.model))  # every rank loads the node's pre-downloaded snapshot
    return env


def units(plans: list[TierPlan], cert: Certification, serving: ServingSpec) -> list[dict[str, Any]]:
    """One `sglang-<tier>` unit per node of every replica of every sglang tier."""
    out: list[dict[str, Any]] = []
    for plan in plans:
        if plan.tier.engine != "sglang":
            continue
        for replica in plan.replicas:
            addr = dist_init_addr(plan, replica, cert)
            head_ip = cert.certified[replica.head].ip
            for rank, name in enumerate(replica.nodes):
                node = cert.certified[name]
                args = launch_args(plan, rank, addr if plan.nodes_per_replica > 1 else None)
                out.append({
                    "name": plan.tier.name,
                    "host": name,
                    "node_rank": rank,
                    "nnodes": plan.nodes_per_replica,
                    "head_ip": head_ip,
                    "port": plan.tier.port,
                    "dist_init_port": settings(plan.tier).dist_init_port,
                    "served_name": plan.tier.served_name,
                    "stop_timeout_s": plan.tier.drain_timeout_s + STOP_MARGIN_S,
                    "args": args,
                    "env": node_env(plan, node, serving),
                    "version": pin(settings(plan.tier).version).version,
                    "pip_spec": pin(settings(plan.tier).version).pip_spec,
                    # rank 0 serves HTTP; SGLang's /health is public (its API-key middleware passes /health)
                    **({"health": {"unit": f"sglang-{plan.tier.name}",
                                   "url": f"http://{head_ip}:{plan.tier.port}/health"}} if rank == 0 else {}),
                })
    return out


# --- target kubernetes --------------------------------------------------------------------------------------

# kubernetes-sigs/lws docs/examples/sglang/lws.yaml@0377103: LWS injects these into every pod of a group; the
# container args reference them with Kubernetes' $(VAR) expansion.
LWS_LEADER = "$(LWS_LEADER_ADDRESS)"
LWS_INDEX = "$(LWS_WORKER_INDEX)"


def pod_args(plan: TierPlan) -> list[str]:
    """launch_server arguments of every pod: rank and rendezvous come from LWS' env (one node: none)."""
    if plan.nodes_per_replica == 1:
        return launch_args(plan)
    port = settings(plan.tier).dist_init_port
    args = launch_args(plan, 0, f"{LWS_LEADER}:{port}")
    args[args.index("--node-rank") + 1] = LWS_INDEX
    return args


def k8s_tier(plan: TierPlan, env: dict[str, str], serving: ServingSpec) -> dict[str, Any]:
    """The stack config entry of one SGLang tier (gridready/stacks/serving/sglang.py SglangTierConfig)."""
    k = serving.kubernetes
    tier = plan.tier
    return {
        "name": tier.name,
        "served_name": tier.served_name,
        "image": pin(settings(tier).version).image,
        "port": tier.port,
        "nodes": plan.nodes_per_replica,
        "replicas": tier.replicas,
        "gpus_per_node": plan.gpus_per_node,
        "dist_init_port": settings(tier).dist_init_port,
        "args": ["python3", "-m", "sglang.launch_server", *pod_args(plan)],
        "env": {key: v for key, v in env.items() if not key.startswith("RAY_")},
        "rdma_resource": k.rdma_resource,
        "shm_size": k.shm_size,
        "model_cache_path": k.model_cache_path,
        "ephemeral_storage": k.ephemeral_storage,
        "termination_grace_s": tier.drain_timeout_s + STOP_MARGIN_S,
        "cpu": k.worker_cpu,
        "memory": k.worker_memory,
        "gpu_product_label": k.gpu_product_label,
    }


# The face of every engine package (docs/architecture.md, "Serving engines as packages"): the tiers' `engine:` values
# it serves, the sections of a tier it reads besides the keys every tier has, and its renderer per target.
ENGINES = ("sglang",)
TIER_SECTIONS = ("sglang",)
RENDERS = {"hosts": units, "kubernetes": k8s_tier}
