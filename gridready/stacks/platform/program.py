"""The platform every serving tier needs on Kubernetes, as one ComponentResource.

- namespaces for the operators and the serving tiers;
- NVIDIA GPU Operator with its driver, container toolkit and DCGM disabled (Ansible owns those on the hosts);
- the KubeRay operator, at the version of the CRDs gridready validates against;
- the LeaderWorkerSet controller (multi-node Triton tiers), chart `lws` from registry.k8s.io (LWS docs,
  Installation: https://lws.sigs.k8s.io/docs/installation/), at the version of the vendored LWS CRD;
- node labels from certification (`gridready.io/certified=true|false`) and the taint
  `gridready.io/quarantined=true:NoSchedule` on quarantined nodes (server-side apply patches).

Node.spec.taints is an atomic list under server-side apply (`+listType=atomic`): whoever applies it sets the whole
list, and a manager that stops applying it deletes it. So gridready reads the node's live taints (`Node.get`) and
applies them all with its own added (quarantine) or taken out (re-certification): the GPU pool's taint and every
other taint stay, and only gridready's own is ever added or removed.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

CERTIFIED_LABEL = "gridready.io/certified"
QUARANTINE_TAINT = "gridready.io/quarantined"
NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
KUBERAY_HELM_REPO = "https://ray-project.github.io/kuberay-helm/"
LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
LWS_VERSION = "0.10.0"  # the tag (v0.10.0) of /work/shared/schemas/leaderworkerset.x-k8s.io_leaderworkersets.yaml


class NodeState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Kubernetes node name")
    certified: bool
    node_group: str
    drained: bool = Field(False, description="drained by the watcher: gridready's taint evicts its pods (NoExecute)")


class PlatformConfig(BaseModel):
    """Typed config of the stack (Pulumi config key `stack`, JSON)."""

    model_config = ConfigDict(extra="forbid")

    customer: str
    gpu_operator_namespace: str = "gpu-operator"
    gpu_operator_version: str
    kuberay_namespace: str = "kuberay-system"
    kuberay_version: str
    lws_namespace: str = "lws-system"
    lws_version: str = LWS_VERSION
    serving_namespace: str
    nodes: list[NodeState] = Field(default_factory=list)


class GpuPlatform(pulumi.ComponentResource):
    """Namespaces, the operators (GPU, KubeRay, LeaderWorkerSet) and the certification marks on the nodes."""

    def __init__(self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gridready:platform:GpuPlatform", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app.kubernetes.io/managed-by": "gridready", "gridready.io/customer": config.customer}
        self.namespaces = {
            ns: k8s.core.v1.Namespace(
                f"ns-{ns}", metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels=labels), opts=child
            )
            for ns in (config.gpu_operator_namespace, config.kuberay_namespace, config.lws_namespace,
                       config.serving_namespace)
        }
        self.gpu_operator = self._release(
            "gpu-operator", "gpu-operator", config.gpu_operator_version, config.gpu_operator_namespace,
            repo=NVIDIA_HELM_REPO,
            values={
                "driver": {"enabled": False},  # gridready_nvidia_driver role
                "toolkit": {"enabled": False},  # gridready_container_toolkit role
                "dcgm": {"enabled": False},  # host DCGM from the gridready_dcgm role
                "dcgmExporter": {"enabled": True},
                "devicePlugin": {"enabled": True},
                "gfd": {"enabled": True},
                "operator": {"defaultRuntime": "containerd"},
            },
        )
        self.kuberay = self._release("kuberay-operator", "kuberay-operator", config.kuberay_version,
                                     config.kuberay_namespace, repo=KUBERAY_HELM_REPO)
        self.lws = self._release("lws", LWS_CHART, config.lws_version, config.lws_namespace)
        self.node_patches = [self._mark(node, child) for node in config.nodes]
        self.register_outputs({
            "gpu_operator": self.gpu_operator.status,
            "kuberay": self.kuberay.status,
            "lws": self.lws.status,
            "certified_nodes": [n.name for n in config.nodes if n.certified],
            "quarantined_nodes": [n.name for n in config.nodes if not n.certified],
        })

    def _release(self, name: str, chart: str, version: str, namespace: str, *, repo: str | None = None,
                 values: dict[str, Any] | None = None) -> k8s.helm.v3.Release:
        """An atomic Helm release of an operator, in its namespace, after that namespace exists."""
        return k8s.helm.v3.Release(
            name,
            name=name,
            chart=chart,
            version=version,
            namespace=namespace,
            **({"repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=repo)} if repo else {}),
            **({"values": values} if values is not None else {}),
            atomic=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[namespace]]),
        )

    def _mark(self, node: NodeState, opts: pulumi.ResourceOptions) -> k8s.core.v1.NodePatch:
        live = k8s.core.v1.Node.get(f"live-{node.name}", node.name, opts=pulumi.ResourceOptions(parent=self))
        taints = live.spec.apply(lambda spec: merged_taints(_taints_of(spec), quarantined=not node.certified,
                                                            drained=node.drained))
        return k8s.core.v1.NodePatch(
            f"node-{node.name}",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                name=node.name,
                labels={CERTIFIED_LABEL: str(node.certified).lower(), "gridready.io/node-group": node.node_group},
                annotations={"pulumi.com/patchForce": "true"},
            ),
            spec=k8s.core.v1.NodeSpecPatchArgs(taints=taints),
            opts=opts,
        )


OWN_TAINT = {"key": QUARANTINE_TAINT, "value": "true", "effect": "NoSchedule"}
# A drained node's pods leave it: NoExecute evicts every pod that does not tolerate the taint (Kubernetes, "Taints
# and Tolerations", https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/); the serving
# pods tolerate only the GPU pool's taint, so KubeRay and LeaderWorkerSet start them again on certified nodes.
DRAIN_TAINT = {**OWN_TAINT, "effect": "NoExecute"}


def _taints_of(spec: Any) -> list[dict[str, Any]]:
    """The live node's taints as dicts (the SDK gives objects, the mocks dicts or nothing)."""
    raw = (spec.get("taints") if isinstance(spec, dict) else getattr(spec, "taints", None)) if spec else None
    out = []
    for t in raw or []:
        item = t if isinstance(t, dict) else {"key": getattr(t, "key", None), "value": getattr(t, "value", None),
                                              "effect": getattr(t, "effect", None)}
        out.append({k: v for k, v in item.items() if k in ("key", "value", "effect") and v is not None})
    return out


def merged_taints(live: list[dict[str, Any]], *, quarantined: bool, drained: bool = False) -> list[dict[str, Any]]:
    """Every taint the node has that is not gridready's, plus gridready's own: NoExecute when drained (its pods
    leave), NoSchedule when only quarantined (nothing new lands)."""
    others = [t for t in live if t.get("key") != QUARANTINE_TAINT]
    if drained:
        return [*others, DRAIN_TAINT]
    return [*others, OWN_TAINT] if quarantined else others


def program() -> None:
    """The stack program: typed config, an explicit provider from the inventory's kubeconfig."""
    cfg = pulumi.Config()
    config = PlatformConfig.model_validate(cfg.require_object("stack"))
    provider = k8s.Provider("k8s", kubeconfig=cfg.require_secret("kubeconfig"), enable_server_side_apply=True)
    platform = GpuPlatform(config.customer, config, pulumi.ResourceOptions(providers=[provider]))
    pulumi.export("serving_namespace", config.serving_namespace)
    pulumi.export("certified_nodes", [n.name for n in config.nodes if n.certified])
    pulumi.export("quarantined_nodes", [n.name for n in config.nodes if not n.certified])
    pulumi.export("kuberay_status", platform.kuberay.status)
