"""Pinned Triton / TensorRT-LLM release lines (gridready/data/triton_versions.yml), a site's pins and per-tier
overrides.

A site records the images it deploys in its inventory: `<inventory>/triton_versions.yml` (optional) replaces
keys of the pins for every tier, e.g. the digests of the images it mirrored or verified, or a mirror's image name:

    lines:
      engine: {image_digest: "sha256:..."}     # any key of a tier's triton.versions
      llmapi: {image: registry.example.com/nvidia/tritonserver:25.12-trtllm-python-py3, image_digest: "sha256:..."}
    fixed_cost: {image_digest: "sha256:..."}

A tier's own `triton.versions` goes over the site's pins.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from gridready.spec.triton import SitePins, VersionOverride


def image_ref(image: str, digest: str | None) -> str:
    """`image@sha256:...` when pinned, else the tag (which the plans refuse to deploy)."""
    base = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{base}@{digest}" if digest else image


class ReleaseLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    triton: str
    tensorrt_llm: str
    tensorrt: str
    cuda: str | None
    image: str
    image_digest: str | None
    templates_dir: str
    convert_script: str | None
    quantize_script: str | None
    openai_frontend: str

    @property
    def image_ref(self) -> str:
        return image_ref(self.image, self.image_digest)


@cache
def _pins() -> dict[str, Any]:
    return yaml.safe_load((Path(__file__).resolve().parents[2] / "data" / "triton_versions.yml").read_text())


def pins() -> dict[str, Any]:
    """The pins file as read (gridready/data/triton_versions.yml)."""
    return _pins()


@cache
def _lines() -> dict[str, ReleaseLine]:
    return {mode: ReleaseLine(**vals) for mode, vals in _pins()["lines"].items()}


def _changes(override: BaseModel | None) -> dict[str, Any]:
    return {k: v for k, v in override.model_dump().items() if v is not None} if override is not None else {}


def release_line(mode: Literal["llmapi", "engine"], override: VersionOverride | None = None,
                 site: SitePins | None = None) -> ReleaseLine:
    line = _lines()[mode]
    changes = {**_changes(site.lines.get(mode) if site else None), **_changes(override)}
    return line.model_copy(update=changes) if changes else line


class FixedCostPin(BaseModel):
    """The plain Triton image of fixed-cost tiers (triton_versions.yml `fixed_cost`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    triton: str
    tensorrt: str
    image: str
    image_digest: str | None

    @property
    def image_ref(self) -> str:
        return image_ref(self.image, self.image_digest)


def fixed_cost_pin(site: SitePins | None = None) -> FixedCostPin:
    return FixedCostPin(**{**_pins()["fixed_cost"], **_changes(site.fixed_cost if site else None)})
