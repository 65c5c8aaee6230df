"""Fixed-cost (non-LLM) Triton models: loading an ONNX Runtime or TensorRT plan model directory as tritonserver does.

A model directory whose config names platform onnxruntime_onnx / backend onnxruntime or platform tensorrt_plan /
backend tensorrt loads as tritonserver loads it (autofill, normalize, validate, with Triton's messages). A loaded
FixedCostModel answers KServe v2 JSON inference (infer_request.py: the request as http_server.cc parses it and
infer_request.cc Normalize checks it) and batches requests as DynamicBatchScheduler::GetDynamicBatch does
(dynamic_batcher.py). One batch execution takes fixed_ms + per_item_us * items on one instance (asyncio.sleep);
instances run batches concurrently.
Cited sources are triton-inference-server/core src/<file> <function> unless another repository is named.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import pbtxt
from .dynamic_batcher import Batcher
from .infer_request import DATATYPES, InferRequest
from .metrics import Metric

PLATFORM_OF = {"tensorrt": "tensorrt_plan", "onnxruntime": "onnxruntime_onnx"}  # constants.h
MODEL_FILE = {"tensorrt": "model.plan", "onnxruntime": "model.onnx"}
# model_config_utils.cc GetBackendType / GetBackendTypeFromPlatform: the backends Triton pairs with platforms
KNOWN_BACKENDS = {"tensorflow": {"tensorflow_graphdef", "tensorflow_savedmodel"}, "tensorrt": {"tensorrt_plan"},
                  "onnxruntime": {"onnxruntime_onnx"}, "pytorch": {"pytorch_libtorch"}}
KINDS = ("KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL")
MIN_COMPUTE_CAPABILITY = 7.5  # triton-inference-server/server CMakeLists.txt TRITON_MIN_COMPUTE_CAPABILITY
_REPEATED = {"input", "output", "dims", "instance_group", "gpus", "preferred_batch_size", "shape", "versions",
             "profile", "model_warmup", "batch_input", "batch_output", "source_input"}
_MAPS = {"parameters", "priority_queue_policy", "cc_model_filenames", "metric_tags", "input_map", "output_map"}


class LoadError(Exception):
    """A model tritonserver refuses; line() is what it logs for it."""

    def __init__(self, model: str, message: str, code: str = "Invalid argument", poll: bool = False) -> None:
        super().__init__(message)
        self.model, self.message, self.code, self.poll = model, message, code, poll

    def line(self) -> str:
        if self.poll:  # model_repository_manager.cc Poll: the config never became a model
            return _glog("model_repository_manager.cc:1509",
                         f"Poll failed for model directory '{self.model}': {self.message}")
        # model_lifecycle.cc CreateModel: "failed to load '<m>' version 1: <Status::AsString()>"
        return _glog("model_lifecycle.cc:654", f"failed to load '{self.model}' version 1: {self.code}: {self.message}")


def _glog(where: str, msg: str) -> str:
    now = time.time()  # Triton's log prefix: E<MMDD> <HH:MM:SS.micros> <pid> <file:line>]
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
    return f"E{stamp}.{int(now % 1 * 1e6):06d} {os.getpid()} {where}] {msg}"


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # KServe protocol name: INT64, FP32, BYTES ...
    dims: tuple[int, ...]
    optional: bool = False


@dataclass(frozen=True)
class Batching:
    preferred: tuple[int, ...]
    delay_us: int
    max_queue_size: int


@dataclass(frozen=True)
class Instance:
    group: str
    kind: str
    gpu: int | None


@dataclass(frozen=True)
class Timing:
    fixed_ms: float = 2.5  # the CLI defaults (cli.py), measured on an H200
    per_item_us: float = 30.0
    throttle: float = 1.0  # hardware.THROTTLE_FACTOR on a throttled GPU

    def exec_s(self, items: int) -> float:
        return (self.fixed_ms + self.per_item_us * items / 1000.0) * self.throttle / 1000.0


def is_fixed_cost(cfg: pbtxt.Message, version_dir: Path) -> bool:
    """Would Triton's autofill give this config the onnxruntime or tensorrt backend (or a pair it rejects)?"""
    platform, backend = str(pbtxt.first(cfg, "platform", "")), str(pbtxt.first(cfg, "backend", ""))
    return backend in PLATFORM_OF or bool(_autofill_backend(cfg, version_dir)) or (
        platform in PLATFORM_OF.values() and backend in KNOWN_BACKENDS)


