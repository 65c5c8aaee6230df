"""cluster.yml's node groups and software pins at the value level: the per-node NIC bandwidth in GB/s (InfiniBand
and RoCE summed, Ethernet not, Gb/s / 8), the SKU and shape refusals, NIC and group names once, the DCGM release of
its major, and pip's index arguments."""

from __future__ import annotations

import pytest

from gridready import catalog
from gridready.spec.cluster import ClusterSpec, NodeGroup, SoftwarePins
from tests.unit.spec.spec_lines import lines


def group(**over: object) -> dict[str, object]:
    return {"name": "gpu_nodes", "sku": "H200-SXM-141GB", **over}


def nic(name: str, kind: str, rate: int, **over: object) -> dict[str, object]:
    return {"name": name, "kind": kind, "rate_gbps": rate, **over}


@pytest.mark.parametrize(("nics", "gbytes"), [
    ([], 0.0),
    ([nic(f"mlx5_{i}", "infiniband", 400) for i in range(8)], 400.0),         # 8 x NDR = 3200 Gb/s = 400 GB/s
    ([nic("mlx5_0", "infiniband", 400), nic("mlx5_1", "roce", 200)], 75.0),   # 600 Gb/s over both RDMA kinds
    ([nic("mlx5_0", "roce", 400), nic("eth0", "ethernet", 100)], 50.0),       # Ethernet carries no NCCL traffic
    ([nic("eth0", "ethernet", 100), nic("eth1", "ethernet", 25)], 0.0),
    ([nic("mlx5_0", "infiniband", 100)], 12.5),
])
def test_nic_bandwidth_gbytes(nics, gbytes):
    assert NodeGroup.model_validate(group(nics=nics)).nic_bandwidth_gbytes == gbytes


def test_catalog_sku_by_name_or_device_id():
    assert NodeGroup.model_validate(group(sku="0x2335")).catalog_sku is catalog.lookup("H200-SXM-141GB")
    assert NodeGroup.model_validate(group()).catalog_sku.name == "H200-SXM-141GB"


def test_an_unknown_sku_names_every_known_key():
    assert lines(NodeGroup, group(sku="B300")) == [
        "cluster.yml: sku: unknown SKU 'B300'; known: " + ", ".join(catalog.known_keys())]
    assert ", 0x2330, " in lines(NodeGroup, group(sku="B300"))[0]


@pytest.mark.parametrize(("over", "want"), [
    ({"gpus_per_node": 8}, []), ({"gpus_per_node": 4, "platform": "slice"}, []),
    ({"gpus_per_node": 1, "platform": "passthrough"}, []),
    ({"gpus_per_node": 3}, ["cluster.yml: (top level): H200-SXM-141GB does not come as 3 GPUs baremetal; catalog "
                            "shapes: " + catalog.lookup("H200-SXM-141GB").shape_names()  # type: ignore[union-attr]
                            + " (gpus_per_node, platform)"]),
    ({"gpus_per_node": 8, "platform": "slice"}, [
        "cluster.yml: (top level): H200-SXM-141GB does not come as 8 GPUs slice; catalog shapes: 8 GPUs baremetal, "
        "4 GPUs baremetal, 8 GPUs passthrough, 4 GPUs passthrough, 2 GPUs passthrough, 1 GPU passthrough, 2 GPUs "
        "slice, 4 GPUs slice (gpus_per_node, platform)"]),
])
def test_known_shape(over, want):
    assert lines(NodeGroup, group(**over)) == want


@pytest.mark.parametrize(("nics", "want"), [
    ([nic("mlx5_0", "roce", 400, netdev="ens1"), nic("mlx5_1", "roce", 400, netdev="ens2")], []),
    ([nic("mlx5_0", "roce", 400), nic("mlx5_1", "roce", 400)], []),            # no netdev given twice: fine
    ([nic("mlx5_0", "roce", 400), nic("mlx5_0", "roce", 400)],
     ["cluster.yml: (top level): duplicate NIC names: mlx5_0"]),
    ([nic("mlx5_0", "roce", 400, netdev="ens1"), nic("mlx5_1", "roce", 400, netdev="ens1")],
     ["cluster.yml: (top level): duplicate NIC netdevs: ens1"]),
])
def test_unique_nics(nics, want):
    assert lines(NodeGroup, group(nics=nics)) == want


@pytest.mark.parametrize(("pins", "want"), [
    ({"dcgm_major": 4, "dcgm_version": "4.5.0"}, []),
    ({"dcgm_major": 3, "dcgm_version": "3.3.9"}, []),
    ({"dcgm_major": 4}, []),
    ({"dcgm_major": 4, "dcgm_version": "3.3.9"},
     ["cluster.yml: (top level): dcgm_version 3.3.9 is not a release of dcgm_major 4"]),
    ({"dcgm_major": 3, "dcgm_version": "4.5.0"},
     ["cluster.yml: (top level): dcgm_version 4.5.0 is not a release of dcgm_major 3"]),
    ({"dcgm_major": 4, "dcgm_version": "40.0.1"},
     ["cluster.yml: (top level): dcgm_version 40.0.1 is not a release of dcgm_major 4"]),
])
def test_dcgm_release_of_the_major(pins, want):
    assert lines(SoftwarePins, pins) == want


@pytest.mark.parametrize(("pins", "args"), [
    ({}, []),
    ({"python_index": "https://pypi.example.com/simple"}, ["--index-url", "https://pypi.example.com/simple"]),
    ({"python_index": "https://pypi.example.com/simple", "python_index_plain_http": True},
     ["--index-url", "https://pypi.example.com/simple"]),                     # https needs no trusted host
    ({"python_index": "http://10.0.0.5:8080/simple"}, ["--index-url", "http://10.0.0.5:8080/simple"]),
    ({"python_index": "http://Mirror.Example.com:8080/simple", "python_index_plain_http": True},
     ["--index-url", "http://Mirror.Example.com:8080/simple", "--trusted-host", "mirror.example.com"]),
    ({"python_index": "HTTP://10.0.0.5/simple", "python_index_plain_http": True},
     ["--index-url", "HTTP://10.0.0.5/simple", "--trusted-host", "10.0.0.5"]),
    ({"python_index": "http:///simple", "python_index_plain_http": True},
     ["--index-url", "http:///simple", "--trusted-host", ""]),
])
def test_pip_index_args(pins, args):
    assert SoftwarePins.model_validate(pins).pip_index_args() == args


BASE = {"customer": "acme", "node_groups": [group(name="gpu_a"), group(name="gpu_b", sku="H100-SXM5-80GB")]}


def test_group_by_name():
    spec = ClusterSpec.model_validate(BASE)
    assert spec.group("gpu_b").sku == "H100-SXM5-80GB"  # type: ignore[union-attr]
    assert spec.group("gpu_a").sku == "H200-SXM-141GB"  # type: ignore[union-attr]
    assert spec.group("gpu_c") is None


def test_group_names_once():
    data = {**BASE, "node_groups": [group(name="gpu_a"), group(name="gpu_b"), group(name="gpu_a")]}
    assert lines(ClusterSpec, data) == ["cluster.yml: (top level): duplicate node group names: gpu_a"]
