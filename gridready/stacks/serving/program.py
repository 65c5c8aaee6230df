"""Serving tiers on Kubernetes: per vLLM tier a KubeRay RayService running Ray Serve LLM, plus its Service.

The RayService head takes no GPUs; one worker group holds the GPU nodes (nvidia.com/gpu, the RDMA resource,
/dev/shm in memory, IPC_LOCK, the HF token from a Secret, NCCL/Gloo env set before `ray start`). Triton tiers
are built by the component in `gridready/stacks/serving/triton.py`, called through `build_tier`.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import BaseModel, ConfigDict, Field

from gridready.serving import mpi_ssh
from gridready.stacks.serving import model_cache, network, sglang, triton
from gridready.stacks.serving import router as front

SERVE_PORT = 8000  # Ray Serve's HTTP proxy inside the pods
METRICS_PORT = 8080  # Ray's metrics export
API_KEY_ENV = "VLLM_API_KEY"  # vLLM's api_server reads it when --api-key is absent (vllm/envs.py)
TIER_LABEL = "gridready.io/tier"
CERTIFIED_LABEL = "gridready.io/certified"
# the taint GPU node pools commonly carry (the GPU Operator's docs and the managed pools' default)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class RayServiceTier(BaseModel):
    """Everything one RayService needs, computed by gridready from the spec, the plan and certification."""

    model_config = ConfigDict(extra="forbid")

    name: str
    served_name: str
    image: str
    ray_version: str
    port: int
    accelerator_type: str
    llm_config: dict[str, Any] = Field(description="one Ray Serve LLM llm_configs[] entry")
    worker_replicas: int = Field(description="GPU worker pods at most: nodes per replica x max replicas")
    worker_min_replicas: int | None = Field(None, description="GPU worker pods at least: nodes x min replicas")
    autoscaler_idle_timeout_s: int = Field(60, description="KubeRay autoscaler: idle worker pods go after this")
    gpus_per_node: int
    rdma_resource: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="NCCL/Gloo env of every Ray pod")
    shm_size: str = "64Gi"
    worker_cpu: str = "32"
    worker_memory: str = "512Gi"
    upgrade_strategy: str = "None"
    initializing_timeout: str = "30m"
    gpu_product_label: str | None = None
    model_cache_path: str = Field("/var/lib/gridready/hf", description="node-local HF_HOME (hostPath)")
    ephemeral_storage: str = "50Gi"
    termination_grace_s: int = Field(90, description="the tier's drain plus the time Ray and vLLM take to exit")


class ServingConfig(BaseModel):
    """Typed config of the stack (Pulumi config key `stack`, JSON)."""

    model_config = ConfigDict(extra="forbid")

    customer: str
    namespace: str
    hf_token_secret: str = "hf-token"
    api_key_secret: str = Field("vllm-api-key", description=f"Secret (key {API_KEY_ENV}) made from the vault's key")
    clients: list[str] = Field(default_factory=list, description="CIDRs admitted to the serving ports")
    client_namespaces: list[str] = Field(default_factory=list, description="namespaces admitted to the serving ports")
    kuberay_namespace: str = Field("kuberay-system", description="the KubeRay operator's namespace")
    monitoring_namespaces: list[str] = Field(
        default_factory=list, description="Prometheus' namespaces, admitted to each tier's scraped metrics port")
    vllm_tiers: list[RayServiceTier] = Field(default_factory=list)
    triton_tiers: list[dict[str, Any]] = Field(default_factory=list, description="opaque to this module")
    sglang_tiers: list[dict[str, Any]] = Field(default_factory=list, description="gridready/stacks/serving/sglang.py")
    router: dict[str, Any] | None = Field(
        None, description="the authenticating LiteLLM front (gridready/stacks/serving/router.py); None: no OpenAI tier")
    router_routes: list[dict[str, Any]] = Field(
        default_factory=list, description="Gateway API HTTPRoutes of serving.router (gridready/serving/router_k8s.py)")


def serve_config(tier: RayServiceTier) -> str:
    """spec.serveConfigV2: one Ray Serve LLM OpenAI application at /."""
    app = {
        "name": tier.name,
        "import_path": "ray.serve.llm:build_openai_app",
        "route_prefix": "/",
        "args": {"llm_configs": [tier.llm_config]},
    }
    return yaml.safe_dump({"applications": [app]}, sort_keys=False)


BUCKET_SECRET = "lora-bucket"  # the object store's credentials (gridready/stages/serve/k8s_bucket.py)


def bucket_env(text: str) -> dict[str, str]:
    """The secret config `loraBucketEnv` (JSON): a render's placeholder holds no credentials."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class VllmRayService(pulumi.ComponentResource):
    """A RayService (Ray Serve LLM over vLLM) and a Service in front of its Serve proxies."""

    def __init__(
        self, name: str, tier: RayServiceTier, namespace: str, hf_secret: str, api_key_secret: str,
        opts: pulumi.ResourceOptions | None = None, bucket_secret: str | None = None,
    ) -> None:
        super().__init__("gridready:serving:VllmRayService", name, None, opts)
        labels = {TIER_LABEL: tier.name, "app.kubernetes.io/managed-by": "gridready"}
        env = [{"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
               *({"name": k, "value": v} for k, v in sorted(tier.env.items())),
               {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_secret, "key": "HF_TOKEN"}}},
               # the key by reference only: the manifest carries the Secret's name, never its value. Ray Serve
               # LLM's OpenAI ingress does not read it (ray-project/ray#55369, #59578: no built-in API key
               # check), so on this target the NetworkPolicy is what keeps non-clients out.
               {"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": api_key_secret, "key": API_KEY_ENV}}}]
        # Ray Serve LLM downloads LoRA adapters from object storage in the replicas' processes (any pod)
        env_from = [{"secretRef": {"name": bucket_secret}}] if bucket_secret else []
        selector = {CERTIFIED_LABEL: "true"}
        if tier.gpu_product_label:
            selector["nvidia.com/gpu.product"] = tier.gpu_product_label
        head = {
            "rayStartParams": {"num-cpus": "0", "num-gpus": "0", "dashboard-host": "0.0.0.0"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "enableServiceLinks": False,
                    # the head takes no GPU (num-gpus 0): any node will do. It tolerates the GPU taint so a
                    # cluster of GPU nodes only still schedules it; a nodeSelector on the certified (GPU) nodes
                    # without that toleration left it Pending on tainted GPU pools.
                    "tolerations": [GPU_TOLERATION],
                    "containers": [{
                        "name": "ray-head",
                        "image": tier.image,
                        "ports": [
                            {"name": "gcs-server", "containerPort": 6379},
                            {"name": "dashboard", "containerPort": 8265},
                            {"name": "client", "containerPort": 10001},
                            {"name": "serve", "containerPort": SERVE_PORT},
                            {"name": "metrics", "containerPort": 8080},
                        ],
                        "env": env,
                        **({"envFrom": env_from} if env_from else {}),
                        "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                                      "limits": {"cpu": "4", "memory": "16Gi"}},
                    }],
                },
            },
        }
        min_workers = tier.worker_replicas if tier.worker_min_replicas is None else tier.worker_min_replicas
        gpu_res: dict[str, Any] = {"nvidia.com/gpu": tier.gpus_per_node, "cpu": tier.worker_cpu,
                                   "memory": tier.worker_memory}
        if tier.rdma_resource:
            gpu_res[tier.rdma_resource] = 1
        requests = {**gpu_res, "ephemeral-storage": tier.ephemeral_storage}
        worker = {
            "groupName": "gpu",
            # the autoscaler adds and removes worker pods between the bounds of the Serve replicas, so GPUs go
            # back when Serve scales down (Ray docs, KubeRay autoscaling; Ray Serve LLM autoscaling_config)
            "replicas": min_workers,
            "minReplicas": min_workers,
            "maxReplicas": tier.worker_replicas,
            "numOfHosts": 1,
            "rayStartParams": {"num-gpus": str(tier.gpus_per_node)},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "enableServiceLinks": False,
                    # the kubelet waits this long after SIGTERM: Serve drains the replica first
                    # (graceful_shutdown_timeout_s in the llm_config's deployment_config)
                    "terminationGracePeriodSeconds": tier.termination_grace_s,
                    "nodeSelector": selector,
                    "tolerations": [GPU_TOLERATION],
                    "containers": [{
                        "name": "ray-worker",
                        "image": tier.image,
                        "env": [*env, *model_cache.env(tier.model_cache_path)],
                        **({"envFrom": env_from} if env_from else {}),
                        # Ray's metrics agent on every node exports the engine's metrics (the PodMonitor's port)
                        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
                        "resources": {"requests": requests, "limits": dict(gpu_res)},
                        # the image's own user, stated so the offline check can compare it with the cache's owner
                        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]},
                                            "runAsUser": model_cache.RAY_UID, "runAsGroup": model_cache.RAY_GID},
                        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                         model_cache.mount(tier.model_cache_path)],
                    }],
                    "initContainers": [model_cache.owner_init(tier.image, tier.model_cache_path,
                                                              model_cache.RAY_UID, model_cache.RAY_GID)],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": tier.shm_size}},
                                model_cache.volume(tier.model_cache_path)],
                },
            },
        }
        self.ray_service = k8s.apiextensions.CustomResource(
            f"{name}-rayservice",
            api_version="ray.io/v1",
            kind="RayService",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=tier.name, namespace=namespace, labels=labels,
                annotations={"ray.io/initializing-timeout": tier.initializing_timeout},
            ),
            spec={
                "upgradeStrategy": {"type": tier.upgrade_strategy},
                "serveConfigV2": serve_config(tier),
                "rayClusterConfig": {
                    "rayVersion": tier.ray_version,
                    "enableInTreeAutoscaling": True,
                    "autoscalerOptions": {"upscalingMode": "Default",
                                          "idleTimeoutSeconds": tier.autoscaler_idle_timeout_s},
                    "headGroupSpec": head,
                    "workerGroupSpecs": [worker],
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        # KubeRay marks pods whose Serve proxy is healthy with ray.io/serve=true. Never name this `vllm`.
        self.service = k8s.core.v1.Service(
            f"{name}-openai",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{tier.name}-openai", namespace=namespace, labels=labels),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector={TIER_LABEL: tier.name, "ray.io/serve": "true"},
                ports=[k8s.core.v1.ServicePortArgs(name="http", port=tier.port, target_port=SERVE_PORT)],
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ray_service]),
        )
        self.endpoint = pulumi.Output.concat("http://", tier.name, "-openai.", namespace, ":", str(tier.port))
        self.register_outputs({"endpoint": self.endpoint, "served_name": tier.served_name})


