"""A Triton/TensorRT-LLM tier on Kubernetes as one ComponentResource (`gridready:serving:TritonTier`).

- a ConfigMap with the generated, validated model repository and the container scripts;
- engine mode: a PVC for the engine cache and an engine-build Job in the serving image (named after the cache
  key, so a new key is a new Job; the Job script reuses a complete entry) that the server waits for;
- one node: a Deployment; several nodes (TP x PP > GPUs per node): a LeaderWorkerSet whose leader runs MPI
  across the group (workers run sshd for mpirun; the image and key Secret must provide it);
- a long startup probe on /v2/health/ready (model load), readiness and liveness, and a Service.

gridready builds the config with `tier_config(plan, ...)`; gridready/stacks/serving/program.py calls `build_tier`.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field

from gridready.serving import mpi_ssh, triton
from gridready.serving.triton.launch import REPO_IN, worker_script
from gridready.serving.triton.plan import ENGINES_DIR, WEIGHTS_DIR, TritonPlan
from gridready.stacks.serving import timeouts

TIER_LABEL = "gridready.io/tier"
GPU = "nvidia.com/gpu"
CERTIFIED_LABEL = "gridready.io/certified"
SCRIPTS_DIR = "/gridready"
MPI_SSH_PORT = mpi_ssh.PORT


class TritonTierConfig(BaseModel):
    """Everything one Triton tier needs on Kubernetes (JSON in the stack config's `triton_tiers`)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    namespace: str
    served_name: str
    served_model: str
    mode: str
    frontend: str
    image: str
    nodes: int
    gpus_on_node: int
    world_size: int
    ports: dict[str, int]
    startup_timeout_s: int
    repository: dict[str, str] = Field(description="relative path -> text of the generated model repository")
    launch_script: str
    worker_script: str = Field("", description="MPI worker pods (multi-node): prepare the repository, run sshd")
    env: dict[str, str] = Field(default_factory=dict, description="the tier's NCCL/Gloo environment (every pod)")
    build_script: str = ""
    engine_key: str | None = None
    engine_cache_size: str = "1Ti"
    engine_cache_storage_class: str | None = None
    engine_cache_access_mode: str = "ReadWriteMany"
    weights_claim: str = Field("gridready-model-weights",
                               description="PVC holding <hf_id>/<revision> directories; made and filled by this "
                                           "component where hf_id is set (<tier>-weights), else made elsewhere")
    hf_id: str | None = Field(None, description="Hub model the weights Job downloads into the weights PVC")
    revision: str | None = None
    weights_size: str = "500Gi"
    storage_class: str | None = Field(None, description="StorageClass of both PVCs (serving.kubernetes.storage_class)")
    gpu_product_label: str | None = None
    rdma_resource: str | None = None
    shm_size: str = "32Gi"
    cpu: str = "32"
    memory: str = "256Gi"
    build_timeout_s: int = Field(7200, description="the engine-build Job's budget (Pulumi waits this long)")
    weights_timeout_s: int = Field(7200, description="the weights Job's budget (download of the model)")
    mpi_ssh_secret: str | None = Field(None, description="Secret with the tier's ssh keys for mpirun (multi-node: "
                                                       "gridready/serving/mpi_ssh.py, made by the serving stack)")


def tier_config(plan: TritonPlan, namespace: str, *, env: dict[str, str] | None = None,
                mpi_image: str | None = None, **options: Any) -> dict[str, Any]:
    """The stack config entry of one tier, from its plan (options: the optional fields of TritonTierConfig);
    `env` reaches every pod and, through mpirun -x, every remote rank. `mpi_image`: a multi-node tier's image
    (serving.kubernetes.triton_mpi_image: the pinned one plus sshd, validate refuses the tier without it)."""
    env = dict(env or {})
    repo = triton.render_repository(plan)
    build = triton.build_script(plan).text if plan.mode == "engine" else ""
    return TritonTierConfig(
        name=plan.name,
        namespace=namespace,
        served_name=plan.tier.served_name,
        served_model=repo.manifest["served_model"],
        mode=plan.mode,
        frontend=plan.settings.frontend,
        image=mpi_image if plan.nodes > 1 and mpi_image else plan.release.image_ref,
        nodes=plan.nodes,
        gpus_on_node=plan.gpus_on_node,
        world_size=plan.world_size,
        ports=plan.ports,
        startup_timeout_s=plan.settings.startup_timeout_s,
        repository=repo.files,
        launch_script=triton.launch_script(plan, lws=plan.nodes > 1, env_keys=list(env)),
        worker_script=worker_script(plan) if plan.nodes > 1 else "",
        mpi_ssh_secret=mpi_ssh.SECRET if plan.nodes > 1 else None,
        env=env,
        build_script=build,
        engine_key=repo.manifest["engine_key"],
        hf_id=None if plan.tier.model.local_path else plan.tier.model.hf_id,
        revision=None if plan.tier.model.local_path else plan.tier.model.revision,
        **options,
    ).model_dump()


def weights_script(hf_id: str, revision: str) -> str:
    """The weights Job: download the pinned revision into <WEIGHTS_DIR>/<hf_id>/<revision> once (huggingface_hub,
    which the TensorRT-LLM images carry; HF_TOKEN from its Secret), then mark it complete."""
    target = f"{WEIGHTS_DIR}/{hf_id}/{revision}"
    return (
        "set -eu\n"
        f"if [ -f {shlex.quote(target)}/.gridready-complete ]; then echo 'weights present'; exit 0; fi\n"
        "python3 -c 'import sys; from huggingface_hub import snapshot_download; "
        "snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3])' "
        f"{shlex.quote(hf_id)} {shlex.quote(revision)} {shlex.quote(target)}\n"
        f"touch {shlex.quote(target)}/.gridready-complete\n"
    )


def _key(path: str) -> str:
    """ConfigMap keys cannot hold '/': ensemble/config.pbtxt -> ensemble__config.pbtxt."""
    return path.replace("/", "__")


def _probe(cfg: TritonTierConfig, path: str, port: str, period: int, failures: int) -> k8s.core.v1.ProbeArgs:
    return k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path=path, port=port),
        period_seconds=period,
        failure_threshold=failures,
        timeout_seconds=5,
    )


