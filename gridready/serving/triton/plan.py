"""Resolve a Triton tier into a plan: parallelism, world size, limits, image, paths and ports.

Everything derived lives here and only here: MPI world size = TP x PP, nodes = world / GPUs per node,
max batch size and KV fraction defaults from the tier, the release line from the pins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gridready.catalog import Sku
from gridready.errors import InvalidInput
from gridready.serving.triton.versions import ReleaseLine, release_line
from gridready.spec.parallel import Parallelism
from gridready.spec.serving import Tier
from gridready.spec.triton import SitePins, TritonSettings

# Paths inside the serving container (the role and the Kubernetes component mount host/PVC paths here).
REPO_DIR = "/models/repo"
ENGINES_DIR = "/engines"
WEIGHTS_DIR = "/models/hf"
HOPPER = ("H100", "H200")


@dataclass(frozen=True)
class TritonPlan:
    tier: Tier
    settings: TritonSettings
    release: ReleaseLine
    sku: Sku
    parallel: Parallelism  # the tier's resolved TP x PP (gridready.spec.parallel), as topology.TierPlan holds it

    @property
    def name(self) -> str:
        return self.tier.name

    @property
    def mode(self) -> Literal["llmapi", "engine"]:
        return self.settings.mode

    @property
    def tp(self) -> int:
        return self.parallel.tensor

    @property
    def pp(self) -> int:
        return self.parallel.pipeline

    @property
    def gpus_per_node(self) -> int:
        return self.parallel.gpus_per_node

    @property
    def world_size(self) -> int:
        return self.parallel.world_size

    @property
    def nodes(self) -> int:
        return self.parallel.nodes_per_replica

    @property
    def gpus_on_node(self) -> int:
        """GPUs each node of the tier uses."""
        return min(self.world_size, self.gpus_per_node)

    @property
    def max_batch_size(self) -> int:
        return self.settings.max_batch_size or self.tier.max_num_seqs

    @property
    def max_seq_len(self) -> int:
        return self.tier.max_model_len

    @property
    def max_input_len(self) -> int:
        return self.settings.max_input_len or self.tier.max_model_len

    @property
    def max_num_tokens(self) -> int:
        return self.tier.max_num_batched_tokens or 8192

    @property
    def kv_fraction(self) -> float:
        return self.settings.kv_cache_free_gpu_mem_fraction

    @property
    def dtype(self) -> str:
        return "bfloat16" if self.tier.dtype == "auto" else self.tier.dtype

    @property
    def fp8(self) -> bool:
        """FP8 weights (and KV cache) from tier.quantization fp8 / modelopt."""
        return self.tier.quantization in ("fp8", "modelopt")

    @property
    def fp8_kv(self) -> bool:
        return self.fp8 or self.tier.kv_cache_dtype.startswith("fp8")

    @property
    def model_family(self) -> str | None:
        """The TensorRT-LLM example family of the model: the setting, else told from the model's name."""
        if self.settings.model_family:
            return self.settings.model_family
        name = self.model_id.lower().rsplit("/", 1)[-1]
        return next((fam for key, fam in MODEL_FAMILIES if key in name), None)

    @property
    def convert_script(self) -> str | None:
        """convert_checkpoint.py of the model's family (the pins hold the path with `{family}`)."""
        script, family = self.release.convert_script, self.model_family
        if not script or (family is None and "{family}" in script):
            return None
        return script.replace("{family}", family or "")

    @property
    def kv_reuse(self) -> bool:
        return self.tier.enable_prefix_caching

    @property
    def chunked_context(self) -> bool:
        return self.tier.enable_chunked_prefill

    @property
    def model_id(self) -> str:
        return self.tier.model.hf_id or self.tier.model.local_path or ""

    @property
    def revision(self) -> str:
        return self.tier.model.revision or "local"

    @property
    def weights_dir(self) -> str:
        """Weights and tokenizer inside the container: local_path as is, else <WEIGHTS_DIR>/<hf_id>/<revision>."""
        if self.tier.model.local_path:
            return self.tier.model.local_path
        return f"{WEIGHTS_DIR}/{self.tier.model.hf_id}/{self.tier.model.revision}"

    @property
    def openai_port(self) -> int:
        return self.tier.port

    @property
    def ports(self) -> dict[str, int]:
        """Ports that listen. tritonserver: HTTP, gRPC and --metrics-port. Triton's OpenAI frontend: the OpenAI
        port (it also serves /metrics) and the KServe HTTP/gRPC frontends, no metrics port (server:python/openai/
        openai_frontend/main.py, frontend/fastapi/routers/observability.py). trtllm-serve: its one port."""
        s = self.settings
        if s.frontend == "trtllm-serve":
            return {"openai": self.openai_port}
        if s.openai_frontend:
            return {"http": s.http_port, "grpc": s.grpc_port, "openai": self.openai_port}
        return {"http": s.http_port, "grpc": s.grpc_port, "metrics": s.metrics_port}

    @property
    def metrics_port_name(self) -> str:
        """The entry of `ports` that serves /metrics."""
        return "metrics" if "metrics" in self.ports else "openai"


