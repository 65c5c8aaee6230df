"""KubeRay's `ray.io/initializing-timeout` of a vLLM tier, from the model's size.

The operator marks a RayService Failed for good (condition Ready, reason InitializingTimeout, KubeRay v1.7.0) when
its Serve applications are not running within that time, and never retries it. A first start downloads the
weights into the node's empty cache, so the budget is the download at the stated Hub bandwidth
(serving.kubernetes.hub_bandwidth_mbps) with a 1.5x allowance, plus the load from local disk, plus a fixed part
for the image pull, the Ray cluster's start and vLLM's warm-up (torch.compile, CUDA graphs).

The size is model.weights_gb where stated, else the parameter count in the repository's name (70B, 8x7B, 1.5B)
at 2 bytes a parameter (bf16 checkpoints), else that of a 70B model.
"""

from __future__ import annotations

import math
import re

from gridready.spec.serving import ModelSource

BYTES_PER_PARAM = 2.0  # bf16 / fp16 checkpoints
UNKNOWN_PARAMS_B = 70.0
DOWNLOAD_ALLOWANCE = 1.5  # Hub throughput varies; a resumed download repeats part of a file
LOAD_GBPS = 2.0  # safetensors from a local NVMe into host memory and on to the GPUs, per node
FIXED_S = 600  # image pull (the ray-llm image is ~10 GB), Ray cluster start, vLLM warm-up
FLOOR_MIN = 30  # KubeRay's documented example; never shorter
_PARAMS = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


def weights_gb(model: ModelSource) -> float:
    if model.weights_gb is not None:
        return float(model.weights_gb)
    name = (model.hf_id or model.local_path or "").rsplit("/", 1)[-1]
    match = _PARAMS.search(name)
    params_b = UNKNOWN_PARAMS_B
    if match:
        params_b = float(match.group(2)) * (int(match.group(1)) if match.group(1) else 1)
    return params_b * BYTES_PER_PARAM


def initializing_timeout_s(model: ModelSource, bandwidth_mbps: int) -> int:
    size = weights_gb(model)
    download = 0.0 if model.hf_id is None else size * 8000 / bandwidth_mbps * DOWNLOAD_ALLOWANCE
    return int(download + size / LOAD_GBPS + FIXED_S)


def initializing_timeout(model: ModelSource, bandwidth_mbps: int) -> str:
    """The annotation's value in whole minutes, at least FLOOR_MIN."""
    return f"{max(FLOOR_MIN, math.ceil(initializing_timeout_s(model, bandwidth_mbps) / 60))}m"
