"""The authenticating front of the Kubernetes tiers (`gridready:serving:Router`): LiteLLM's proxy as a Deployment.

Ray Serve LLM's OpenAI ingress checks no API key (ray-project/ray#55369: VLLM_API_KEY is not read), so on this
target a tier's Service must not be reachable by clients at all. Clients reach this proxy only: it requires the
serving API key as its master key (LiteLLM general_settings.master_key, https://docs.litellm.ai/docs/proxy/virtual_keys)
read from the `vllm-api-key` Secret, routes by the request's `model` (the routes of serving.router, weights and
canaries included; a route's model is rewritten to the tier's served name) and forwards to the tiers' `<tier>-openai`
Services. With `serving.router.keys` it checks each client's key as the hosts' router does (LiteLLM's custom_auth,
the same hook file, over the keys' SHA-256 digests and limits from the `gridready-router-keys` Secret). The tiers'
NetworkPolicies admit this proxy's pods to their serving ports instead of the clients
(gridready/stacks/serving/program.py). The image is LiteLLM's own (`ghcr.io/berriai/litellm:main-v<version>`, the
version the hosts' router pins), started with `--config` and `--port` (LiteLLM proxy CLI).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

NAME = "gridready-router"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "gridready"}
CONFIG_DIR = "/etc/litellm"
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
KEYS_SECRET = "gridready-router-keys"
KEYS_DIR = "/etc/gridready-router-keys"
AUTH_FILE = "gridready_router_auth.py"  # LiteLLM imports custom_auth modules from the config file's folder


class RouterK8sConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: str
    port: int = 4000
    replicas: int = 2
    config_yaml: str = Field(description="LiteLLM config.yaml; secrets only as os.environ/<NAME>")
    key_envs: list[str] = Field(default_factory=list, description="env names the config reads the tiers' key from")
    client_keys: bool = Field(False, description="per-client keys (serving.router.keys): the custom_auth hook")
    auth_module: str = Field("", description="gridready_router_auth.py, LiteLLM's custom_auth hook")


class Router(pulumi.ComponentResource):
    def __init__(self, name: str, cfg: RouterK8sConfig, namespace: str, api_key_secret: str, api_key_field: str,
                 opts: pulumi.ResourceOptions | None = None, *, client_keys: pulumi.Input[str] | None = None) -> None:
        super().__init__("gridready:serving:Router", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        meta = k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=namespace, labels=LABELS)
        data = {"config.yaml": cfg.config_yaml, **({AUTH_FILE: cfg.auth_module} if cfg.client_keys else {})}
        self.config_map = k8s.core.v1.ConfigMap(f"{name}-config", metadata=meta, data=data, opts=child)
        key = {"valueFrom": {"secretKeyRef": {"name": api_key_secret, "key": api_key_field}}}
        env = [{"name": MASTER_KEY_ENV, **key}, *({"name": e, **key} for e in cfg.key_envs)]
        mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
        volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": NAME}}]
        waits: list[pulumi.Resource] = [self.config_map]
        if cfg.client_keys:  # SHA-256 digests of the clients' keys with their limits, from the vault at deploy time
            if client_keys is None:
                raise ValueError("per-client router keys need the routerKeys secret")
            self.keys_secret = k8s.core.v1.Secret(
                f"{name}-keys", metadata=k8s.meta.v1.ObjectMetaArgs(name=KEYS_SECRET, namespace=namespace,
                                                                    labels=LABELS),
                type="Opaque", string_data={"keys.json": client_keys}, opts=child)
            env.append({"name": "GRIDREADY_ROUTER_KEYS_FILE", "value": f"{KEYS_DIR}/keys.json"})
            mounts.append({"name": "client-keys", "mountPath": KEYS_DIR, "readOnly": True})
            volumes.append({"name": "client-keys", "secret": {"secretName": KEYS_SECRET, "defaultMode": 0o400}})
            waits.append(self.keys_secret)
        health = {"httpGet": {"path": "/health/liveliness", "port": "http"}}
        pod: dict[str, Any] = {
            "metadata": {"labels": dict(LABELS)},
            "spec": {
                "enableServiceLinks": False,
                "containers": [{
                    "name": "litellm",
                    "image": cfg.image,
                    "args": ["--config", f"{CONFIG_DIR}/config.yaml", "--port", str(cfg.port)],
                    "env": env,
                    "ports": [{"name": "http", "containerPort": cfg.port}],
                    "startupProbe": {**health, "periodSeconds": 10, "failureThreshold": 60},
                    "readinessProbe": {**health, "periodSeconds": 10},
                    "livenessProbe": {**health, "periodSeconds": 30, "failureThreshold": 4},
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                    "volumeMounts": mounts,
                }],
                "volumes": volumes,
            },
        }
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=namespace, labels=LABELS,
                                                annotations={"pulumi.com/timeoutSeconds": "900"}),
            spec={"replicas": cfg.replicas, "selector": {"matchLabels": dict(LABELS)}, "template": pod},
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits,
                                        custom_timeouts=pulumi.CustomTimeouts(create="900s", update="900s")))
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=meta,
            spec=k8s.core.v1.ServiceSpecArgs(type="ClusterIP", selector=dict(LABELS), ports=[
                k8s.core.v1.ServicePortArgs(name="http", port=cfg.port, target_port="http")]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.deployment]))
        self.endpoint = pulumi.Output.concat("http://", NAME, ".", namespace, ":", str(cfg.port))
        self.register_outputs({"endpoint": self.endpoint})