def triton_metrics_port(ports: dict[str, int]) -> int:
    """The port a Triton tier's ServiceMonitor scrapes (gridready.monitoring.prometheus): `metrics`, or the
    OpenAI frontend's port where Triton serves it."""
    return ports.get("metrics") or ports.get("openai") or next(iter(ports.values()))


def build_triton(tier: dict[str, Any], namespace: str, hf_secret: str, parent: pulumi.Resource,
                 claims_provider: pulumi.ProviderResource | None = None) -> Any:
    """Hand a Triton tier to gridready/stacks/serving/triton.py (`build_tier`, see docs/serving.md)."""
    return triton.build_tier(tier, namespace=namespace, hf_secret=hf_secret,
                             opts=pulumi.ResourceOptions(parent=parent), claims_provider=claims_provider)


class ServingTiers(pulumi.ComponentResource):
    """The HF token and API key Secrets, every tier of one customer and each tier's ingress NetworkPolicy."""

    def __init__(self, name: str, config: ServingConfig, hf_token: pulumi.Input[str],
                 api_key: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None, *,
                 mpi_ssh_keys: pulumi.Input[str] | None = None, router_keys: pulumi.Input[str] | None = None,
                 claims_provider: pulumi.ProviderResource | None = None,
                 bucket_env_json: pulumi.Input[str] | None = None) -> None:
        super().__init__("gridready:serving:ServingTiers", name, None, opts)
        self.hf_secret = k8s.core.v1.Secret(
            "hf-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=config.hf_token_secret, namespace=config.namespace),
            type="Opaque",
            string_data={"HF_TOKEN": hf_token},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.api_key_secret = k8s.core.v1.Secret(
            "vllm-api-key",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=config.api_key_secret, namespace=config.namespace),
            type="Opaque",
            string_data={API_KEY_ENV: api_key},
            opts=pulumi.ResourceOptions(parent=self),
        )
        secrets = [self.hf_secret, self.api_key_secret]
        if config.sglang_tiers:  # SGLang reads its key from the `api-key` of its --config file, never argv
            self.sglang_config_secret = k8s.core.v1.Secret(
                "sglang-config",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=sglang.CONFIG_SECRET, namespace=config.namespace),
                type="Opaque",
                string_data={sglang.CONFIG_KEY: pulumi.Output.from_input(api_key).apply(sglang.config_yaml)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            secrets.append(self.sglang_config_secret)
        if any(t.get("nodes", 1) > 1 for t in config.triton_tiers):  # mpirun's ssh between a tier's pods
            if mpi_ssh_keys is None:
                raise ValueError("a multi-node Triton tier needs the mpiSshKeys secret")
            self.mpi_ssh_secret = k8s.core.v1.Secret(
                "mpi-ssh",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=mpi_ssh.SECRET, namespace=config.namespace),
                type="Opaque",
                string_data=pulumi.Output.from_input(mpi_ssh_keys).apply(mpi_ssh.secret_files),
                opts=pulumi.ResourceOptions(parent=self),
            )
            secrets.append(self.mpi_ssh_secret)
        buckets = [t for t in config.vllm_tiers if "lora_config" in t.llm_config]
        if buckets and bucket_env_json is not None:  # object-storage adapters: the store's credentials
            self.bucket_secret = k8s.core.v1.Secret(
                BUCKET_SECRET,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=BUCKET_SECRET, namespace=config.namespace),
                type="Opaque",
                string_data=pulumi.Output.from_input(bucket_env_json).apply(bucket_env),
                opts=pulumi.ResourceOptions(parent=self),
            )
            secrets.append(self.bucket_secret)
        after = pulumi.ResourceOptions(parent=self, depends_on=secrets)
        self.vllm = [VllmRayService(t.name, t, config.namespace, config.hf_token_secret, config.api_key_secret,
                                    after, BUCKET_SECRET if t in buckets and bucket_env_json is not None else None)
                     for t in config.vllm_tiers]
        self.triton = [build_triton(t, config.namespace, config.hf_token_secret, self, claims_provider)
                       for t in config.triton_tiers]
        self.sglang = [sglang.build_tier(t, namespace=config.namespace, hf_secret=config.hf_token_secret, opts=after)
                       for t in config.sglang_tiers]
        # Ray Serve LLM checks no key: with the front, a vLLM tier's Serve port admits the router's pods only and
        # the clients reach the metrics port alone; SGLang checks its own key, so its port stays open to clients
        self.router = (front.Router("router", front.RouterK8sConfig.model_validate(config.router), config.namespace,
                                    config.api_key_secret, API_KEY_ENV, after, client_keys=router_keys)
                       if config.router else None)
        fronted = front.LABELS if self.router else None
        self.policies = [self._policy(config, t.name, [METRICS_PORT] if fronted else [SERVE_PORT, METRICS_PORT],
                                      config.kuberay_namespace, fronted, [SERVE_PORT], [METRICS_PORT])
                         for t in config.vllm_tiers]
        self.policies += [self._policy(config, c.config.name, list(c.config.ports.values()),
                                       metrics_ports=[triton_metrics_port(c.config.ports)]) for c in self.triton]
        self.policies += [self._policy(config, t["name"], [t["port"]], None, fronted, [t["port"]], [t["port"]])
                          for t in config.sglang_tiers]
        if self.router:  # the front itself: the clients reach its port, nothing else
            rules = network.ingress_rules(front.LABELS, [config.router.get("port", 4000)], config.clients,
                                          config.client_namespaces)
            self.policies.append(network.tier_policy(front.NAME, config.namespace, front.LABELS, rules, self))
        services = [c.service for c in self.vllm] + ([self.router.service] if self.router else [])
        self.routes = [k8s.apiextensions.CustomResource(
            f"route-{doc['metadata']['name']}", api_version=doc["apiVersion"], kind=doc["kind"],
            metadata=doc["metadata"], spec=doc["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=services)) for doc in config.router_routes]
        self.endpoints = {t.name: c.endpoint for t, c in zip(config.vllm_tiers, self.vllm, strict=True)}
        self.endpoints.update({c.tier_name: c.endpoint for c in self.sglang})
        if self.router:
            self.endpoints["router"] = self.router.endpoint
        self.register_outputs({"endpoints": self.endpoints})

    def _policy(self, config: ServingConfig, tier: str, ports: list[int], operator_ns: str | None = None,
                front_labels: dict[str, str] | None = None, front_ports: list[int] | None = None,
                metrics_ports: list[int] | None = None) -> Any:
        labels = {TIER_LABEL: tier}
        rules = network.ingress_rules(labels, ports, config.clients, config.client_namespaces, operator_ns,
                                      front_labels, front_ports or [], config.monitoring_namespaces,
                                      metrics_ports or [])
        return network.tier_policy(tier, config.namespace, labels, rules, self)


def program() -> None:
    """The stack program: typed config, secrets via require_secret, an explicit provider from the kubeconfig."""
    cfg = pulumi.Config()
    config = ServingConfig.model_validate(cfg.require_object("stack"))
    provider = k8s.Provider("k8s", kubeconfig=cfg.require_secret("kubeconfig"), enable_server_side_apply=True)
    # the kept claims only (triton.KEPT_VOLUME_LABEL): adopted again after `serve --down` instead of AlreadyExists
    claims = k8s.Provider("k8s-kept-claims", kubeconfig=cfg.require_secret("kubeconfig"),
                          enable_server_side_apply=True, upsert_existing_objects=True)
    tiers = ServingTiers(config.customer, config, cfg.require_secret("hfToken"), cfg.require_secret("vllmApiKey"),
                         pulumi.ResourceOptions(providers=[provider]), mpi_ssh_keys=cfg.require_secret("mpiSshKeys"),
                         router_keys=cfg.require_secret("routerKeys"), claims_provider=claims,
                         bucket_env_json=cfg.require_secret("loraBucketEnv"))
    pulumi.export("endpoints", tiers.endpoints)
    pulumi.export("namespace", config.namespace)
