"""Engines as packages: serving/vllm, serving/sglang and serving/triton show the same face (the engines they serve,
the tier sections they read, a renderer per target), and together serve every engine a tier may name, once."""

from __future__ import annotations

import typing

import pytest

from gridready.serving import sglang, triton, vllm
from gridready.spec.serving import Tier

PACKAGES = (vllm, sglang, triton)


def test_every_tier_engine_is_served_by_exactly_one_engine_package() -> None:
    named = typing.get_args(Tier.model_fields["engine"].annotation)
    served = [e for p in PACKAGES for e in p.ENGINES]
    assert sorted(served) == sorted(named)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_each_package_shows_the_same_face(package) -> None:
    assert package.__file__.endswith("__init__.py")
    assert set(package.TIER_SECTIONS) <= set(Tier.model_fields)
    assert set(package.RENDERS) == {"hosts", "kubernetes"} and all(callable(f) for f in package.RENDERS.values())
    assert all(f.__module__ == package.__name__ for f in package.RENDERS.values())
