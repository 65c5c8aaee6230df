"""Inventories of 1-4 certified HGX H200 nodes and certify summaries, written to tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import inventory
from gridready.inventory import Inventory
from tests.summaries import HCAS, certification

MPI_IMAGE = "registry.example/tritonserver-mpi:25.12-trtllm-python-py3@sha256:" + "7a" * 32


def cluster_yml(customer: str, tiers: list[dict[str, Any]], target: str = "hosts") -> dict[str, Any]:
    serving: dict[str, Any] = {"target": target, "tiers": tiers}
    if target == "kubernetes":
        serving["kubeconfig"] = "kubeconfig.yml"
        # a multi-node Triton tier's image with sshd (docs/kubernetes.md's recipe); validate refuses one without
        serving["kubernetes"] = {"triton_mpi_image": MPI_IMAGE}
    return {
        "customer": customer,
        "node_groups": [{
            "name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 8, "mgmt_interface": "bond0",
            "nics": [{"name": h, "kind": "infiniband", "rate_gbps": 400, "rail": i} for i, h in enumerate(HCAS)],
        }],
        "certification": {"min_certified_nodes": 1},
        "serving": serving,
    }


def vllm_tier(**over: Any) -> dict[str, Any]:
    tier = {"name": "llama70b", "engine": "vllm", "served_name": "llama-3.3-70b",
            "model": {"hf_id": "meta-llama/Llama-3.3-70B-Instruct",
                      "revision": "6f6073b423013f6a7d4d9f39144961bfbfbc386b"}}
    tier.update(over)
    return tier


@pytest.fixture
def make_inv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Inventory]:
    """make_inv(nodes, tiers, target) -> a loaded inventory named `acme` with nodes gpu01..gpuNN; without tiers, one
    vLLM tier whose replica spans every node (pipeline_parallel given: derive puts a 70B model on one node)."""
    monkeypatch.chdir(tmp_path)

    def make(nodes: int, tiers: list[dict[str, Any]] | None = None, target: str = "hosts") -> Inventory:
        inv_dir = tmp_path / "inventories" / "acme"
        inv_dir.mkdir(parents=True, exist_ok=True)
        tiers = tiers or [vllm_tier(pipeline_parallel=nodes)]
        (inv_dir / "cluster.yml").write_text(yaml.safe_dump(cluster_yml("acme", tiers, target)))
        hosts = {f"gpu{i:02d}": {"ansible_host": f"10.77.0.{10 + i}"} for i in range(1, nodes + 1)}
        (inv_dir / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
        # the site's Triton image digests (gridready.inventory.site_pins), as a customer pins them
        digest = {"image_digest": "sha256:" + "5e" * 32}
        (inv_dir / "triton_versions.yml").write_text(yaml.safe_dump(
            {"lines": {"engine": digest, "llmapi": digest}, "fixed_cost": digest}))
        return inventory.load(inv_dir)

    return make


@pytest.fixture
def write_certify(make_inv: Callable[..., Inventory]) -> Callable[..., Path]:
    """write_certify(inv, certified, quarantined, ...): a certify summary through the stage's writer; returns the
    artifacts root."""

    def write(inv: Inventory, *args: Any, **kwargs: Any) -> Path:
        path, _ = certification(inv, *args, **kwargs)
        return path.parents[3]

    return write
