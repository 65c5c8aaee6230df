"""The rolling provision on a real sandbox fleet (3 hosts serving ONE vLLM tier, a replica per node, behind the LiteLLM
router on a router host of its own, node4, outside the node groups): the driver pin bumped while the fleet serves,
`provision --batch 1` rolls node1 (drained, upgraded, rebooted, re-certified, returned), then node2, whose
re-certification fails (a GPU link downtrained at runtime: sandbox.testfleet.Fleet.set_faults): the roll stops there
with exit 3 naming node2, node2 stays drained, node3 is never touched, node4 (the router host) neither, and the
router keeps answering from node1 and node3."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from gridready import vault
from tests.e2e.test_fleet_lifecycle import READ_ROUTER_CONFIG, _answers, upstream_count
from tests.e2e.test_pipeline import _invoke

# extended: a fleet of its own for provision, certify, serve and a roll with reboots (over 15 min on the shared
# 2-core machine: bring-up, provision, certify and serve alone took 11 min there)
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]

PREVIOUS, CURRENT = "580.95.05", "580.159.04"  # sandbox/sim/versions.json: driver_previous, driver


def shape(inventory: Path, replicas: int, driver: str) -> None:
    """The generated inventory (a copy of inventories/sandbox's, router on): the vLLM tier alone, one replica of
    tensor_parallel 8 per node; the driver pinned to `driver`; reboots allowed (the reference inventory's)."""
    path = inventory / "cluster.yml"
    spec = yaml.safe_load(path.read_text())
    vllm = next(t for t in spec["serving"]["tiers"] if t["engine"] == "vllm")
    vllm.update(replicas=replicas, tensor_parallel=8)
    spec["serving"]["tiers"] = [vllm]
    spec["serving"]["router"].pop("routes", None)
    spec["software"]["driver_version"] = driver
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    (inventory / "group_vars" / "all" / "reboot.yml").write_text("gridready_nvidia_driver_reboot: allowed\n")


def pin(inventory: Path, driver: str) -> None:
    path = inventory / "cluster.yml"
    spec = yaml.safe_load(path.read_text())
    spec["software"]["driver_version"] = driver
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def router_host(inventory: Path, host: str, tier_routers: bool) -> None:
    """`host` out of the node groups into an inventory group `routers`, named in serving.router.hosts; the tier
    routers on or off."""
    path = inventory / "hosts.yml"
    doc = yaml.safe_load(path.read_text())
    groups = doc["all"]["children"]
    for body in list(groups.values()):
        moved = (body.get("hosts") or {}).pop(host, None)
        if moved is not None:
            groups["routers"] = {"hosts": {host: moved}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    set_router(inventory, hosts=[host], tier_routers=tier_routers)


def set_router(inventory: Path, *, hosts: list[str], tier_routers: bool) -> None:
    path = inventory / "cluster.yml"
    spec = yaml.safe_load(path.read_text())
    spec["serving"]["router"]["hosts"] = hosts
    spec["serving"]["router"]["tier_routers"] = {"enabled": tier_routers}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def test_a_roll_whose_second_batch_fails_stops_there(make_module_fleet, tmp_path_factory):
    t0 = time.monotonic()
    fleet = make_module_fleet(4, healthy=True)
    shape(fleet.inventory, 3, PREVIOUS)
    router_host(fleet.inventory, "node4", tier_routers=False)
    artifacts = tmp_path_factory.mktemp("artifacts")
    first = _invoke(fleet.inventory, artifacts, "provision", "certify", "serve")
    assert first.returncode == 0, first.stderr[-4000:]
    served_at = time.monotonic() - t0

    pin(fleet.inventory, CURRENT)
    fleet.set_faults("node2", [{"kind": "pcie_downtrained", "gpu": 3}])
    rolled = _invoke(fleet.inventory, artifacts, "provision", "--batch", "1")
    assert rolled.returncode == 3, rolled.stderr[-4000:]
    assert "node2 failed at certifying: re-certification" in rolled.stderr, rolled.stderr[-4000:]
    assert "pcie_link" in rolled.stderr

    out = _invoke(fleet.inventory, artifacts, "status", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert {n: r["drained"] for n, r in rows.items()} == {"node1": False, "node2": True, "node3": False}
    assert rows["node1"]["verdict"] == "certified" and rows["node2"]["verdict"] == "quarantined"
    roll = doc["roll"]
    assert roll["status"] == "stopped" and roll["batches"] == [["node1"], ["node2"], ["node3"]]
    assert {n: r["step"] for n, r in roll["nodes"].items()} == {"node1": "done", "node2": "failed",
                                                                 "node3": "pending"}
    assert roll["nodes"]["node1"]["rebooted"] and roll["nodes"]["node1"]["gates"] == []

    # node3 never touched: still the old driver; node1 the new one
    query = "nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1"
    versions = {n: fleet.ssh(n, query, check=False).stdout.strip() for n in ("node1", "node2", "node3")}
    assert versions["node1"] == CURRENT and versions["node3"] == PREVIOUS, versions

    # the router, on node4 alone, sends to node1 and node3 only, and answers
    reads = {n: fleet.ssh(n, READ_ROUTER_CONFIG, check=False) for n in fleet.names}
    assert [n for n, r in reads.items() if r.returncode == 0] == ["node4"]
    cfg = reads["node4"].stdout
    count = {n: upstream_count(cfg, fleet.addresses[n]) for n in ("node1", "node2", "node3")}
    assert count["node2"] == 0 and count["node1"] >= 1 and count["node3"] >= 1, count
    summary = json.loads(max(artifacts.glob("*/*/serve/summary.json"), key=lambda p: p.stat().st_mtime).read_text())
    (model,) = summary["data"]["router"]["routes"]
    key = vault.read(fleet.name, fleet.inventory)["vault_gridready_router_key_sandbox"]
    assert _answers(summary["data"]["router"]["url"], key, model) == [200] * 6
    print(f"served after {served_at:.0f} s; rolled and checked after {time.monotonic() - t0:.0f} s")