# the claims `serve --down` keeps (weights from the Hub, built engines): hours to fill again. Pulumi forgets them
# on destroy (retainOnDelete) and adopts them again on the next `up` through a provider that upserts
# (upsertExistingObjects, pulumi-kubernetes >= 4.29: a plain create of an existing object is AlreadyExists);
# `serve --down --purge-volumes` deletes them by this label.
KEPT_VOLUME_LABEL = "gridready.io/kept-volume"


class TritonTier(pulumi.ComponentResource):
    def __init__(
        self, name: str, config: TritonTierConfig, hf_secret: str | None = None,
        opts: pulumi.ResourceOptions | None = None, claims_provider: pulumi.ProviderResource | None = None,
    ) -> None:
        super().__init__("gridready:serving:TritonTier", name, None, opts)
        self.config = cfg = config
        self.claims_provider = claims_provider
        child = pulumi.ResourceOptions(parent=self)
        self.labels = {"app.kubernetes.io/name": "triton", "app.kubernetes.io/managed-by": "gridready",
                       TIER_LABEL: cfg.name}
        data = {_key(p): t for p, t in cfg.repository.items()}
        data["launch.sh"] = cfg.launch_script
        if cfg.worker_script:
            data["worker.sh"] = cfg.worker_script
        if cfg.build_script:
            data["build-engine.sh"] = cfg.build_script
        self.checksum = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-repo", metadata=self._meta(f"{cfg.name}-triton"), data=data, opts=child,
        )
        deps: list[pulumi.Resource] = [self.config_map]
        self.weights: k8s.core.v1.PersistentVolumeClaim | None = None
        self.weights_job: k8s.batch.v1.Job | None = None
        if cfg.hf_id and cfg.revision:  # the server and the engine build read the weights from this claim
            self.weights = self._claim(f"{name}-weights", f"{cfg.name}-weights", cfg.weights_size)
            self.weights_job = self._weights_job(name, hf_secret, [*deps, self.weights])
            deps.append(self.weights_job)
        self.engine_cache: k8s.core.v1.PersistentVolumeClaim | None = None
        self.build_job: k8s.batch.v1.Job | None = None
        if cfg.mode == "engine":
            self.engine_cache = self._claim(f"{name}-engines", f"{cfg.name}-engines", cfg.engine_cache_size)
            self.build_job = self._build_job(name, hf_secret, [*deps, self.engine_cache])
            deps.append(self.build_job)
        after = pulumi.ResourceOptions(parent=self, depends_on=deps,
                                       custom_timeouts=timeouts.custom(cfg.startup_timeout_s))
        if cfg.nodes == 1:
            self.workload: pulumi.CustomResource = k8s.apps.v1.Deployment(
                f"{name}-server",
                metadata=self._meta(cfg.name, timeouts.annotations(cfg.startup_timeout_s)),
                spec=k8s.apps.v1.DeploymentSpecArgs(
                    replicas=1,
                    strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),  # GPUs are not there twice
                    selector=k8s.meta.v1.LabelSelectorArgs(match_labels=self.labels),
                    template=self._pod(hf_secret, leader=True),
                ),
                opts=after,
            )
            selector = self.labels
        else:
            self.workload = k8s.apiextensions.CustomResource(
                f"{name}-server",
                api_version="leaderworkerset.x-k8s.io/v1",
                kind="LeaderWorkerSet",
                metadata=self._meta(cfg.name, timeouts.annotations(cfg.startup_timeout_s)),
                spec={
                    "replicas": 1,
                    # LeaderCreated (the CRD's default): workers start with the leader. LeaderReady would create
                    # them only once the leader is Ready, and the leader gets Ready only after mpirun reached the
                    # workers' sshd: a deadlock (LWS CRD v0.10.0, spec.startupPolicy).
                    "startupPolicy": "LeaderCreated",
                    "leaderWorkerTemplate": {
                        "size": cfg.nodes,
                        "restartPolicy": "RecreateGroupOnPodRestart",
                        "leaderTemplate": self._pod(hf_secret, leader=True),
                        "workerTemplate": self._pod(hf_secret, leader=False),
                    },
                },
                opts=after,
            )
            # labels the LWS controller puts on every pod of the set; the leader is worker-index 0
            # (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go)
            selector = {"leaderworkerset.sigs.k8s.io/name": cfg.name, "leaderworkerset.sigs.k8s.io/worker-index": "0"}
        self.service = k8s.core.v1.Service(
            f"{name}-svc",
            metadata=self._meta(cfg.name),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=selector,
                ports=[k8s.core.v1.ServicePortArgs(name=n, port=p, target_port=n) for n, p in cfg.ports.items()],
            ),
            opts=child,
        )
        port = cfg.ports.get("openai", cfg.ports.get("http"))
        self.endpoint = pulumi.Output.concat("http://", cfg.name, ".", cfg.namespace, ".svc:", str(port))
        self.register_outputs({"endpoint": self.endpoint, "served_name": cfg.served_name})

    @property
    def weights_claim(self) -> str:
        cfg = self.config
        return f"{cfg.name}-weights" if cfg.hf_id and cfg.revision else cfg.weights_claim

    def _claim(self, resource: str, name: str, size: str) -> k8s.core.v1.PersistentVolumeClaim:
        cfg = self.config
        return k8s.core.v1.PersistentVolumeClaim(
            resource,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=cfg.namespace,
                                                labels={**self.labels, KEPT_VOLUME_LABEL: "true"}),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=[cfg.engine_cache_access_mode],
                storage_class_name=cfg.storage_class or cfg.engine_cache_storage_class,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, provider=self.claims_provider),
        )

    def _weights_job(self, name: str, hf_secret: str | None, deps: list[pulumi.Resource]) -> k8s.batch.v1.Job:
        cfg = self.config
        container = k8s.core.v1.ContainerArgs(
            name="weights",
            image=cfg.image,
            command=["bash", "-c", weights_script(cfg.hf_id or "", cfg.revision or "")],
            env=self._env(hf_secret),
            volume_mounts=[k8s.core.v1.VolumeMountArgs(name="weights", mount_path=WEIGHTS_DIR)],
        )
        return k8s.batch.v1.Job(
            f"{name}-weights",
            metadata=self._meta(f"{cfg.name}-weights-{(cfg.revision or '')[:10]}",
                                timeouts.annotations(cfg.weights_timeout_s)),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=2,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=self.labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        containers=[container], restart_policy="Never", enable_service_links=False,
                        volumes=[k8s.core.v1.VolumeArgs(
                            name="weights", persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                                claim_name=f"{cfg.name}-weights"))]),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=deps,
                                        custom_timeouts=timeouts.custom(cfg.weights_timeout_s)),
        )

    def _meta(self, name: str, annotations: dict[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
        return k8s.meta.v1.ObjectMetaArgs(name=name, namespace=self.config.namespace, labels=self.labels,
                                          annotations=annotations)

    def _volumes(self, *, build: bool) -> tuple[list[Any], list[Any]]:
        cfg = self.config
        items = [k8s.core.v1.KeyToPathArgs(key=_key(p), path=p) for p in cfg.repository]
        scripts = [k8s.core.v1.KeyToPathArgs(key="launch.sh", path="launch.sh")]
        if cfg.worker_script:
            scripts.append(k8s.core.v1.KeyToPathArgs(key="worker.sh", path="worker.sh"))
        if cfg.build_script:
            scripts.append(k8s.core.v1.KeyToPathArgs(key="build-engine.sh", path="build-engine.sh"))
        cm = f"{cfg.name}-triton"
        vols = [
            k8s.core.v1.VolumeArgs(name="repo", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=cm, items=items)),
            k8s.core.v1.VolumeArgs(
                name="scripts", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=cm, items=scripts)
            ),
            k8s.core.v1.VolumeArgs(
                name="weights",
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=self.weights_claim, read_only=True
                ),
            ),
            k8s.core.v1.VolumeArgs(
                name="shm", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=cfg.shm_size)
            ),
        ]
        mounts = [
            k8s.core.v1.VolumeMountArgs(name="repo", mount_path=REPO_IN, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="scripts", mount_path=SCRIPTS_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="weights", mount_path=WEIGHTS_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="shm", mount_path="/dev/shm"),
        ]
        if cfg.mode == "engine":
            vols.append(k8s.core.v1.VolumeArgs(
                name="engines",
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=f"{cfg.name}-engines", read_only=not build
                ),
            ))
            mounts.append(k8s.core.v1.VolumeMountArgs(name="engines", mount_path=ENGINES_DIR, read_only=not build))
        if cfg.nodes > 1 and cfg.mpi_ssh_secret and not build:
            vols.append(k8s.core.v1.VolumeArgs(
                name="mpi-ssh", secret=k8s.core.v1.SecretVolumeSourceArgs(secret_name=cfg.mpi_ssh_secret,
                                                                           default_mode=0o600),
            ))
            mounts.append(k8s.core.v1.VolumeMountArgs(name="mpi-ssh", mount_path=mpi_ssh.MOUNT, read_only=True))
        return vols, mounts

    def _resources(self) -> k8s.core.v1.ResourceRequirementsArgs:
        cfg = self.config
        limits = {GPU: str(cfg.gpus_on_node), "cpu": cfg.cpu, "memory": cfg.memory}
        if cfg.rdma_resource and cfg.nodes > 1:
            limits[cfg.rdma_resource] = "1"
        return k8s.core.v1.ResourceRequirementsArgs(limits=limits, requests=limits)

    def _env(self, hf_secret: str | None) -> list[Any]:
        # mpirun's ssh: the tier's ssh_config (port, client key, the pinned host key, StrictHostKeyChecking yes)
        env = [k8s.core.v1.EnvVarArgs(name="OMPI_MCA_plm_rsh_args", value=mpi_ssh.RSH_ARGS)] \
            if self.config.nodes > 1 else []
        env += [k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in sorted(self.config.env.items())]
        if hf_secret:
            env.append(k8s.core.v1.EnvVarArgs(
                name="HF_TOKEN",
                value_from=k8s.core.v1.EnvVarSourceArgs(secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(
                    name=hf_secret, key="HF_TOKEN", optional=True)),
            ))
        return env

    def _pod_spec(self, containers: list[Any], volumes: list[Any], restart: str = "Always") -> Any:
        cfg = self.config
        return k8s.core.v1.PodSpecArgs(
            containers=containers,
            volumes=volumes,
            restart_policy=restart,
            enable_service_links=False,
            # certified GPU nodes only, and the GPU pool's taint tolerated (as the RayService and SGLang pods)
            node_selector={CERTIFIED_LABEL: "true",
                           **({"nvidia.com/gpu.product": cfg.gpu_product_label} if cfg.gpu_product_label else {})},
            tolerations=[k8s.core.v1.TolerationArgs(key=GPU, operator="Exists", effect="NoSchedule")],
        )

    def _pod(self, hf_secret: str | None, *, leader: bool) -> k8s.core.v1.PodTemplateSpecArgs:
        cfg = self.config
        volumes, mounts = self._volumes(build=False)
        ports = [k8s.core.v1.ContainerPortArgs(name=n, container_port=p) for n, p in cfg.ports.items()]
        if cfg.frontend == "trtllm-serve":
            ready, live, port = "/health", "/health", "openai"
        else:
            ready, live, port = "/v2/health/ready", "/v2/health/live", "http"
        startup_failures = max(math.ceil(cfg.startup_timeout_s / 15), 1)
        if leader:
            command = ["bash", f"{SCRIPTS_DIR}/launch.sh"]
            probes: dict[str, Any] = {
                "startup_probe": _probe(cfg, ready, port, 15, startup_failures),
                "readiness_probe": _probe(cfg, ready, port, 10, 3),
                "liveness_probe": _probe(cfg, live, port, 30, 10),
            }
        else:  # an MPI worker: mpirun on the leader starts the ranks here over ssh
            command = ["bash", f"{SCRIPTS_DIR}/worker.sh"]
            ports = [k8s.core.v1.ContainerPortArgs(name="mpi-ssh", container_port=MPI_SSH_PORT)]
            probes = {"readiness_probe": k8s.core.v1.ProbeArgs(
                tcp_socket=k8s.core.v1.TCPSocketActionArgs(port=MPI_SSH_PORT), period_seconds=10)}
        container = k8s.core.v1.ContainerArgs(
            name="triton" if leader else "mpi-worker",
            image=cfg.image,
            command=command,
            ports=ports,
            env=self._env(hf_secret),
            resources=self._resources(),
            volume_mounts=mounts,
            security_context=k8s.core.v1.SecurityContextArgs(
                capabilities=k8s.core.v1.CapabilitiesArgs(add=["IPC_LOCK"])
            ),
            **probes,
        )
        return k8s.core.v1.PodTemplateSpecArgs(
            metadata=k8s.meta.v1.ObjectMetaArgs(
                labels=self.labels, annotations={"gridready.io/config-checksum": self.checksum}
            ),
            spec=self._pod_spec([container], volumes),
        )

    def _build_job(self, name: str, hf_secret: str | None, deps: list[pulumi.Resource]) -> k8s.batch.v1.Job:
        cfg = self.config
        volumes, mounts = self._volumes(build=True)
        container = k8s.core.v1.ContainerArgs(
            name="engine-build",
            image=cfg.image,  # the image that serves: engines are tied to its TensorRT version
            command=["bash", f"{SCRIPTS_DIR}/build-engine.sh"],
            env=self._env(hf_secret),
            resources=self._resources(),
            volume_mounts=mounts,
        )
        job_name = f"{cfg.name}-engine-{(cfg.engine_key or '')[:10]}"
        return k8s.batch.v1.Job(
            f"{name}-engine-build",
            metadata=self._meta(job_name, timeouts.annotations(cfg.build_timeout_s)),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=1,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=self.labels),
                    spec=self._pod_spec([container], volumes, restart="Never"),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=deps,
                                        custom_timeouts=timeouts.custom(cfg.build_timeout_s)),
        )


def build_tier(
    tier: dict[str, Any], *, namespace: str, hf_secret: str | None = None, opts: pulumi.ResourceOptions | None = None,
    claims_provider: pulumi.ProviderResource | None = None,
) -> TritonTier:
    """What gridready/stacks/serving/program.py calls for each entry of `triton_tiers` (see tier_config)."""
    cfg = TritonTierConfig.model_validate({**tier, "namespace": tier.get("namespace") or namespace})
    return TritonTier(cfg.name, cfg, hf_secret, opts, claims_provider)
