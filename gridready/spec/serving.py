"""The `serving:` section of cluster.yml: tiers, models, parallelism, versions and SLOs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from gridready.spec.decision import DecisionSpec
from gridready.spec.embedding import EmbeddingSettings
from gridready.spec.names import IMAGE_REF, K8S_QUANTITY, SLUG
from gridready.spec.router import RouterSpec
from gridready.spec.sglang import SglangSettings
from gridready.spec.sglang import problems as sglang_problems
from gridready.spec.triton import TritonSettings

# Pins: PyPI's newest releases (vllm 0.33.0 and ray 2.60.0, both 2026-11).
VLLM_VERSION = "0.33.0"
RAY_VERSION = "2.60.0"
KUBERAY_VERSION = "1.7.0"  # the CRDs in gridready/data/crds/ come from this tag
ENGINES = ("vllm", "triton-trtllm", "sglang", "triton-embedding")
# Engines gridready refuses, with the reason and its source (docs/serving-sglang.md).
REFUSED_ENGINES = {
    "tgi": "Text Generation Inference is not supported: Hugging Face put it in maintenance mode on 2025-12-11 and "
           "archived huggingface/text-generation-inference on 2026-03-21 "
           "(https://huggingface.co/docs/text-generation-inference); use sglang or vllm",
}


class ModelSource(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    hf_id: str | None = Field(None, description="Hugging Face id, e.g. meta-llama/Llama-3.1-8B-Instruct")
    revision: str | None = Field(None, description="pinned commit of the Hugging Face repository")
    local_path: str | None = Field(None, description="a path present on every node instead of hf_id")
    weights_gb: PositiveFloat | None = Field(
        None, description="size of the weights on disk, GB; unset: from the parameter count in the name (70B: "
                          "140 GB at bf16). Kubernetes: sizes KubeRay's initializing timeout")

    @model_validator(mode="after")
    def _one_source(self) -> ModelSource:
        if (self.hf_id is None) == (self.local_path is None):
            raise ValueError("set exactly one of hf_id or local_path")
        if self.hf_id is not None and not self.revision:
            raise ValueError("hf_id needs a pinned revision")
        return self

    @property
    def source(self) -> str:
        """What vLLM loads: the local path or the Hugging Face id."""
        return self.local_path or self.hf_id or ""


class Slo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    ttft_ms_p99: PositiveFloat | None = Field(None, description="time to first token, p99, ms")
    tpot_ms_p99: PositiveFloat | None = Field(None, description="time per output token, p99, ms")
    e2e_ms_p99: PositiveFloat | None = None
    goodput_min: float = Field(0.9, gt=0, le=1, description="share of requests meeting every SLO")


class LoraAdapter(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="the `model` name clients ask for")
    path: str = Field(description="adapter directory present on every node (or a Hugging Face id)")


class Autoscaling(BaseModel):
    """Ray Serve replica bounds (target kubernetes); on fixed pools min = max = replicas."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    min_replicas: PositiveInt | None = Field(None, description="default: the tier's replicas")
    max_replicas: PositiveInt | None = Field(None, description="default: the tier's replicas")
    target_ongoing_requests: PositiveInt = Field(32, description="Serve scales up above this per replica")
    max_ongoing_requests: PositiveInt = Field(256, description="requests one replica accepts at once")

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas and self.max_replicas and self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must be <= max_replicas")
        return self


