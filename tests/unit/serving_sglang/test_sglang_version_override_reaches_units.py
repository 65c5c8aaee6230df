"""A tier's own SGLang version (tier.sglang.version) reaches every unit's version and pip spec, and the pinned
release otherwise; a two-node replica's ranks share rank 0's init address."""

from __future__ import annotations

from gridready.serving import sglang
from gridready.spec import ServingSpec

from .test_launch import _opt, _plan


def test_the_tiers_version_reaches_every_unit(make_inv) -> None:
    _, cert, plan = _plan(make_inv, 2, sglang={"version": "0.5.20"})
    units = sglang.units([plan], cert, ServingSpec(tiers=[plan.tier]))
    assert [(u["node_rank"], u["version"], u["pip_spec"]) for u in units] == [
        (0, "0.5.20", "sglang==0.5.20"), (1, "0.5.20", "sglang==0.5.20")]
    assert {_opt(u["args"], "--dist-init-addr") for u in units} == {"10.77.0.11:50000"}


def test_the_pinned_release_without_an_override(make_inv) -> None:
    _, cert, plan = _plan(make_inv, 1)
    (unit,) = sglang.units([plan], cert, ServingSpec(tiers=[plan.tier]))
    assert (unit["version"], unit["pip_spec"]) == ("0.5.19", "sglang==0.5.19")
    assert "--dist-init-addr" not in unit["args"] and "--nnodes" not in unit["args"]
