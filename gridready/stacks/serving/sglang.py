"""An SGLang tier on Kubernetes as one ComponentResource (`gridready:serving:SglangTier`).

One node per replica: a Deployment. Several: a LeaderWorkerSet (kubernetes-sigs/lws docs/examples/sglang/lws.yaml
@0377103) whose pods all run `python3 -m sglang.launch_server` with `--dist-init-addr $(LWS_LEADER_ADDRESS):<port>`
and `--node-rank $(LWS_WORKER_INDEX)`, `restartPolicy: RecreateGroupOnPodRestart` (a lost rank restarts the group);
only the leader serves HTTP, so the Service selects the leaders. /dev/shm in memory, IPC_LOCK, the GPUs and the
RDMA resource, the HF token from its Secret, NCCL/Gloo env; startup/readiness/liveness on SGLang's /health.
gridready builds the config with gridready.serving.sglang.k8s_tier; gridready/stacks/serving/program.py builds the
tiers.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from gridready.stacks.serving import model_cache, timeouts

TIER_LABEL = "gridready.io/tier"
# SGLang's `--config` YAML (server_arguments.md, "Common launch commands": CLI flags override it) carries the API
# key as `api-key`, from a Secret mounted read-only: the key is never in the pod's argv or env
CONFIG_SECRET = "sglang-config"
CONFIG_KEY = "config.yaml"
CONFIG_DIR = "/etc/gridready/sglang"
CERTIFIED_LABEL = "gridready.io/certified"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"  # set by LWS on every pod of the set


def config_yaml(api_key: str) -> str:
    """The --config file: the key as a YAML double-quoted scalar (JSON's escaping is valid YAML)."""
    return f"api-key: {json.dumps(api_key)}\n"


class SglangTierConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    served_name: str
    image: str
    port: int
    nodes: int = Field(description="nodes (pods) per replica: 1 -> Deployment, more -> LeaderWorkerSet")
    replicas: int
    gpus_per_node: int
    dist_init_port: int
    args: list[str] = Field(description="the container command, rendered by gridready.serving.sglang")
    env: dict[str, str] = Field(default_factory=dict)
    rdma_resource: str | None = None
    shm_size: str = "64Gi"
    cpu: str = "32"
    memory: str = "512Gi"
    gpu_product_label: str | None = None
    startup_timeout_s: int = 1800
    model_cache_path: str = Field("/var/lib/gridready/hf", description="node-local HF_HOME (hostPath)")
    ephemeral_storage: str = "50Gi"
    termination_grace_s: int = Field(90, description="the tier's drain plus the time the engine takes to exit")


class SglangTier(pulumi.ComponentResource):
    def __init__(self, name: str, tier: SglangTierConfig, namespace: str, hf_secret: str,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gridready:serving:SglangTier", name, None, opts)
        self.tier_name = tier.name
        self.labels = {TIER_LABEL: tier.name, "app.kubernetes.io/managed-by": "gridready"}
        # Pulumi waits for the pods as long as their startup probe does (the model's download and load)
        child = pulumi.ResourceOptions(parent=self, custom_timeouts=timeouts.custom(tier.startup_timeout_s))
        meta = k8s.meta.v1.ObjectMetaArgs(name=tier.name, namespace=namespace, labels=self.labels,
                                          annotations=timeouts.annotations(tier.startup_timeout_s))
        if tier.nodes == 1:
            self.workload: Any = k8s.apps.v1.Deployment(
                f"{name}-sglang",
                metadata=meta,
                spec={"replicas": tier.replicas, "selector": {"matchLabels": dict(self.labels)},
                      "template": self._pod(tier, hf_secret, leader=True)},
                opts=child)
            selector = dict(self.labels)
        else:
            self.workload = k8s.apiextensions.CustomResource(
                f"{name}-sglang",
                api_version="leaderworkerset.x-k8s.io/v1",
                kind="LeaderWorkerSet",
                metadata=meta,
                spec={"replicas": tier.replicas,
                      "leaderWorkerTemplate": {
                          "size": tier.nodes,
                          "restartPolicy": "RecreateGroupOnPodRestart",
                          "leaderTemplate": self._pod(tier, hf_secret, leader=True),
                          "workerTemplate": self._pod(tier, hf_secret, leader=False)}},
                opts=child)
            selector = {LWS_NAME_LABEL: tier.name, "role": "leader"}
        # never name a Service `vllm*` (env var clash); SGLang reads no <SERVICE>_PORT variables, but stay uniform
        self.service = k8s.core.v1.Service(
            f"{name}-openai",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{tier.name}-openai", namespace=namespace, labels=self.labels),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP", selector=selector,
                ports=[k8s.core.v1.ServicePortArgs(name="http", port=tier.port, target_port=tier.port)]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.workload]))
        self.endpoint = pulumi.Output.concat("http://", tier.name, "-openai.", namespace, ":", str(tier.port))
        self.register_outputs({"endpoint": self.endpoint, "served_name": tier.served_name})

    def _pod(self, tier: SglangTierConfig, hf_secret: str, *, leader: bool) -> dict[str, Any]:
        res: dict[str, Any] = {"nvidia.com/gpu": tier.gpus_per_node, "cpu": tier.cpu, "memory": tier.memory}
        if tier.rdma_resource:
            res[tier.rdma_resource] = 1
        selector = {CERTIFIED_LABEL: "true"}
        if tier.gpu_product_label:
            selector["nvidia.com/gpu.product"] = tier.gpu_product_label
        env = [*({"name": k, "value": v} for k, v in sorted(tier.env.items())),
               {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_secret, "key": "HF_TOKEN"}}},
               *model_cache.env(tier.model_cache_path)]
        container: dict[str, Any] = {
            "name": "sglang-leader" if leader else "sglang-worker",
            "image": tier.image,
            "command": [*tier.args, "--config", f"{CONFIG_DIR}/{CONFIG_KEY}"] if leader else list(tier.args),
            "env": env,
            "resources": {"requests": {**res, "ephemeral-storage": tier.ephemeral_storage}, "limits": dict(res)},
            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, model_cache.mount(tier.model_cache_path)],
        }
        volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": tier.shm_size}},
                   model_cache.volume(tier.model_cache_path)]
        if leader:  # only rank 0 serves HTTP (SGLang engine.py _launch_subprocesses)
            container["volumeMounts"].append({"name": "sglang-config", "mountPath": CONFIG_DIR, "readOnly": True})
            volumes.append({"name": "sglang-config", "secret": {"secretName": CONFIG_SECRET, "defaultMode": 0o400}})
            health = {"httpGet": {"path": "/health", "port": "http"}}
            container["ports"] = [{"name": "http", "containerPort": tier.port},
                                  {"name": "dist-init", "containerPort": tier.dist_init_port}]
            container["startupProbe"] = {**health, "periodSeconds": 15,
                                         "failureThreshold": max(1, tier.startup_timeout_s // 15)}
            container["readinessProbe"] = {**health, "periodSeconds": 10}
            container["livenessProbe"] = {**health, "periodSeconds": 30, "failureThreshold": 4}
        labels = {**self.labels, "role": "leader" if leader else "worker"}
        return {"metadata": {"labels": labels},
                "spec": {"enableServiceLinks": False, "nodeSelector": selector,
                         "terminationGracePeriodSeconds": tier.termination_grace_s,
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [container],
                         "volumes": volumes}}


def build_tier(config: dict[str, Any], *, namespace: str, hf_secret: str,
               opts: pulumi.ResourceOptions | None = None) -> SglangTier:
    tier = SglangTierConfig.model_validate(config)
    return SglangTier(tier.name, tier, namespace, hf_secret, opts)
