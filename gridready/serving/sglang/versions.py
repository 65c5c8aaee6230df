"""The pinned SGLang release (gridready/data/sglang_versions.yml), overridable per tier."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict


class SglangPin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    pip_spec: str
    image: str
    module: str
    default_port: int


@cache
def _pin() -> SglangPin:
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "data" / "sglang_versions.yml").read_text())
    return SglangPin(**raw["sglang"])


def pin(override: str | None = None) -> SglangPin:
    """The pinned release, or the tier's `sglang.version` override."""
    base = _pin()
    if override is None:
        return base
    return base.model_copy(update={"version": override, "pip_spec": f"sglang=={override}",
                                   "image": f"lmsysorg/sglang:v{override}"})
