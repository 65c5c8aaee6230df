"""Pinned Triton / TensorRT-LLM release lines (gridready/data/triton_versions.yml) and per-tier overrides."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from gridready.spec.triton import VersionOverride


def image_ref(image: str, digest: str | None) -> str:
    """`image@sha256:...` when pinned, else the tag (only acceptable when simulated)."""
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
    return yaml.safe_load((Path(__file__).resolve().parent.parent / "data" / "triton_versions.yml").read_text())


@cache
def _lines() -> dict[str, ReleaseLine]:
    return {mode: ReleaseLine(**vals) for mode, vals in _pins()["lines"].items()}


def release_line(mode: Literal["llmapi", "engine"], override: VersionOverride | None = None) -> ReleaseLine:
    line = _lines()[mode]
    if override is None:
        return line
    changes = {k: v for k, v in override.model_dump().items() if v is not None}
    return line.model_copy(update=changes)


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


@cache
def fixed_cost_pin() -> FixedCostPin:
    return FixedCostPin(**_pins()["fixed_cost"])