# model name fragment -> examples/models/core/<family> of TensorRT-LLM (Mistral/Mixtral convert with the llama
# example: TensorRT-LLM examples/models/core/llama/README.md)
MODEL_FAMILIES = (("mixtral", "llama"), ("mistral", "llama"), ("llama", "llama"), ("qwen", "qwen"),
                  ("gemma", "gemma"), ("phi", "phi"))


def _problem(tier: Tier, key: str, msg: str) -> str:
    return f"serving.tiers[{tier.name}].{key}: {msg}"


def make_plan(
    tier: Tier,
    settings: TritonSettings | None,
    *,
    sku: Sku,
    parallel: Parallelism,
    site_pins: SitePins | None = None,
    source: str = "cluster.yml",
) -> TritonPlan:
    """Validate and resolve; raises InvalidInput (exit 2) with one `<source>: <key>: <message>` line per problem.
    `parallel` is the tier's resolved parallelism (gridready.spec.parallel, kept by topology.TierPlan); `site_pins`:
    the inventory's pins (gridready.inventory.site_pins), under the tier's own `triton.versions`."""
    settings = settings or TritonSettings.model_validate({})
    release = release_line(settings.mode, settings.versions, site_pins)
    gpus_per_node = parallel.gpus_per_node
    plan = TritonPlan(tier, settings, release, sku, parallel)
    problems: list[str] = []
    if tier.engine != "triton-trtllm":
        problems.append(_problem(tier, "engine", f"is {tier.engine!r}, not 'triton-trtllm'"))
    world = plan.world_size
    if world > gpus_per_node and world % gpus_per_node:
        problems.append(
            _problem(tier, "tensor_parallel", f"TP x PP = {world} must fill whole nodes of {gpus_per_node} GPUs")
        )
    if plan.max_input_len > plan.max_seq_len:
        problems.append(
            _problem(tier, "triton.max_input_len", f"{plan.max_input_len} exceeds max_model_len {plan.max_seq_len}")
        )
    if plan.fp8_kv and not sku.name.startswith(HOPPER):
        problems.append(_problem(tier, "quantization", f"FP8 needs Hopper (H100/H200), node group has {sku.name}"))
    if tier.quantization not in (None, "fp8", "modelopt"):
        problems.append(_problem(tier, "quantization", f"{tier.quantization!r} is not supported by the Triton tier"))
    if settings.mode == "engine" and not release.convert_script:
        problems.append(_problem(tier, "triton.versions", "engine mode needs a convert_script in the pins"))
    elif settings.mode == "engine" and not plan.fp8 and plan.convert_script is None:
        known = ", ".join(sorted({f for _, f in MODEL_FAMILIES}))
        problems.append(_problem(tier, "triton.model_family", f"cannot tell which TensorRT-LLM example converts "
                                 f"{plan.model_id!r}; set it (one of {known} or another examples/models/core dir)"))
    if not release.image_digest:
        problems.append(
            _problem(
                tier,
                "triton.versions.image_digest",
                f"{release.image} is not pinned by digest (the tier's triton.versions.image_digest, or "
                f"lines.{settings.mode}.image_digest in the inventory's triton_versions.yml); refusing to deploy it",
            )
        )
    if settings.openai_frontend and settings.frontend == "triton" and tier.port in (
        settings.http_port, settings.grpc_port, settings.metrics_port,
    ):
        problems.append(_problem(tier, "port", f"{tier.port} collides with a Triton port"))
    if problems:
        raise InvalidInput([f"{source}: {p}" for p in problems])
    return plan
