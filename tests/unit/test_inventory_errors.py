"""Broken inventories: each gives exit 2 and one clear line naming the file and the key; nothing is written."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import load

REPO = Path(__file__).resolve().parents[2]

CLUSTER = {
    "customer": "acme",
    "node_groups": [{
        "name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 8,
        "nics": [{"name": f"mlx5_{i}", "kind": "infiniband", "rate_gbps": 400, "rail": i} for i in range(8)],
    }],
    "certification": {"min_certified_nodes": 1},
    "serving": {"tiers": [{
        "name": "llama", "engine": "vllm", "served_name": "llama",
        "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": "0e9e39f249a16976918f6564b8830bc894c89659"},
        "tensor_parallel": 8, "pipeline_parallel": 2,
    }]},
}
HOSTS = "all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu01: {}\n        gpu02: {}\n"


def make_inventory(root: Path, name: str = "acme", cluster: dict | None = None, hosts: str = HOSTS) -> Path:
    inv = root / "inventories" / name
    inv.mkdir(parents=True)
    (inv / "cluster.yml").write_text(yaml.safe_dump(cluster if cluster is not None else CLUSTER))
    (inv / "hosts.yml").write_text(hosts)
    return inv


def _set(path: str, value: object) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _drop(path: str) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]
    return mutate


# (id, mutation of cluster.yml or None, hosts.yml text or None, raw cluster.yml text or None, expected line)
CASES = [
    ("unknown-key", _set("colour", "blue"), None, None,
     "inventories/acme/cluster.yml: colour: Extra inputs are not permitted"),
    ("unknown-nested-key", _set("node_groups.0.gpu_count", 8), None, None,
     "inventories/acme/cluster.yml: node_groups[0].gpu_count: Extra inputs are not permitted"),
    ("wrong-type", _set("node_groups.0.gpus_per_node", "eight"), None, None,
     "inventories/acme/cluster.yml: node_groups[0].gpus_per_node: Input should be a valid integer"),
    ("tp-larger-than-gpus", _set("serving.tiers.0.tensor_parallel", 16), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].tensor_parallel: must be <= gpus_per_node (8)"),
    ("pp-larger-than-nodes", _set("serving.tiers.0.pipeline_parallel", 4), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0]: tensor_parallel x pipeline_parallel = 8 x 4 needs 4 node(s) "
     "per replica x 1 replica(s); gpu_nodes has 2 node(s) of 8 GPUs"),
    ("tp-not-dividing-gpus", _set("serving.tiers.0.tensor_parallel", 3), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].tensor_parallel: must divide gpus_per_node (8)"),
    ("host-group-missing", None, "all:\n  children:\n    other:\n      hosts:\n        gpu01: {}\n", None,
     "inventories/acme/cluster.yml: node_groups[0].name: group 'gpu_nodes' is not in inventories/acme/hosts.yml"),
    ("bad-slug", _set("customer", "Acme_Corp"), None, None,
     "inventories/acme/cluster.yml: customer: String should match pattern"),
    ("customer-not-dir-name", _set("customer", "globex"), None, None,
     "inventories/acme/cluster.yml: customer: must equal the inventory directory name ('acme')"),
    ("yaml-syntax", None, None, "customer: acme\nnode_groups: [\n  - name: x\n",
     "inventories/acme/cluster.yml: line "),
    ("empty-group", None, "all:\n  children:\n    gpu_nodes:\n      hosts: {}\n", None,
     "inventories/acme/hosts.yml: gpu_nodes: group has no hosts"),
    ("duplicate-host", None,
     "all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu01: {}\n        gpu01: {}\n", None,
     "inventories/acme/hosts.yml: line 6 column 9: duplicate key 'gpu01'"),
    ("negative-floor", _set("certification", {"floors": {"bf16_gemm_tflops": -5}}), None, None,
     "inventories/acme/cluster.yml: certification.floors.bf16_gemm_tflops: Input should be greater than or equal to 0"),
    ("unknown-sku", _set("node_groups.0.sku", "B300"), None, None,
     "inventories/acme/cluster.yml: node_groups[0].sku: unknown SKU 'B300'"),
    ("missing-required", _drop("node_groups"), None, None,
     "inventories/acme/cluster.yml: node_groups: Field required"),
    ("unknown-engine", _set("serving.tiers.0.engine", "lmdeploy"), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].engine: Input should be 'vllm', 'triton-trtllm' or 'sglang'"),
    ("refused-engine-tgi", _set("serving.tiers.0.engine", "tgi"), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].engine: Text Generation Inference is not supported: Hugging "
     "Face put it in maintenance mode on 2025-12-11 and archived huggingface/text-generation-inference on "
     "2026-03-21 (https://huggingface.co/docs/text-generation-inference); use sglang or vllm"),
    ("hf-without-revision", _drop("serving.tiers.0.model.revision"), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].model: hf_id needs a pinned revision"),
    ("duplicate-nic", _set("node_groups.0.nics.1.name", "mlx5_0"), None, None,
     "inventories/acme/cluster.yml: node_groups[0]: duplicate NIC names: mlx5_0"),
    ("too-many-gpus-wanted", _set("serving.tiers.0.replicas", 2), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0]: tensor_parallel x pipeline_parallel = 8 x 2 needs 2 node(s) "
     "per replica x 2 replica(s); gpu_nodes has 2 node(s) of 8 GPUs"),
    ("bad-host-name", None, "all:\n  children:\n    gpu_nodes:\n      hosts:\n        'gpu 01': {}\n", None,
     "inventories/acme/hosts.yml: all.children.gpu_nodes.hosts.gpu 01: not a valid host name"),
    ("dcgm-level-out-of-range", _set("certification", {"dcgm_level": 7}), None, None,
     "inventories/acme/cluster.yml: certification.dcgm_level: Input should be less than or equal to 4"),
    ("min-nodes-above-fleet", _set("certification", {"min_certified_nodes": 5}), None, None,
     "inventories/acme/cluster.yml: certification.min_certified_nodes: 5 is more than the 2 GPU nodes"),
    ("unknown-gate-waived", _set("certification", {"waive": ["pcie_link", "pcie_lnk"]}), None, None,
     "inventories/acme/cluster.yml: certification.waive[1]: unknown gate 'pcie_lnk'"),
    ("kubernetes-without-kubeconfig", _set("serving.target", "kubernetes"), None, None,
     "inventories/acme/cluster.yml: serving.kubeconfig: required when serving.target is kubernetes"),
]


def broken_inventory(root: Path, mutate, hosts: str | None, raw: str | None) -> Path:
    """The valid inventory with one case's change: a mutation of cluster.yml, its hosts.yml or raw cluster.yml."""
    doc = copy.deepcopy(CLUSTER)
    if mutate:
        mutate(doc)
    inv = make_inventory(root, cluster=doc, hosts=hosts or HOSTS)
    if raw is not None:
        (inv / "cluster.yml").write_text(raw)
    return inv


