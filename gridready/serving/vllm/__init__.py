"""A vLLM tier plan -> engine arguments, the environment of `ray start`, and Ray Serve LLM configs.

One source of truth: `engine_kwargs` (vLLM's engine argument names) feeds both the `vllm serve` command line
(target hosts) and Ray Serve LLM's `llm_configs[].engine_kwargs` (target kubernetes).
"""

from __future__ import annotations

from typing import Any

from gridready.errors import InvalidInput
from gridready.serving import k8s_startup, weights
from gridready.serving.topology import Certification, CertifiedNode, TierPlan, common_hcas, rdma_hcas
from gridready.spec import engine_options
from gridready.spec.rules import tier_ports
from gridready.spec.serving import VLLM_VERSION, ServingSpec

HEALTH_CHECK_PERIOD_S = 10
HEALTH_CHECK_TIMEOUT_S = 30
# A pod, or a unit on hosts, gets this much beyond the drain for Ray and the engine to exit after the drain.
STOP_MARGIN_S = 30


def executor_backend(plan: TierPlan) -> str:
    """ray across nodes; mp inside one node (vLLM's documented choice)."""
    return "ray" if plan.nodes_per_replica > 1 else "mp"


def engine_kwargs(plan: TierPlan) -> dict[str, Any]:
    """vLLM engine arguments of the tier (snake_case), without the model itself."""
    tier = plan.tier
    kw: dict[str, Any] = {
        "tensor_parallel_size": plan.tensor_parallel,
        "pipeline_parallel_size": plan.pipeline_parallel,
        "max_model_len": tier.max_model_len,
        "gpu_memory_utilization": tier.gpu_memory_utilization,
        "max_num_seqs": tier.max_num_seqs,
        "enable_prefix_caching": tier.enable_prefix_caching,
        "enable_chunked_prefill": tier.enable_chunked_prefill,
        "dtype": tier.dtype,
        "kv_cache_dtype": tier.kv_cache_dtype,
    }
    if tier.model.revision:
        kw["revision"] = tier.model.revision
    if tier.max_num_batched_tokens:
        kw["max_num_batched_tokens"] = tier.max_num_batched_tokens
    if tier.quantization:
        kw["quantization"] = tier.quantization
    if tier.lora_adapters:
        kw.update(enable_lora=True, max_loras=tier.max_loras, max_lora_rank=tier.max_lora_rank)
    if tier.trust_remote_code:
        kw["trust_remote_code"] = True
    # resolved at load as vLLM's parser resolves them (spec.engine_options): none is gridready's; an abbreviation
    # is written in full, as Ray Serve LLM passes engine_kwargs to EngineArgs by name, with no parser between
    kw.update({engine_options.canonical_key("vllm", VLLM_VERSION, k): v for k, v in tier.extra_engine_args.items()})
    return kw


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def serve_args(plan: TierPlan, host: str = "0.0.0.0") -> list[str]:
    """`vllm serve` arguments (after the executable); the API key comes from VLLM_API_KEY, never argv."""
    tier = plan.tier
    args = [
        "serve", tier.model.source,
        "--served-model-name", tier.served_name,
        "--host", host,
        "--port", str(tier.port),
        "--distributed-executor-backend", executor_backend(plan),
    ]
    for key, value in engine_kwargs(plan).items():
        if isinstance(value, bool):
            args.append(_flag(key) if value else _flag(f"no_{key}"))
        else:
            args += [_flag(key), str(value)]
    if tier.lora_adapters:
        args += ["--lora-modules", *(f"{a.name}={a.path}" for a in tier.lora_adapters)]
    return args


def socket_ifname(plan: TierPlan, serving: ServingSpec) -> str | None:
    """Interface for NCCL/Gloo bootstrap sockets: the spec's, else the group's mgmt_interface, else unset
    (the ray_node role then picks the interface that holds the node's Ray IP)."""
    return serving.socket_ifname or plan.group.mgmt_interface


