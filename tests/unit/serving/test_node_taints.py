"""Quarantine adds and re-certification removes only gridready's own taint (issue #29, finding 15).

Node.spec.taints is atomic under server-side apply: the platform stack used to apply [quarantine taint] with force,
replacing the GPU pool's taint, and on re-certification stopped applying the list, which deleted every taint. It
now reads the live node and applies its taints with only gridready's own added or taken out."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import pulumi as gpulumi
from gridready.serving import topology
from gridready.stacks.platform.program import merged_taints
from gridready.stages import serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

POOL = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
OURS = {"key": "gridready.io/quarantined", "value": "true", "effect": "NoSchedule"}


def test_merge_keeps_every_other_taint() -> None:
    assert merged_taints([POOL], quarantined=True) == [POOL, OURS]
    assert merged_taints([POOL, OURS], quarantined=True) == [POOL, OURS]  # idempotent
    assert merged_taints([POOL, OURS], quarantined=False) == [POOL]  # re-certified: only ours goes
    assert merged_taints([], quarantined=False) == []


@pytest.fixture
def live_pool_taint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster as Pulumi reads it: every GPU node carries the pool's taint, gpu03 also gridready's."""
    original = gpulumi._Recorder.new_resource

    def new_resource(self: Any, args: Any) -> tuple[str, dict[str, Any]]:
        if args.typ == "kubernetes:core/v1:Node" and args.resource_id:
            taints = [POOL, OURS] if args.resource_id in ("gpu03", "gpu04") else [POOL]
            return args.resource_id, {"spec": {"taints": taints}}
        return original(self, args)

    monkeypatch.setattr(gpulumi._Recorder, "new_resource", new_resource)


def test_the_platform_patch_adds_and_removes_only_gridreadys_taint(make_inv, live_pool_taint) -> None:
    inv = make_inv(4, [vllm_tier()], target="kubernetes")
    # gpu03 stays quarantined, gpu04 (quarantined before) passes again
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu04"], ["gpu03"]))
    cfg = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["platform"]
    nodes = {d["metadata"]["name"]: d for d in gpulumi.render("platform", cfg, "acme").manifests
             if d["kind"] == "Node"}
    assert nodes["gpu01"]["spec"]["taints"] == [POOL]
    assert nodes["gpu03"]["spec"]["taints"] == [POOL, OURS]
    assert nodes["gpu04"]["spec"]["taints"] == [POOL]