def _autofill_backend(cfg: pbtxt.Message, vdir: Path) -> str:
    """model_config_utils.cc AutoCompleteBackendFields: TensorRT is tried before ONNX Runtime."""
    platform, fname = str(pbtxt.first(cfg, "platform", "")), str(pbtxt.first(cfg, "default_model_filename", ""))
    if pbtxt.first(cfg, "backend", ""):
        return ""
    for backend in ("tensorrt", "onnxruntime"):
        if platform == PLATFORM_OF[backend] or fname == MODEL_FILE[backend]:
            return backend
        if not platform and not fname and (vdir / MODEL_FILE[backend]).exists():
            return backend
    return ""


def _to_json(msg: pbtxt.Message) -> dict[str, Any]:
    """Triton's model_configuration JSON (ModelConfigToJson): repeated fields as lists, maps as objects."""
    out: dict[str, Any] = {}
    for key, vals in msg.items():
        if key in _MAPS:
            out[key] = {str(pbtxt.first(e, "key", "")): _plain(pbtxt.first(e, "value")) for e in vals
                        if isinstance(e, dict)}
        elif key in _REPEATED:
            out[key] = [_plain(v) for v in vals]
        elif vals:
            out[key] = _plain(vals[-1])
    return out


def _plain(v: Any) -> Any:
    return _to_json(v) if isinstance(v, dict) else v


def _typed(cfg: pbtxt.Message, path: Path, name: str) -> None:
    """What protobuf's text parser rejects (filesystem/api.cc ReadTextProto: 'failed to read text proto')."""
    ints = [cfg.get("max_batch_size", [])]
    enums: list[tuple[list[Any], Sequence[str]]] = []
    for io in pbtxt.values(cfg, "input") + pbtxt.values(cfg, "output"):
        ints.append(io.get("dims", []) if isinstance(io, dict) else [None])
        enums.append((io.get("data_type", []) if isinstance(io, dict) else [None], tuple(DATATYPES)))
    for g in pbtxt.values(cfg, "instance_group"):
        ints += [g.get("count", []), g.get("gpus", [])] if isinstance(g, dict) else [[None]]
        enums.append((g.get("kind", []) if isinstance(g, dict) else [], KINDS))
    db = pbtxt.sub(cfg, "dynamic_batching")
    ints += [db.get("preferred_batch_size", []), db.get("max_queue_delay_microseconds", []),
             pbtxt.sub(db, "default_queue_policy").get("max_queue_size", [])]
    bad = any(not isinstance(v, int) or isinstance(v, bool) for vals in ints for v in vals)
    bad = bad or any(v not in allowed for vals, allowed in enums for v in vals)
    if bad or not isinstance(pbtxt.first(cfg, "name", ""), str):
        raise LoadError(name, f"failed to read text proto from {path}", "Internal", poll=True)