def node_env(plan: TierPlan, node: CertifiedNode, serving: ServingSpec) -> dict[str, str]:
    """Environment of `ray start` on one node: Ray, vLLM and NCCL agree on one address and one fabric."""
    env = {
        "VLLM_HOST_IP": node.ip,
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    ifname = socket_ifname(plan, serving)
    if ifname:
        env.update(NCCL_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname, TP_SOCKET_IFNAME=ifname)
    hcas = rdma_hcas(plan, node)
    if hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(hcas)  # "=": exact names, not prefixes
    elif plan.nodes_per_replica > 1:
        env["NCCL_IB_DISABLE"] = "1"
    env.update(weights.engine_env(plan.tier.model))  # every rank loads the node's pre-downloaded snapshot
    return env


def llm_config(plan: TierPlan) -> dict[str, Any]:
    """One Ray Serve LLM `llm_configs[]` entry (ray.serve.llm:build_openai_app). NCCL's environment reaches the
    engine through the Ray nodes' own (node_env for `ray start`, pod_env for the RayCluster's pods)."""
    tier = plan.tier
    auto = tier.autoscaling
    min_r = auto.min_replicas or tier.replicas
    max_r = auto.max_replicas or max(tier.replicas, min_r)
    cfg: dict[str, Any] = {
        "model_loading_config": {"model_id": tier.served_name, "model_source": tier.model.source},
        "accelerator_type": plan.accelerator_type,
        "engine_kwargs": engine_kwargs(plan),
        "placement_group_config": {
            "bundles": [{"GPU": 1} for _ in range(plan.world_size)],
            "strategy": "PACK",
        },
        "deployment_config": {
            "autoscaling_config": {
                "min_replicas": min_r,
                "max_replicas": max_r,
                "target_ongoing_requests": auto.target_ongoing_requests,
            },
            "max_ongoing_requests": auto.max_ongoing_requests,
            # Serve health-checks each replica and restarts one that fails or hangs past the timeout; a stopping
            # replica gets graceful_shutdown_timeout_s to finish its requests (Ray docs, Configure Ray Serve
            # deployments, https://docs.ray.io/en/latest/serve/configure-serve-deployment.html;
            # ray.serve.schema.DeploymentSchema)
            "health_check_period_s": HEALTH_CHECK_PERIOD_S,
            "health_check_timeout_s": HEALTH_CHECK_TIMEOUT_S,
            "graceful_shutdown_wait_loop_s": 2,
            "graceful_shutdown_timeout_s": tier.drain_timeout_s,
        },
    }
    if tier.lora_adapters:
        cfg["lora_config"] = lora_config(plan)
    return cfg


# ray.llm._internal.serve configs LoraConfig.validate_dynamic_lora_loading_path: s3:// and gs:// in every release,
# abfss:// and azure:// in newer ones
LORA_REMOTE_SCHEMES = ("s3://", "gs://", "abfss://", "azure://")


def lora_config(plan: TierPlan) -> dict[str, Any]:
    """Ray Serve LLM `lora_config`: adapters load on demand from <dynamic_lora_loading_path>/<adapter name>, and
    clients address one as `<model_id>:<adapter name>` (Ray docs, Multi-LoRA deployment and
    ray.serve.llm.LoraConfig, https://docs.ray.io/en/latest/serve/llm/user-guides/multi-lora.html). Without it,
    `enable_lora` alone registers no adapter."""
    tier = plan.tier
    parents = {a.path.rstrip("/").rsplit("/", 1)[0] for a in tier.lora_adapters}
    misnamed = [a.name for a in tier.lora_adapters if a.path.rstrip("/").rsplit("/", 1)[-1] != a.name]
    if len(parents) != 1 or misnamed:
        raise InvalidInput(
            f"serving.tiers[{tier.name}].lora_adapters: on Kubernetes every adapter's path must be "
            f"<one directory>/<adapter name> (Ray Serve LLM dynamic_lora_loading_path); got "
            f"{', '.join(f'{a.name}={a.path}' for a in tier.lora_adapters)}")
    parent = parents.pop()
    if not parent.startswith(LORA_REMOTE_SCHEMES):
        raise InvalidInput(
            f"serving.tiers[{tier.name}].lora_adapters: on Kubernetes the adapters must live in object storage: Ray "
            f"Serve LLM's LoraConfig accepts a dynamic_lora_loading_path starting with "
            f"{' or '.join(LORA_REMOTE_SCHEMES)} only and downloads each adapter from there (a node-local folder "
            f"fails its validation and the RayService never starts); got {parent!r}")
    return {"dynamic_lora_loading_path": parent, "max_num_adapters_per_replica": tier.max_loras}


def health_extravars(serving: ServingSpec) -> dict[str, Any]:
    """The gridready_engine_health role's settings, for every engine role's health-check timers."""
    return {f"gridready_engine_health_{k}": v for k, v in serving.engine_health.model_dump().items()}


def hosts_extravars(
    plans: list[TierPlan], cert: Certification, serving: ServingSpec
) -> dict[str, Any]:
    """`gridready_serve` for playbooks/serve.yml: per host its Ray role, head and env; per tier its command."""
    hosts: dict[str, Any] = {}
    tiers: list[dict[str, Any]] = []
    members = sorted({cert.certified[n].ip for p in plans for n in p.nodes})
    for plan in plans:
        for replica in plan.replicas:
            head_ip = cert.certified[replica.head].ip
            address = f"{head_ip}:{serving.ray_port}"
            cluster = plan.cluster_name(replica)
            for name in replica.nodes:
                node = cert.certified[name]
                hosts[name] = {
                    "role": "head" if name == replica.head else "worker",
                    "cluster": cluster,
                    "tier": plan.tier.name,
                    "engine": plan.tier.engine,
                    "node_ip": node.ip,
                    "head_address": address,
                    "num_gpus": plan.gpus_per_node,
                    "env": node_env(plan, node, serving),
                    "hcas": list(rdma_hcas(plan, node)),
                    # every listener of the tier's frontend (Triton's HTTP, gRPC and metrics too): the firewall
                    # admits only members and clients to these
                    "api_ports": sorted({p for _, p in tier_ports(plan.tier)}) if name == replica.head else [],
                }
            if plan.tier.engine != "vllm":
                continue
            env = node_env(plan, cert.certified[replica.head], serving)
            tiers.append({
                "name": plan.tier.name,
                "cluster": cluster,
                "head": replica.head,
                "ray_address": address,
                "port": plan.tier.port,
                "served_name": plan.tier.served_name,
                "expected_gpus": plan.gpus_per_node * plan.nodes_per_replica,
                "expected_nodes": plan.nodes_per_replica,
                "args": serve_args(plan),
                "stop_timeout_s": plan.tier.drain_timeout_s + STOP_MARGIN_S,
                "env": env,
                # vLLM's /health answers 200 while the engine is alive, without the API key (public route)
                "health": {"unit": f"vllm-{plan.tier.name}", "url": f"http://{head_ip}:{plan.tier.port}/health"},
            })
    return {
        **health_extravars(serving),
        "gridready_serve": {
            "ray_version": serving.ray_version,
            "vllm_version": serving.vllm_version,
            "ray_port": serving.ray_port,
            "wait_timeout_s": serving.wait_timeout_s,
            "ready_timeout_s": serving.ready_timeout_s,
            "members": members,
            "firewall_clients": list(serving.firewall_clients),
            "network_isolated": serving.network_isolated,
            "hosts": hosts,
            "tiers": tiers,
        }
    }


def k8s_node_name(hostvars: dict[str, Any], host: str) -> str:
    return str(hostvars.get("gridready_k8s_node_name") or host)


def platform_stack_config(
    customer: str, serving: ServingSpec, cert: Certification, hosts: dict[str, dict[str, Any]],
    groups: dict[str, str], drained: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Config of stacks/platform: operators, namespaces, and every GPU node's certification mark.

    `groups`: GPU host -> node group. Hosts not certified (quarantined or absent) are marked and tainted; `drained`
    hosts (the watcher's) get gridready's taint as NoExecute, so their serving pods leave.
    """
    k = serving.kubernetes
    nodes = [
        {"name": k8s_node_name(hosts.get(h, {}), h), "certified": h in cert.certified, "node_group": g,
         "drained": h in drained}
        for h, g in groups.items()
    ]
    return {
        "customer": customer,
        "gpu_operator_version": k.gpu_operator_version,
        "kuberay_version": k.kuberay_version,
        "serving_namespace": k.namespace,
        "nodes": nodes,
    }


def pod_env(plan: TierPlan, cert: Certification, serving: ServingSpec) -> dict[str, str]:
    """NCCL/Gloo env of the Ray pods (VLLM_HOST_IP comes from the pod IP)."""
    ifname = serving.kubernetes.socket_ifname
    env = {"NCCL_SOCKET_IFNAME": ifname, "GLOO_SOCKET_IFNAME": ifname, "TP_SOCKET_IFNAME": ifname,
           "RAY_USAGE_STATS_ENABLED": "0"}
    hcas = common_hcas(plan, cert)
    if hcas and serving.kubernetes.rdma_resource and plan.nodes_per_replica > 1:
        env["NCCL_IB_HCA"] = "=" + ",".join(hcas)
    elif plan.nodes_per_replica > 1:
        env["NCCL_IB_DISABLE"] = "1"
    return env


def serving_stack_config(
    customer: str, serving: ServingSpec, cert: Certification, plans: list[TierPlan]
) -> dict[str, Any]:
    """Config of stacks/serving: per vLLM tier a RayService; Triton tiers are passed on as plain data."""
    k = serving.kubernetes
    vllm_tiers, triton_tiers = [], []
    for plan in plans:
        tier = plan.tier
        if tier.engine == "vllm":
            cfg = llm_config(plan)
            bounds = cfg["deployment_config"]["autoscaling_config"]
            max_replicas, min_replicas = bounds["max_replicas"], bounds["min_replicas"]
            vllm_tiers.append({
                "name": tier.name,
                "served_name": tier.served_name,
                "image": k.ray_image,
                "ray_version": serving.ray_version,
                "port": tier.port,
                "accelerator_type": plan.accelerator_type,
                "llm_config": cfg,
                "worker_replicas": plan.nodes_per_replica * max_replicas,
                "worker_min_replicas": plan.nodes_per_replica * min_replicas,
                "gpus_per_node": plan.gpus_per_node,
                # one node per replica exchanges nothing across nodes: no RDMA device to wait for
                "rdma_resource": k.rdma_resource if plan.nodes_per_replica > 1 else None,
                "env": pod_env(plan, cert, serving),
                "shm_size": k.shm_size,
                "model_cache_path": k.model_cache_path,
                "ephemeral_storage": k.ephemeral_storage,
                "termination_grace_s": tier.drain_timeout_s + STOP_MARGIN_S,
                "worker_cpu": k.worker_cpu,
                "worker_memory": k.worker_memory,
                "upgrade_strategy": k.upgrade_strategy,
                "initializing_timeout": (k.initializing_timeout
                                         or k8s_startup.initializing_timeout(tier.model, k.hub_bandwidth_mbps)),
                "gpu_product_label": k.gpu_product_label,
            })
        elif tier.engine == "triton-trtllm":
            triton_tiers.append({
                "name": tier.name,
                "tier": tier.model_dump(mode="json"),
                "tensor_parallel": plan.tensor_parallel,
                "pipeline_parallel": plan.pipeline_parallel,
                "nodes_per_replica": plan.nodes_per_replica,
                "gpus_per_node": plan.gpus_per_node,
                "accelerator_type": plan.accelerator_type,
                "env": pod_env(plan, cert, serving),
                "rdma_resource": k.rdma_resource,
                "shm_size": k.shm_size,
                "gpu_product_label": k.gpu_product_label,
            })
    return {"customer": customer, "namespace": k.namespace, "hf_token_secret": k.hf_token_secret,
            "clients": list(serving.firewall_clients), "client_namespaces": list(k.client_namespaces),
            "monitoring_namespaces": list(k.monitoring_namespaces),
            "vllm_tiers": vllm_tiers, "triton_tiers": triton_tiers}


# The face of every engine package (docs/architecture.md, "Serving engines as packages"): the tiers' `engine:` values
# it serves, the sections of a tier it reads besides the keys every tier has, and its renderer per target.
ENGINES = ("vllm",)
TIER_SECTIONS: tuple[str, ...] = ()
RENDERS = {"hosts": hosts_extravars, "kubernetes": serving_stack_config}
