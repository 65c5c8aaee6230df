"""`invoke discover --write` on a booted sandbox host: the node group it writes validates and certifies.

The one host is a SIMULATED HGX H100 4-GPU board (no NVSwitch) with four 400G NDR rails; the inventory starts from
the sandbox's own cluster.yml, whose `gpu_nodes` group says 8 x H200 with eight rails: the wrong node group.
`invoke discover --host node1 --write`, on the fresh host (no NVIDIA driver yet: PCI sysfs and /proc/cpuinfo speak),
must replace it with what the host is (SKU from the PCI device id, GPU count, NICs with kind, rate and netdev, OS),
keep the keys discovery does not know (mgmt_interface), and the inventory must
then validate, provision and certify that node, fabric manager n/a for want of an NVSwitch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gridready import catalog
from tests.e2e.test_pipeline import _invoke

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]
HOST = {"sku": "H100-SXM5-80GB", "gpus": 4, "hcas": 4, "faults": []}


def _without_serving(cluster: str) -> str:
    """The sandbox cluster.yml for a single node: no serving tiers (they need 8 GPUs), one certified node."""
    cluster = cluster[:cluster.index("\nserving:")] + "\n"
    return re.sub(r"(?m)^  min_certified_nodes: \d+$", "  min_certified_nodes: 1", cluster)


def _group(inventory: Path) -> dict:
    (group,) = yaml.safe_load((inventory / "cluster.yml").read_text())["node_groups"]
    return group


def test_discover_writes_the_node_group_that_validates_and_certifies(make_fleet, tmp_path_factory):
    fleet = make_fleet(1, {"node1": HOST}, healthy=True)
    cluster = fleet.inventory / "cluster.yml"
    cluster.write_text(_without_serving(cluster.read_text()))
    wrong = _group(fleet.inventory)
    assert (wrong["sku"], wrong["gpus_per_node"], len(wrong["nics"])) == ("H200-SXM-141GB", 8, 8)
    artifacts = tmp_path_factory.mktemp("artifacts")

    found = _invoke(fleet.inventory, artifacts, "discover", "--host", "node1", "--write", "--json")
    assert found.returncode == 0, found.stderr[-4000:]
    summary = json.loads(found.stdout)
    group = _group(fleet.inventory)
    assert summary["data"]["node_group"] == {k: v for k, v in group.items() if k != "mgmt_interface"}
    assert group["name"] == "gpu_nodes" and group["mgmt_interface"] == "eth0"  # a key discovery does not read
    assert (group["sku"], group["gpus_per_node"], group["platform"], group["os"]) == (
        "H100-SXM5-80GB", 4, "baremetal", "debian-12")
    assert group["nics"] == [  # the simulator's HGX rails 0-3 (sandbox/profile.py HCA_BUSES)
        {"name": f"mlx5_{i}", "kind": "infiniband", "rate_gbps": 400, "netdev": netdev}
        for i, netdev in enumerate(["ibp25s0", "ibp43s0", "ibp59s0", "ibp94s0"])]
    shape = catalog.lookup(group["sku"]).shape(4, "baremetal")
    assert shape is not None and not shape.nvswitch  # no NVSwitch read, as the shape says
    (probe_path,) = artifacts.glob("*/*/discover/probes/node1/probe.json")
    probe = json.loads(probe_path.read_text())
    assert not (probe["nvidia_smi"].get("q") or {}).get("gpus")  # a fresh host: no driver yet, PCI sysfs told
    assert [e["device"] for e in probe["system"]["pcie_endpoints"] if e["kind"] == "gpu"] == ["0x2330"] * 4

    valid = _invoke(fleet.inventory, artifacts, "validate")
    assert valid.returncode == 0, valid.stderr[-4000:]

    run = _invoke(fleet.inventory, artifacts, "provision", "certify")
    assert run.returncode == 0, run.stderr[-4000:]
    (certify_path,) = artifacts.glob("*/*/certify/summary.json")
    certify = json.loads(certify_path.read_text())
    assert certify["certified"] == ["node1"], certify["hosts"]
    cert = json.loads((certify_path.parent / "nodes" / "node1" / "certification.json").read_text())
    assert (cert["sku"], cert["gpus_expected"], cert["node_group"]) == ("H100-SXM5-80GB", 4, "gpu_nodes")
    services = next(g for g in cert["gates"] if g["gate"] == "services")
    assert services["status"] == "skipped" and "no NVSwitch" in services["reason"], services