class FixedCostModel:
    """One loaded model: its normalized config, instances, dynamic batcher and counters."""

    def __init__(self, model_dir: Path, gpus: int, timing: Timing | None = None) -> None:
        self.dir, self.timing = model_dir, timing or Timing()
        cfg_path = model_dir / "config.pbtxt"
        try:
            cfg = pbtxt.parse(cfg_path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            raise LoadError(model_dir.name, f"failed to read text proto from {cfg_path}", "Internal",
                            poll=True) from None
        _typed(cfg, cfg_path, model_dir.name)
        self.cfg = cfg
        self._poll(cfg)
        self._load(cfg, gpus)
        self.metrics: dict[str, Metric] = {}
        self.batcher = Batcher(self)
        self.requests = self.executions = self.inferences = 0
        self.batch_sizes: deque[int] = deque(maxlen=1000)

    # -- load: poll stage (ModelRepositoryManager::InitializeModelInfo) ------------------------------------------
    def _poll(self, cfg: pbtxt.Message) -> None:
        vdir = self.dir / "1"
        self.name = str(pbtxt.first(cfg, "name", "")) or self.dir.name  # AutoCompleteBackendFields: name from dir
        self.backend = str(pbtxt.first(cfg, "backend", "")) or _autofill_backend(cfg, vdir)
        self.platform = str(pbtxt.first(cfg, "platform", ""))
        self.filename = str(pbtxt.first(cfg, "default_model_filename", ""))
        if self.backend in PLATFORM_OF:
            self.platform = self.platform or PLATFORM_OF[self.backend]
            self.filename = self.filename or MODEL_FILE[self.backend]
        self.max_batch_size = int(pbtxt.first(cfg, "max_batch_size", 0))
        db = pbtxt.sub(cfg, "dynamic_batching")
        self.batching: Batching | None = None
        if pbtxt.has(cfg, "dynamic_batching"):
            pref = [int(p) for p in pbtxt.values(db, "preferred_batch_size")]
            if not pref and self.max_batch_size > 0:  # NormalizeModelConfig: preferred defaults to max_batch_size
                pref = [self.max_batch_size]
            self.batching = Batching(tuple(pref), int(pbtxt.first(db, "max_queue_delay_microseconds", 0)),
                                     int(pbtxt.first(pbtxt.sub(db, "default_queue_policy"), "max_queue_size", 0)))
        err = self._validate()
        if err:
            raise LoadError(self.dir.name, err, poll=True)

    def _validate(self) -> str:
        """model_config_utils.cc ValidateModelConfig, then the directory-name rule of InitializeModelInfo."""
        known = KNOWN_BACKENDS.get(self.backend)
        if known is not None and self.platform not in known:
            return f"unexpected 'platform' and 'backend' pair, got:{self.platform}, {self.backend}"
        if self.max_batch_size < 0:
            return f"'max_batch_size' must be non-negative value for {self.name}"
        for size in self.batching.preferred if self.batching else ():
            if size <= 0:
                return f"dynamic batching preferred size must be positive for {self.name}"
            if size > self.max_batch_size:
                return f"dynamic batching preferred size must be <= max batch size for {self.name}"
        if self.name != self.dir.name:  # model_repository_manager.cc InitializeModelInfo
            return (f"unexpected directory name '{self.dir.name}' for model '{self.name}', directory name must "
                    "equal model name")
        return ""

    # -- load: model stage (TritonModel::Create, then the backend, then Model::Init) -----------------------------
    def _load(self, cfg: pbtxt.Message, gpus: int) -> None:
        self.groups = self._instance_groups(cfg, list(range(gpus)))
        self.instances = [Instance(g["name"], g["kind"], gpu) for g in self.groups
                          for gpu in (g["gpus"] if g["kind"] == "KIND_GPU" else [None]) for _ in range(g["count"])]
        path = self.dir / "1" / self.filename
        if self.backend == "onnxruntime" and not path.exists():
            # onnxruntime_backend src/onnxruntime.cc LoadModel -> backend_common.cc IsDirectory (stat)
            raise LoadError(self.name, f"failed to stat file {path}", "Internal")
        if self.backend == "tensorrt" and not path.is_file():
            if any(i.kind == "KIND_GPU" for i in self.instances):  # tensorrt_backend model_state.cc AutoComplete
                raise LoadError(self.name, f"unable to load plan file to auto complete config: {path}", "Internal")
            raise LoadError(self.name, f"unable to find '{path}' for model instance '{self.groups[0]['name']}'",
                            "Unavailable")  # tensorrt_backend instance_state.cc Create
        self.inputs = self._tensors(cfg, "input")
        self.outputs = self._tensors(cfg, "output")

    def _instance_groups(self, cfg: pbtxt.Message, supported: list[int]) -> list[dict[str, Any]]:
        """model_config_utils.cc NormalizeInstanceGroup and ValidateInstanceGroup."""
        given = [g for g in pbtxt.values(cfg, "instance_group") if isinstance(g, dict)]
        groups: list[dict[str, Any]] = []
        for i, g in enumerate(given or [{}]):
            kind, gids = str(pbtxt.first(g, "kind", "KIND_AUTO")), [int(x) for x in pbtxt.values(g, "gpus")]
            if kind == "KIND_AUTO":  # no GPUs, or a listed GPU missing: KIND_CPU
                kind = "KIND_CPU" if not supported or any(x not in supported for x in gids) else "KIND_GPU"
            count = int(pbtxt.first(g, "count", 0))
            if count < 1:  # SetDefaultInstanceCount: 2 CPU instances for onnxruntime, else 1
                count = 2 if kind == "KIND_CPU" and self.backend == "onnxruntime" else 1
            if kind == "KIND_GPU" and not gids:
                gids = list(supported)
            name = str(pbtxt.first(g, "name", "")) or (f"{self.name}_{i}" if given else self.name)
            groups.append({"name": name, "kind": kind, "count": count, "gpus": gids})
        for g in groups:
            where = f"instance group {g['name']} of model {self.name}"
            if g["kind"] in ("KIND_CPU", "KIND_MODEL") and g["gpus"]:
                raise LoadError(self.name, f"{where} has kind {g['kind']} but specifies one or more GPUs")
            if g["kind"] == "KIND_GPU" and not g["gpus"]:
                raise LoadError(self.name, f"{where} has kind KIND_GPU but no GPUs are available")
            for gid in g["gpus"] if g["kind"] == "KIND_GPU" else []:
                if gid not in supported:
                    raise LoadError(self.name, f"{where} specifies invalid or unsupported gpu id {gid}. GPUs with at "
                                    "least the minimum required CUDA compute compatibility of "
                                    f"{MIN_COMPUTE_CAPABILITY:f} are: {', '.join(map(str, supported))}")
        return groups

    def _tensors(self, cfg: pbtxt.Message, kind: str) -> list[Tensor]:
        """model_config_utils.cc ValidateModelIOConfig -> ValidateIOShape (" for <model>" appended)."""
        out: list[Tensor] = []
        for io in pbtxt.values(cfg, kind):
            name, dtype, dims = str(pbtxt.first(io, "name", "")), pbtxt.first(io, "data_type"), pbtxt.values(io, "dims")
            prefix = f"model {kind} '{name}' "
            err = "" if name else f"model {kind} must specify 'name'"
            err = err or ("" if dtype else prefix + "must specify 'data_type'")
            err = err or ("" if dims else prefix + "must specify 'dims'")
            if not err and any(d < 1 and d != -1 for d in dims):
                err = prefix + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
            if err:
                raise LoadError(self.name, f"{err} for {self.name}")
            out.append(Tensor(name, DATATYPES[str(dtype)], tuple(dims), bool(pbtxt.first(io, "optional", False))))
        if not out:  # SIMULATOR LIMIT: Triton would auto-complete inputs/outputs from the model file itself
            raise LoadError(self.name, f"SIMULATED Triton: the config of {self.name} lists no {kind}; the simulator "
                            "cannot auto-complete it from the model file")
        return out

    # -- the KServe v2 views ---------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """KServe v2 model metadata; a batching model's shapes start with the -1 batch dimension."""
        lead = [-1] if self.max_batch_size > 0 else []
        return {"name": self.name, "versions": ["1"], "platform": self.platform,
                "inputs": [{"name": t.name, "datatype": t.datatype, "shape": lead + list(t.dims)} for t in self.inputs],
                "outputs": [{"name": t.name, "datatype": t.datatype, "shape": lead + list(t.dims)}
                            for t in self.outputs]}

    def config_json(self) -> dict[str, Any]:
        """The normalized config as Triton's model_configuration extension returns it (ModelConfigToJson)."""
        out = _to_json(self.cfg)
        out.update(name=self.name, platform=self.platform, backend=self.backend, max_batch_size=self.max_batch_size,
                   default_model_filename=self.filename,
                   instance_group=[{**_to_json(g), **grp} for g, grp in
                                   zip(pbtxt.values(self.cfg, "instance_group") or [{}], self.groups, strict=True)])
        out.setdefault("version_policy", {"latest": {"num_versions": 1}})  # NormalizeModelConfig
        if self.batching:
            out["dynamic_batching"] = {**out.get("dynamic_batching", {}),
                                       "preferred_batch_size": list(self.batching.preferred),
                                       "max_queue_delay_microseconds": self.batching.delay_us}
        return out

    def info(self) -> dict[str, Any]:
        """Simulator ground truth for /gridready/info."""
        b = self.batching
        return {"platform": self.platform, "backend": self.backend, "max_batch_size": self.max_batch_size,
                "instances": [{"group": i.group, "kind": i.kind, "gpu": i.gpu} for i in self.instances],
                "instance_count": len(self.instances), "dynamic_batching": b is not None,
                "preferred_batch_size": list(b.preferred) if b else [],
                "max_queue_delay_microseconds": b.delay_us if b else 0, "max_queue_size": b.max_queue_size if b else 0,
                "requests": self.requests, "executions": self.executions, "inferences": self.inferences,
                "batch_sizes": list(self.batch_sizes), "queued": len(self.batcher.queue),
                "exec_ms": {"fixed": self.timing.fixed_ms, "per_item_us": self.timing.per_item_us,
                            "throttle_factor": self.timing.throttle}}

    # -- metrics (the engine's nv_inference_* counters; Triton docs metrics.md) ----------------------------------
    def attach(self, metrics: dict[str, Metric]) -> None:
        """Use the engine's Triton counters; a loaded model's series start at 0 (MetricModelReporter)."""
        self.metrics = metrics
        for m in metrics.values():
            m.inc(self.labels, 0.0)

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        return (("model", self.name), ("version", "1"))

    def inc(self, key: str, amount: float) -> None:
        if key in self.metrics:
            self.metrics[key].inc(self.labels, amount)

    # -- inference -----------------------------------------------------------------------------------------------
    async def infer(self, body: bytes, received: float) -> dict[str, Any]:
        """Validate (http_server.cc ParseJsonTritonIO, then infer_request.cc Normalize), queue, execute, answer."""
        req = InferRequest.parse(self, body)
        job = self.batcher.submit(req)
        start, end = await job.done
        self.requests += 1
        now = time.perf_counter()
        # InferenceRequest::ReportStatistics: per request; compute is its batch's execution
        self.inc("success", 1)
        self.inc("request_us", (now - received) * 1e6)
        self.inc("queue_us", (start - received) * 1e6)
        self.inc("infer_us", (end - start) * 1e6)
        for key in ("input_us", "output_us"):
            self.inc(key, 0.0)
        out: dict[str, Any] = {"model_name": self.name, "model_version": "1"}
        if req.id:
            out["id"] = req.id
        out["outputs"] = [req.output(t) for t in self.outputs if not req.requested or t.name in req.requested]
        return out


def gpu_count(profile: Path | None) -> int:
    """GPUs of the simulated host: the hardware profile's `gpus` (sandbox/profile.py HardwareProfile,
    default 8), 8 without a profile."""
    if profile is None:
        return 8
    try:
        return int(json.loads(profile.read_text()).get("gpus", 8))
    except (OSError, ValueError, AttributeError):
        return 8


def load_repository(repo: Path, names: list[str], gpus: int, timing: Timing
                    ) -> tuple[dict[str, FixedCostModel], list[LoadError]]:
    """The fixed-cost models among names, and the refusals (tritonserver logs each and, with its default
    --exit-on-error, fails: "failed to load all models", model_repository_manager.cc Create)."""
    models: dict[str, FixedCostModel] = {}
    errors: list[LoadError] = []
    for name in names:
        d = repo / name
        try:
            cfg = pbtxt.parse((d / "config.pbtxt").read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            errors.append(LoadError(name, f"failed to read text proto from {d / 'config.pbtxt'}", "Internal",
                                    poll=True))
            continue
        if not is_fixed_cost(cfg, d / "1"):
            continue
        try:
            models[name] = FixedCostModel(d, gpus, timing)
        except LoadError as err:
            errors.append(err)
    return models, errors


def engine_metrics(engine: Any) -> dict[str, Metric]:
    """The Triton-mode counters of core.Engine (Triton docs metrics.md: per model and version)."""
    names = {"success": "m_success", "failure": "m_failure", "count": "m_count", "exec": "m_exec",
             "request_us": "m_req_us", "queue_us": "m_queue_us", "input_us": "m_in_us", "infer_us": "m_infer_us",
             "output_us": "m_out_us", "pending": "m_pending"}
    return {k: getattr(engine, v) for k, v in names.items() if hasattr(engine, v)}