@pytest.mark.parametrize(("case", "mutate", "hosts", "raw", "expected"), CASES, ids=[c[0] for c in CASES])
def test_broken_inventory_names_file_and_key(tmp_path, monkeypatch, case, mutate, hosts, raw, expected):
    broken_inventory(tmp_path, mutate, hosts, raw)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    assert err.value.code == ExitCode.INVALID
    assert any(line.startswith(expected) for line in err.value.lines), err.value.lines
    assert all(": " in line and line.startswith("inventories/acme/") for line in err.value.lines)


def test_secret_in_plain_group_vars_is_refused_without_echoing_it(tmp_path, monkeypatch):
    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "group_vars" / "all" / "main.yml").write_text("hf_token: hf_SUPERSECRETVALUE\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    assert err.value.lines == [
        "inventories/acme/group_vars/all/main.yml: hf_token: looks like a secret in plain text; "
        "put it in an ansible-vault file"
    ]
    assert "SUPERSECRET" not in str(err.value)


def test_vault_files_are_not_read(tmp_path, monkeypatch):
    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "group_vars" / "all" / "vault.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6133\n")
    monkeypatch.chdir(tmp_path)
    assert load("acme").customer == "acme"


def test_valid_inventory_loads_with_groups_and_hosts(tmp_path, monkeypatch):
    make_inventory(tmp_path)
    monkeypatch.chdir(tmp_path)
    inv = load("acme")
    assert inv.groups["gpu_nodes"] == ["gpu01", "gpu02"]
    assert inv.node_group_of("gpu02") == "gpu_nodes"
    assert inv.spec.node_groups[0].nic_bandwidth_gbytes == 400


@pytest.mark.parametrize("case", ["unknown-key", "tp-larger-than-gpus", "yaml-syntax", "empty-group"])
def test_invoke_exits_2_before_anything_runs(tmp_path, case):
    """Through the real command line: exit 2, one error line per problem, no artifacts written."""
    _, mutate, hosts, raw, expected = next(c for c in CASES if c[0] == case)
    broken_inventory(tmp_path, mutate, hosts, raw)
    env = {**os.environ, "GRIDREADY_INVENTORY": "acme", "GRIDREADY_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "certify", "serve"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert any(ln.startswith(f"error: {expected}") for ln in lines), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "artifacts").exists()
