"""Llama-3.1-8B-like and Llama-3.3-70B-like Triton tiers on HGX H200 (8 GPUs per node)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from gridready import catalog
from gridready.serving.triton import make_plan
from gridready.serving.triton.plan import TritonPlan
from gridready.spec.parallel import Parallelism
from gridready.spec.serving import Tier
from gridready.spec.triton import SitePins, TritonSettings

H200 = catalog.lookup("h200")
MODELS = {
    "8b": ("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f2"),
    "70b": ("meta-llama/Llama-3.3-70B-Instruct", "6f6073b4"),
}
# (model, TP, PP): the acceptance matrix of issue 8
MATRIX = [("8b", 1, 1), ("8b", 8, 1), ("70b", 8, 1), ("70b", 8, 2)]


def tier(size: str = "8b", tp: int = 1, pp: int = 1, **over: Any) -> Tier:
    hf_id, rev = MODELS[size]
    data: dict[str, Any] = {
        "name": f"trt-{size}", "engine": "triton-trtllm", "served_name": f"llama-{size}",
        "model": {"hf_id": hf_id, "revision": rev}, "tensor_parallel": tp, "pipeline_parallel": pp, "port": 9000,
    }
    data.update(over)
    return Tier(**data)


# a site's pins (the inventory's triton_versions.yml): the digests it verified for both release lines
SITE_DIGEST = "sha256:" + "5e" * 32
SITE = SitePins(lines={"engine": {"image_digest": SITE_DIGEST}, "llmapi": {"image_digest": SITE_DIGEST}})


def plan(size: str = "8b", tp: int = 1, pp: int = 1, *, site_pins: SitePins | None = SITE,
         tier_over: dict | None = None, **settings: Any) -> TritonPlan:
    return make_plan(tier(size, tp, pp, **(tier_over or {})), TritonSettings(**settings), sku=H200,
                     parallel=Parallelism(tp, pp, 8), site_pins=site_pins)


def image_tools(tmp: Path) -> Path:
    """The sandbox's SIMULATED TensorRT-LLM image unpacked under `tmp` (its /app and /opt/tritonserver), for
    running a generated build script outside a container: see run_in_image."""
    from sandbox import images

    root = tmp / "image"
    if not root.exists():
        ref = next(r for r, trtllm in images.references().items() if trtllm)
        layer = images.build()[ref]["layer"]
        with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
            tar.extractall(root, filter="tar")
        for f in root.rglob("*"):  # the wrappers import the image's tools from their absolute path
            if f.is_file() and f.stat().st_mode & 0o100:
                f.write_text(f.read_text().replace(repr(images.LIB), repr(f"{root}{images.LIB}")))
    return root


def run_in_image(script: str, tmp: Path, weights: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a build script as the image would (its tools on PATH, /app from the image, the weights at /models/hf):
    the image's absolute paths are mapped under `tmp`."""
    root = image_tools(tmp)
    text = script.replace(" /app/", f" {root}/app/")
    if weights is not None:
        text = text.replace("/models/hf/", f"{weights}/")
    f = tmp / "build-in-image.sh"
    f.write_text(text)
    env = {**os.environ, "PATH": f"{root}/opt/tritonserver/bin:{os.environ['PATH']}",
           "GRIDREADY_SIM_PROFILE": str(tmp / "no-profile.json")}
    return subprocess.run(["bash", str(f)], capture_output=True, text=True, env=env, check=False)