# engines that serve behind the customer's API key (vault_gridready_vllm_api_key): vLLM's --api-key/VLLM_API_KEY,
# SGLang's api-key; Triton has no authentication of its own (its listeners are firewalled instead)
API_KEY_ENGINES = frozenset({"vllm", "sglang"})


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(pattern=SLUG, description="unit vllm-<name>, RayService <name>; never `vllm`")
    engine: Literal["vllm", "triton-trtllm", "sglang", "triton-embedding"] = Field(
        description="triton-embedding: a fixed-cost model (ONNX Runtime or TensorRT plan) behind Triton's dynamic "
                    "batcher; the others serve LLMs")
    model: ModelSource
    served_name: str = Field(description="the OpenAI `model` name of the endpoint")
    node_group: str | None = Field(None, description="the node group this tier runs on (default: the first)")
    tensor_parallel: PositiveInt | Literal["derive"] = Field(
        "derive", description="derive: the GPUs per node (TP stays inside a node's NVLink domain)"
    )
    pipeline_parallel: PositiveInt | Literal["derive"] = Field(
        "derive", description="derive: 1 (a replica on one node), or the nodes the weights need where the model's "
                              "name gives its size (405B)")
    replicas: PositiveInt = Field(1, description="model replicas; on hosts each is its own Ray cluster")
    max_model_len: PositiveInt = 8192
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_num_seqs: PositiveInt = 256
    max_num_batched_tokens: PositiveInt | None = Field(None, description="vLLM default when unset")
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    quantization: Literal["fp8", "awq", "gptq", "compressed-tensors", "modelopt"] | None = None
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    lora_adapters: list[LoraAdapter] = Field(default_factory=list)
    max_loras: PositiveInt = Field(4, description="adapters resident at once (with lora_adapters)")
    max_lora_rank: PositiveInt = Field(16, description="largest adapter rank (with lora_adapters)")
    extra_engine_args: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="other options of the tier's engine (vLLM or SGLang) by name; read as "
                                          "the pinned engine's parser reads them (a prefix is the option it begins), "
                                          "never one gridready sets (parallelism, port, host, model, "
                                          "trust_remote_code), one that loads code or files, a revision, unknown or "
                                          "ambiguous; values checked against the option's type and choices"
    )
    trust_remote_code: bool = Field(
        False, description="run the model repository's own Python code on every node (vLLM --trust-remote-code); "
                           "only for a repository pinned by revision whose code you have read")
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)
    drain_timeout_s: PositiveInt = Field(
        60, le=3600, description="in-flight requests may finish this long when a replica or engine is stopped")
    port: int = Field(8000, ge=1024, le=65535)
    slo: Slo = Field(default_factory=Slo)
    triton: TritonSettings | None = Field(
        None, description="Triton/TensorRT-LLM settings (engine triton-trtllm); default: LLM-API mode behind Triton"
    )

    sglang: SglangSettings | None = Field(
        None, description="SGLang settings (engine sglang); default: SglangSettings()")
    embedding: EmbeddingSettings | None = Field(
        None, description="the fixed-cost model's tensors, dynamic batcher and instance groups (engine "
                          "triton-embedding, required there)")

    @field_validator("engine", mode="before")
    @classmethod
    def _refused_engine(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() in REFUSED_ENGINES:
            raise ValueError(REFUSED_ENGINES[value.lower()])
        return value

    @field_validator("name")
    @classmethod
    def _not_vllm(cls, value: str) -> str:
        # Kubernetes injects <SERVICE>_PORT env vars: a Service named vllm* gives VLLM_PORT=tcp://... (vLLM #15613)
        if value == "vllm" or value.startswith("vllm-"):
            raise ValueError("must not be `vllm` or start with `vllm-` (Service env vars clash with vLLM's)")
        return value

    @model_validator(mode="after")
    def _triton_only_for_triton(self) -> Tier:
        if self.triton is not None and self.engine != "triton-trtllm":
            raise ValueError("`triton` settings need engine triton-trtllm")
        if self.sglang is not None and self.engine != "sglang":
            raise ValueError("`sglang` settings need engine sglang")
        if self.engine == "sglang" and (wrong := sglang_problems(self.quantization, self.kv_cache_dtype)):
            raise ValueError("; ".join(wrong))
        if (self.embedding is not None) != (self.engine == "triton-embedding"):
            raise ValueError("engine triton-embedding needs `embedding` (its inputs and outputs), and `embedding` "
                             "needs engine triton-embedding")
        if self.embedding is not None:
            if wrong := embedding_problems(self):
                raise ValueError("; ".join(wrong))
            self.pipeline_parallel = 1  # one node per replica; derive's share of the nodes does not apply
        return self


def embedding_problems(tier: Tier) -> list[str]:
    """What a fixed-cost tier cannot have: LLM settings, pipeline stages, a model file it cannot find."""
    emb = tier.embedding
    assert emb is not None
    out = []
    if tier.pipeline_parallel not in ("derive", 1):
        out.append("triton-embedding: pipeline_parallel must be 1 or derive (each replica is one node; "
                   "tensor_parallel is the number of the node's GPUs it uses)")
    if tier.slo.ttft_ms_p99 is not None or tier.slo.tpot_ms_p99 is not None:
        out.append("triton-embedding: a fixed-cost model streams no tokens; set slo.e2e_ms_p99, not ttft/tpot")
    if tier.lora_adapters or tier.quantization or tier.extra_engine_args:
        out.append("triton-embedding: lora_adapters, quantization and extra_engine_args are LLM settings")
    if tier.model.hf_id is not None and emb.model_file is None:
        out.append("triton-embedding: a model.hf_id needs embedding.model_file (the file in the snapshot, e.g. "
                   "onnx/model.onnx)")
    if tier.model.local_path is not None and emb.model_file is not None:
        out.append("triton-embedding: model.local_path is the model file itself; drop embedding.model_file")
    return out


NAMESPACE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"  # an RFC 1123 label, as Kubernetes names namespaces


class KubernetesServing(BaseModel):
    """Settings of target kubernetes (KubeRay RayService per tier)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    namespace: str = Field("gridready-serving", pattern=NAMESPACE)
    ray_image: str = Field(
        f"rayproject/ray-llm:{RAY_VERSION}-py311-cu128", pattern=IMAGE_REF,
        description="Ray Serve LLM image (vLLM inside); pin a digest in production",
    )
    hf_token_secret: str = Field("hf-token", description="Secret (key HF_TOKEN) the stack creates from the vault")
    client_namespaces: list[Annotated[str, StringConstraints(pattern=NAMESPACE)]] = Field(
        default_factory=list,
        description="namespaces whose pods may reach the tiers' serving ports (the Gateway's, Prometheus'); the "
                    "tiers' NetworkPolicies admit these and serving.firewall_clients, and nothing else",
    )
    monitoring_namespaces: list[Annotated[str, StringConstraints(pattern=NAMESPACE)]] = Field(
        default_factory=lambda: ["monitoring"],
        description="namespaces of the Prometheus that scrapes the tiers (kube-prometheus-stack's): the tiers' "
                    "NetworkPolicies admit them to each tier's metrics port only")
    rdma_resource: str | None = Field("rdma/ib", description="device-plugin resource per worker pod; null: none")
    socket_ifname: str = Field("eth0", description="pod interface for NCCL/Gloo bootstrap sockets")
    gpu_product_label: str | None = Field(None, description="nodeSelector nvidia.com/gpu.product, e.g. NVIDIA-H200")
    shm_size: str = Field("64Gi", pattern=K8S_QUANTITY,
                          description="/dev/shm (emptyDir medium Memory) of the worker pods, a quantity (64Gi)")
    model_cache_path: str = Field(
        "/var/lib/gridready/hf", pattern=r"^/[A-Za-z0-9_.@+/-]{0,4095}$",
        description="node-local Hugging Face cache (hostPath, HF_HOME of the GPU pods): weights download once per node",
    )
    ephemeral_storage: str = Field("50Gi", pattern=K8S_QUANTITY,
                                   description="ephemeral-storage request of each GPU pod (torch.compile cache, logs)")
    worker_cpu: str = Field("32", pattern=K8S_QUANTITY, description="CPU request of each GPU pod (32, 31500m)")
    worker_memory: str = Field("512Gi", pattern=K8S_QUANTITY, description="memory request of each GPU pod (512Gi)")
    upgrade_strategy: Literal["None", "NewCluster"] = Field(
        "None", description="None on fixed pools; NewCluster needs twice the GPUs during an upgrade"
    )
    initializing_timeout: str | None = Field(
        None, pattern=r"^[0-9]+[smh]$",
        description="ray.io/initializing-timeout; unset: from each tier's model size and hub_bandwidth_mbps "
                    "(gridready/serving/k8s_startup.py)")
    hub_bandwidth_mbps: PositiveInt = Field(
        1000, description="Hugging Face download bandwidth of a GPU node, Mbit/s: sizes the initializing timeout")
    triton_mpi_image: str | None = Field(
        None, pattern=IMAGE_REF,
        description="multi-node Triton tiers: an image built FROM the tier's pinned tritonserver image with "
                    "openssh-server and openssh-client and a checked /opt/hpcx/ompi/bin/mpirun (docs/kubernetes.md "
                    "recipe); the stock image has no sshd, so without it such a tier is refused at validate")
    router_url: str | None = Field(
        None, pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$",
        description="where this machine reaches the router (the Gateway listener's, a LoadBalancer's or a "
                    "port-forward's URL, no path): serve's readiness, smoke, benchmark and SLO gate go through it; "
                    "unset: the address serving.router.gateway publishes (docs/kubernetes.md)")
    gpu_operator_version: str = Field("v25.10.1", description="NVIDIA GPU Operator Helm chart version")
    kuberay_version: str = Field(KUBERAY_VERSION, description="KubeRay operator Helm chart version")
    kubernetes_version: str = Field("1.32", pattern=r"^1\.[0-9]+$", description="schemas used to validate manifests")
    storage_class: str | None = Field(
        None, pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        description="StorageClass of the PVCs gridready makes (Triton's weights and engine cache); null: the "
                    "cluster's default class",
    )
    weights_volume_size: str = Field("500Gi", pattern=r"^[0-9]+(Ki|Mi|Gi|Ti)$",
                                     description="size of a Triton tier's weights PVC (filled from the Hub)")
    engine_cache_size: str = Field("1Ti", pattern=r"^[0-9]+(Ki|Mi|Gi|Ti)$",
                                   description="size of a Triton tier's engine-cache PVC")
    pvc_access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] = Field(
        "ReadWriteMany", description="access mode of those PVCs: ReadWriteMany where a tier spans nodes")


class EngineHealth(BaseModel):
    """Target hosts: a timer per engine unit asks its health URL and restarts a hung engine (none of vLLM, SGLang
    or Triton notifies systemd's watchdog). On Kubernetes the pods' liveness probes do the same."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool = True
    interval_s: int = Field(15, ge=5, le=3600, description="seconds between two probes of an engine")
    timeout_s: int = Field(10, ge=1, le=600, description="a probe that takes longer counts as a failure")
    failures: int = Field(3, ge=1, le=100, description="consecutive failed probes before the engine is restarted")
    startup_grace_s: int = Field(
        1800, ge=0, le=86400,
        description="failures count only after the engine answered once since its start, or after this long")


class RayNodeSizing(BaseModel):
    """What `ray start` offers on each serving node (target hosts); unset: Ray's own detection."""

    model_config = ConfigDict(extra="forbid", strict=True)

    num_cpus: PositiveInt | None = Field(None, description="--num-cpus (unset: every vCPU of the node)")
    memory_bytes: PositiveInt | None = Field(None, description="--memory in bytes (unset: Ray's default)")
    object_store_bytes: int | None = Field(None, ge=78_643_200, description="--object-store-memory in bytes "
                                           "(unset: Ray's default; Ray refuses less than 75 MiB)")
    include_dashboard: bool = Field(True, description="run Ray's dashboard on the heads (job submission, metrics)")


class ServingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    target: Literal["hosts", "kubernetes"] = "hosts"
    kubeconfig: str | None = Field(None, description="path of the kubeconfig (target kubernetes)")
    tiers: list[Tier] = Field(default_factory=list)
    vllm_version: str = Field(VLLM_VERSION, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$", description="pinned vLLM (hosts)")
    ray_version: str = Field(RAY_VERSION, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
                             description="pinned Ray, hosts and image")
    ray_port: int = Field(6379, ge=1024, le=65535, description="Ray GCS port of every head")
    socket_ifname: str | None = Field(
        None, description="NCCL/Gloo socket interface on hosts; default: the node group's mgmt_interface"
    )
    wait_timeout_s: PositiveInt = Field(900, description="how long vllm-<tier> waits for every GPU to join")
    ready_timeout_s: PositiveInt = Field(
        600, description="hosts: how long serve waits, after vllm-<tier> starts, for /v1/models to list the model "
                         "(the model's download and load)")
    ray_node: RayNodeSizing = Field(default_factory=RayNodeSizing, description="resources `ray start` offers")
    firewall_clients: list[str] = Field(
        default_factory=list,
        description="CIDRs besides the cluster members and the controller allowed to the API and metrics ports",
    )
    firewall_clients_any: bool = Field(
        False, description="accept firewall_clients that take in the whole internet or most of it (0.0.0.0/0, ::/0, "
                           "an IPv4 network wider than /8, IPv6 wider than /16): Triton's ports have no "
                           "authentication and every tier's API and metrics ports open to them")
    network_isolated: bool = Field(
        False,
        description="only the tier's nodes and its clients reach the serving hosts (a private network); without "
                    "it, serve fails a host where neither nftables nor ufw works (Ray has no authentication)",
    )
    kubernetes: KubernetesServing = Field(default_factory=KubernetesServing)
    engine_health: EngineHealth = Field(
        default_factory=EngineHealth, description="restart a hung engine on hosts (health-check timers)")
    decision: DecisionSpec = Field(
        default_factory=DecisionSpec, description="how to choose between tiers that serve the same model"
    )
    router: RouterSpec = Field(
        default_factory=RouterSpec, description="one OpenAI-compatible endpoint in front of the tiers (docs/layer3.md)"
    )

    @model_validator(mode="after")
    def _tier_router_ports(self) -> ServingSpec:
        """The tier routers share the serving head with the router and, often, a tier: no port twice."""
        tr = self.router.tier_routers
        if not (self.router.enabled and tr.enabled and self.tiers):
            return self
        taken = {self.router.port: "router.port"} | {t.port: f"the port of tier {t.name}" for t in self.tiers}
        last = tr.port + len(self.tiers) - 1
        for port in range(tr.port, last + 1):
            if port in taken:
                raise ValueError(f"router.tier_routers.port: the tier routers listen on {tr.port}..{last}, which "
                                 f"includes {port}, {taken[port]}")
        return self
