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
from gridready.stages.serve import config as serve_config
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


def test_a_drained_node_gets_gridreadys_taint_as_noexecute(make_inv, live_pool_taint, tmp_path) -> None:
    """The watcher drained gpu02 (ledger): the platform patch turns gridready's taint into NoExecute there, so the
    serving pods (which tolerate only the pool's taint) leave it; the pool's taint stays; on return it goes."""
    from gridready import ledger
    from gridready.stacks.platform.program import DRAIN_TAINT

    inv = make_inv(4, [vllm_tier()], target="kubernetes")
    path, _ = certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    root = path.parents[1]
    ledger.update(root, inv.customer, lambda b: ledger.drain(b, "gpu02", "xid 48"))
    cert = topology.read_certification(inv, ledger.read(root, inv.customer))
    cfg = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert), root)["platform"]
    assert {n["name"]: (n["certified"], n["drained"]) for n in cfg["nodes"]}["gpu02"] == (False, True)
    nodes = {d["metadata"]["name"]: d for d in gpulumi.render("platform", cfg, "acme").manifests
             if d["kind"] == "Node"}
    assert DRAIN_TAINT == {**OURS, "effect": "NoExecute"}
    assert nodes["gpu02"]["spec"]["taints"] == [POOL, DRAIN_TAINT]
    assert nodes["gpu02"]["metadata"]["labels"]["gridready.io/certified"] == "false"
    assert nodes["gpu01"]["spec"]["taints"] == [POOL]
    assert merged_taints([POOL, DRAIN_TAINT], quarantined=False) == [POOL]  # returned: only ours goes
    assert merged_taints([POOL, OURS], quarantined=True, drained=True) == [POOL, DRAIN_TAINT]


def test_the_watcher_applies_the_drain_through_the_platform_stack(make_inv, monkeypatch, tmp_path) -> None:
    from gridready import ledger
    from gridready.artifacts import RunContext
    from gridready.stages.serve import drain as serve_drain

    inv = make_inv(3, [vllm_tier()], target="kubernetes")
    (inv.path / "kubeconfig.yml").write_text("apiVersion: v1\nkind: Config\n")
    path, _ = certified_ledger(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[1]
    ledger.update(root, inv.customer, lambda b: ledger.drain(b, "gpu03", "dcgm_health memory"))
    ups: list[dict[str, Any]] = []
    monkeypatch.setattr(serve_drain.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_drain.gpulumi, "up", lambda stack, customer, config, secrets, state, **kw: ups.append(
        {"stack": stack, "config": config, "secrets": sorted(secrets)}) or {})
    done = serve_drain.sync_serving(inv, RunContext(customer=inv.customer, run_id="20261202T060000Z-kdrn", root=root))
    assert done["applied"] and done["drained_nodes"] == ["gpu03"]
    (up,) = ups
    assert up["stack"] == "platform" and up["secrets"] == ["kubeconfig"]
    marks = {n["name"]: (n["certified"], n["drained"]) for n in up["config"]["nodes"]}
    assert marks == {"gpu01": (True, False), "gpu02": (True, False), "gpu03": (False, True)}
    monkeypatch.setattr(serve_drain.gpulumi, "cli_available", lambda: False)
    said = serve_drain.sync_serving(inv, RunContext(customer=inv.customer, run_id="20261202T060100Z-kdrn", root=root))
    assert not said["applied"] and "pulumi CLI is not installed" in said["reason"] and len(ups) == 1
