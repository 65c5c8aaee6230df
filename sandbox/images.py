"""The sandbox's container registry: SIMULATED Triton images under their real references, served as static files
in the Registry HTTP API V2 layout (https://distribution.github.io/distribution/spec/api/: GET
/v2/<name>/manifests/<reference>, GET /v2/<name>/blobs/<digest>) at http://10.77.0.1:8088/v2/<registry>/<repo>/.

Each image is one reproducible layer (fixed mtimes, sorted members) plus an OCI image config and manifest; the
manifest's digest is the sha256 of its bytes, so it changes with the image's content (the simulated engine, the
tools). The references are the pins of gridready/data/triton_versions.yml (the TensorRT-LLM line's image and the
fixed-cost image). `digests()` names the digest of each reference: the sandbox writes them into its inventory's
pins (sandbox/fleet.py prepare_inventory) as a customer records the digests of the images they mirror.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from functools import cache
from pathlib import Path

from gridready.serving.triton import versions as triton_versions
from sandbox import packages

HERE = Path(__file__).resolve().parent
LIB = "/opt/tritonserver/lib/gridready-sim"
EPOCH = packages.EPOCH
OPTIONS = HERE / "data" / "tritonserver-options.txt"  # = tests/fixtures/public/tritonserver/options.txt
ENV_PATH = "PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# TensorRT-LLM examples/models/core/<family>/convert_checkpoint.py (gridready/serving/triton/plan.MODEL_FAMILIES)
FAMILIES = ("llama", "qwen", "gemma", "phi")
TEMPLATE_MODELS = {"inflight_batcher_llm": ("preprocessing", "postprocessing", "tensorrt_llm_bls", "tensorrt_llm",
                                            "ensemble"), "llmapi": ("tensorrt_llm",)}


def _wrapper(tool: str) -> bytes:
    return (f"#!/usr/bin/python3\n# gridready-sim: SIMULATED {tool} (sandbox image, {LIB}/image_tools.py)\n"
            f"import sys\nsys.path.insert(0, {LIB!r})\nfrom image_tools import main\n"
            f"sys.exit(main({Path(tool).name!r}, sys.argv[1:]))\n").encode()


def _files(trtllm: bool) -> dict[str, tuple[bytes, int]]:
    """path in the image -> (content, mode)."""
    files: dict[str, tuple[bytes, int]] = {}
    for f in sorted((HERE / "engine").glob("*.py")):
        files[f"{LIB}/engine/{f.name}"] = (f.read_bytes(), 0o644)
    files[f"{LIB}/image_tools.py"] = ((HERE / "image_tools.py").read_bytes(), 0o644)
    files[f"{LIB}/tritonserver-options.txt"] = (OPTIONS.read_bytes(), 0o644)
    files["/opt/tritonserver/bin/tritonserver"] = (_wrapper("tritonserver"), 0o755)
    files["/opt/tritonserver/README.gridready-sim"] = (b"SIMULATED Triton image of gridready's sandbox "
                                                      b"(sandbox/images.py): no NVIDIA software inside.\n", 0o644)
    if trtllm:
        for tool in ("trtllm-build", "trtllm-serve", "trtllm-llmapi-launch"):
            files[f"/opt/tritonserver/bin/{tool}"] = (_wrapper(tool), 0o755)
        files["/opt/tritonserver/python/openai/openai_frontend/main.py"] = (_wrapper("main.py"), 0o755)
        for kind, models in TEMPLATE_MODELS.items():
            for m in models:
                files[f"/app/all_models/{kind}/{m}/1/model.py"] = (
                    f"# SIMULATED {kind}/{m} python model of the sandbox image\n".encode(), 0o644)
        for fam in FAMILIES:
            files[f"/app/examples/models/core/{fam}/convert_checkpoint.py"] = (_wrapper("convert_checkpoint.py"),
                                                                               0o755)
        files["/app/examples/quantization/quantize.py"] = (_wrapper("quantize.py"), 0o755)
    return files


def _layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    dirs = sorted({str(Path(p).parents[i]) for p in files for i in range(len(Path(p).parents) - 1)})
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for d in dirs:
            info = tarfile.TarInfo(d.lstrip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            tar.addfile(info)
        for path, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime, info.uname, info.gname = len(data), mode, EPOCH, "root", "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(buf.getvalue())
    return out.getvalue()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def references() -> dict[str, bool]:
    """The image references of the Triton pins -> whether the image carries TensorRT-LLM."""
    pins = triton_versions.pins()
    refs = {line["image"]: True for line in pins["lines"].values()}
    refs[pins["fixed_cost"]["image"]] = False
    return refs


@cache
def build() -> dict[str, dict[str, bytes]]:
    """reference -> {"manifest": bytes, "config": bytes, "layer": bytes}."""
    out = {}
    for ref, trtllm in references().items():
        layer = _layer(_files(trtllm))
        raw = gzip.decompress(layer)
        config = json.dumps({
            "architecture": packages.ARCH, "os": "linux",
            "config": {"Env": [ENV_PATH, "GRIDREADY_SIM_IMAGE=1"], "Cmd": ["/bin/bash"], "WorkingDir": "/"},
            "gridready_sim_paths": ["/opt/tritonserver", "/app"] if trtllm else ["/opt/tritonserver"],
            "rootfs": {"type": "layers", "diff_ids": [_sha(raw)]},
            "history": [{"created_by": "gridready sandbox/images.py (SIMULATED)"}],
        }, sort_keys=True).encode()
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _sha(config),
                       "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _sha(layer),
                        "size": len(layer)}],
            "annotations": {"org.opencontainers.image.description": "SIMULATED by gridready's sandbox"},
        }, sort_keys=True).encode()
        out[ref] = {"manifest": manifest, "config": config, "layer": layer}
    return out


def digests() -> dict[str, str]:
    """reference -> the digest of its manifest in the sandbox registry."""
    return {ref: _sha(parts["manifest"]) for ref, parts in build().items()}


def write_registry(www: Path) -> None:
    """The static V2 tree under `www`/v2: manifests by tag and by digest, blobs by digest."""
    for ref, parts in build().items():
        name, tag = ref.rsplit(":", 1)
        base = www / "v2" / name
        (base / "manifests").mkdir(parents=True, exist_ok=True)
        (base / "blobs").mkdir(parents=True, exist_ok=True)
        for key in (tag, _sha(parts["manifest"])):
            (base / "manifests" / key).write_bytes(parts["manifest"])
        for blob in (parts["config"], parts["layer"]):
            (base / "blobs" / _sha(blob)).write_bytes(blob)
