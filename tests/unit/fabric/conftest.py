"""Shared helpers of the fabric unit tests: fixture paths and a NodeGroup factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready.spec import NodeGroup

PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"


def group(nics: list[tuple[str, str, int]], rails: bool = False, gpus: int = 8) -> NodeGroup:
    return NodeGroup.model_validate({
        "name": "g", "sku": "h100", "gpus_per_node": gpus,
        "nics": [{"name": n, "kind": k, "rate_gbps": r, **({"rail": i} if rails else {})}
                 for i, (n, k, r) in enumerate(nics)],
    })


@pytest.fixture
def public() -> Path:
    return PUBLIC
