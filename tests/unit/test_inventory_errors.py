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

from gridready import cli
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
EMBED = {
    "name": "embed", "engine": "triton-embedding", "served_name": "bge-small", "tensor_parallel": 1,
    "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
    "embedding": {"model_file": "onnx/model.onnx",
                  "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]}],
                  "outputs": [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 384]}]},
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
    ("embedding-without-settings", _set("serving.tiers.0", {**EMBED, "embedding": None}), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0]: engine triton-embedding needs `embedding` (its "
     "inputs and outputs), and `embedding` needs engine triton-embedding"),
    ("embedding-preferred-over-max", _set("serving.tiers.0", {**EMBED, "embedding": {
        **EMBED["embedding"], "max_batch_size": 8, "dynamic_batching": {"preferred_batch_size": [4, 16]}}}),
     None, None, "inventories/acme/cluster.yml: serving.tiers[0].embedding: "
                 "dynamic_batching.preferred_batch_size [16] exceeds max_batch_size 8"),
    ("embedding-hf-without-file", _set("serving.tiers.0", {**EMBED, "embedding": {
        k: v for k, v in EMBED["embedding"].items() if k != "model_file"}}), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0]: triton-embedding: a model.hf_id needs "
     "embedding.model_file (the file in the snapshot, e.g. onnx/model.onnx)"),
    ("embedding-ttft-slo", _set("serving.tiers.0", {**EMBED, "slo": {"ttft_ms_p99": 50}}), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0]: triton-embedding: a fixed-cost model streams "
     "no tokens; set slo.e2e_ms_p99, not ttft/tpot"),
    ("embedding-sweep-one-setting", _set("serving.tiers.0", {**EMBED, "embedding": {
        **EMBED["embedding"], "sweep": {"max_queue_delay_microseconds": [100]}}}), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].embedding.sweep.max_queue_delay_microseconds: List should "
     "have at least 2 items after validation, not 1"),
    ("embedding-bad-dims", _set("serving.tiers.0", {**EMBED, "embedding": {
        **EMBED["embedding"], "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [0]}]}}),
     None, None, "inventories/acme/cluster.yml: serving.tiers[0].embedding.inputs[0].dims: each "
                 "dimension is a positive size or -1 (variable), got [0]"),
    ("embedding-on-kubernetes", lambda d: (_set("serving.tiers.0", EMBED)(d), _set("serving.target", "kubernetes")(d)),
     None, None, "inventories/acme/cluster.yml: serving.tiers[0].engine: triton-embedding runs on target hosts "
                 "only (no Kubernetes component)"),
    ("health-interval-too-short", _set("serving.engine_health", {"interval_s": 1}), None, None,
     "inventories/acme/cluster.yml: serving.engine_health.interval_s: Input should be greater than or equal to 5"),
    ("health-failures-not-int", _set("serving.engine_health", {"failures": "x"}), None, None,
     "inventories/acme/cluster.yml: serving.engine_health.failures: Input should be a valid integer, unable to "
     "parse string as an integer"),
    ("unknown-engine", _set("serving.tiers.0.engine", "lmdeploy"), None, None,
     "inventories/acme/cluster.yml: serving.tiers[0].engine: Input should be 'vllm', 'triton-trtllm', 'sglang' or "
     "'triton-embedding'"),
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
    ("probe-waived", _set("certification", {"waive": ["probe"]}), None, None,
     "inventories/acme/cluster.yml: certification.waive[0]: the probe gate cannot be set aside: without the probe's "
     "output nothing about the node is known"),
    ("probe-not-applicable", _set("certification", {"not_applicable": ["dcgm", "probe"]}), None, None,
     "inventories/acme/cluster.yml: certification.not_applicable[1]: the probe gate cannot be set aside: without "
     "the probe's output nothing about the node is known"),
    ("kubernetes-without-kubeconfig", _set("serving.target", "kubernetes"), None, None,
     "inventories/acme/cluster.yml: serving.kubeconfig: required when serving.target is kubernetes"),
]

C = "inventories/acme/cluster.yml: "
SMALL = {"tensor_parallel": 1, "pipeline_parallel": 1}
REV = "0e9e39f249a16976918f6564b8830bc894c89659"
HF_TOKEN_SHAPED = "hf_" + "Ab1" * 12


def _tier(**over: object) -> dict:
    tier = copy.deepcopy(CLUSTER["serving"]["tiers"][0])
    tier.update(SMALL)
    tier.update(over)
    return tier


def _tiers(*tiers: dict) -> Callable[[dict], None]:
    return _set("serving.tiers", list(tiers))


# spec values that reach files, units and command lines, and constraints between tiers
CASES += [
    ("newline-served-name", _set("serving.tiers.0.served_name", "llama\nExecStartPre=/bin/sh"), None, None,
     C + "serving.tiers[0].served_name: must be one line without control characters"),
    ("newline-socket-ifname", _set("serving.socket_ifname", "eth0\nNCCL_DEBUG=TRACE"), None, None,
     C + "serving.socket_ifname: must be one line without control characters"),
    ("newline-mgmt-interface", _set("node_groups.0.mgmt_interface", "bond0\nx"), None, None,
     C + "node_groups[0].mgmt_interface: must be one line without control characters"),
    ("ifname-with-slash", _set("node_groups.0.mgmt_interface", "../eth0"), None, None,
     C + "node_groups[0].mgmt_interface: must be a Linux interface name"),
    ("ifname-too-long", _set("node_groups.0.mgmt_interface", "enp1s0f0np0abcde"), None, None,
     C + "node_groups[0].mgmt_interface: must be a Linux interface name"),
    ("ifname-dot-dot", _set("serving.socket_ifname", ".."), None, None,
     C + "serving.socket_ifname: must be a Linux interface name"),
    ("netdev-with-space", _set("node_groups.0.nics.0.netdev", "ib p12s0"), None, None,
     C + "node_groups[0].nics[0].netdev: must be a Linux interface name"),
    ("k8s-socket-ifname-shell", _set("serving.kubernetes", {"socket_ifname": "eth0;reboot"}), None, None,
     C + "serving.kubernetes.socket_ifname: must be a Linux interface name"),
    ("firewall-client-not-cidr", _set("serving.firewall_clients", ["everyone"]), None, None,
     C + "serving.firewall_clients[0]: must be a CIDR network"),
    ("firewall-client-host-bits", _set("serving.firewall_clients", ["10.0.0.0/8", "192.0.2.7/24"]), None, None,
     C + "serving.firewall_clients[1]: must be a CIDR network"),
    ("firewall-client-hostname", _set("serving.firewall_clients", ["clients.example.com"]), None, None,
     C + "serving.firewall_clients[0]: must be a CIDR network"),
    ("validity-hours-huge-int", _set("certification", {"validity_hours": 10**20}), None, None,
     C + "certification.validity_hours: must be at most 8784 (a year)"),
    ("validity-hours-1e20", None, None,
     yaml.safe_dump({**CLUSTER, "certification": {"validity_hours": "V"}}).replace(": V", ": 1e20"),
     C + "certification.validity_hours: Input should be a valid integer"),
    ("hf-id-is-a-flag", _set("serving.tiers.0.model.hf_id", "--trust-remote-code"), None, None,
     C + "serving.tiers[0].model.hf_id: must be a Hugging Face repo id"),
    ("hf-id-without-namespace", _set("serving.tiers.0.model.hf_id", "llama"), None, None,
     C + "serving.tiers[0].model.hf_id: must be a Hugging Face repo id"),
    ("hf-id-double-dot", _set("serving.tiers.0.model.hf_id", "meta-llama/../../etc"), None, None,
     C + "serving.tiers[0].model.hf_id: must be a Hugging Face repo id"),
    ("revision-is-a-flag", _set("serving.tiers.0.model.revision", "--help"), None, None,
     C + "serving.tiers[0].model.revision: must be a pinned commit"),
    ("revision-newline", _set("serving.tiers.0.model.revision", "main\n--api-key"), None, None,
     C + "serving.tiers[0].model.revision: must be one line without control characters"),
    ("local-path-relative", _set("serving.tiers.0.model", {"local_path": "models/llama"}), None, None,
     C + "serving.tiers[0].model.local_path: must be an absolute path"),
    ("lora-path-relative", _set("serving.tiers.0.lora_adapters", [{"name": "sql", "path": "./adapters/sql"}]), None,
     None, C + "serving.tiers[0].lora_adapters[0].path: must be an absolute path or a Hugging Face repo id"),
    ("engine-arg-name-not-vllm", _set("serving.tiers.0.extra_engine_args", {"max model len": 4096}), None, None,
     C + "serving.tiers[0].extra_engine_args.max model len: must be a vLLM engine argument name"),
    ("engine-arg-value-is-a-flag", _set("serving.tiers.0.extra_engine_args", {"tokenizer": "--trust-remote-code"}),
     None, None, C + "serving.tiers[0].extra_engine_args.tokenizer: value must not start with '-'"),
    ("engine-arg-value-newline", _set("serving.tiers.0.extra_engine_args", {"tokenizer": "a\nb"}), None, None,
     C + "serving.tiers[0].extra_engine_args.tokenizer: must be one line without control characters"),
    ("engine-arg-token", _set("serving.tiers.0.extra_engine_args", {"api_key": "s3cr3t-value"}), None, None,
     C + "serving.tiers[0].extra_engine_args.api_key: looks like a secret in plain text"),
    ("engine-arg-hf-token-shape", _set("serving.tiers.0.extra_engine_args", {"tokenizer": HF_TOKEN_SHAPED}), None,
     None, C + "serving.tiers[0].extra_engine_args.tokenizer: has the shape of a credential"),
    ("description-control-char", _set("description", "fleet \x1b[31mred"), None, None,
     C + "description: must be one line without control characters"),
    ("description-private-key", _set("description", "-----BEGIN OPENSSH PRIVATE KEY----- abc"), None, None,
     C + "description: has the shape of a credential"),
    ("two-tiers-one-port", _tiers(_tier(name="aa"), _tier(name="bb", served_name="bb")), None, None,
     C + "serving.tiers[1].port: 8000 is already the port of serving.tiers[0] (aa)"),
    ("tier-port-is-ray-gcs", _tiers(_tier(port=6379)), None, None,
     C + "serving.tiers[0].port: 6379 is the Ray GCS port (serving.ray_port)"),
    ("tier-port-is-ray-dashboard", _tiers(_tier(port=8265)), None, None,
     C + "serving.tiers[0].port: 8265 is the Ray dashboard's port"),
    ("tier-port-is-ray-client", _tiers(_tier(port=10001)), None, None,
     C + "serving.tiers[0].port: 10001 is the Ray client server's port"),
    ("tier-port-in-ray-worker-range", _tiers(_tier(port=11500)), None, None,
     C + "serving.tiers[0].port: 11500 is in Ray's worker port range 11000-11999"),
    ("tier-port-is-custom-ray-port", lambda d: (_tiers(_tier(port=7000))(d), d["serving"].update(ray_port=7000)),
     None, None, C + "serving.tiers[0].port: 7000 is the Ray GCS port (serving.ray_port)"),
    ("triton-port-is-ray-metrics",
     _tiers(_tier(engine="triton-trtllm", port=9000, triton={"http_port": 8080})), None, None,
     C + "serving.tiers[0].triton.http_port: 8080 is Ray's metrics export's port"),
    ("triton-ports-collide", _tiers(_tier(engine="triton-trtllm", port=9000, triton={"grpc_port": 9000})), None,
     None, C + "serving.tiers[0].triton.grpc_port: 9000 is already this tier's port"),
    ("tiers-exceed-fleet-together",
     _tiers(_tier(name="aa", tensor_parallel=8, pipeline_parallel=1),
            _tier(name="bb", served_name="bb", port=8001, tensor_parallel=8, pipeline_parallel=2)), None, None,
     C + "serving.tiers: the tiers on gpu_nodes need 24 GPUs together, more than it has (16)"),
    ("tier-port-privileged", _set("serving.tiers.0.port", 80), None, None,
     C + "serving.tiers[0].port: Input should be greater than or equal to 1024"),
    ("ray-port-out-of-range", _set("serving.ray_port", 70000), None, None,
     C + "serving.ray_port: Input should be less than or equal to 65535"),
    ("tier-name-not-slug", _set("serving.tiers.0.name", "Llama_70B"), None, None,
     C + "serving.tiers[0].name: String should match pattern"),
    ("node-group-name-not-ansible", _set("node_groups.0.name", "GPU-Nodes"), None, None,
     C + "node_groups[0].name: String should match pattern"),
    ("nic-name-with-space", _set("node_groups.0.nics.0.name", "mlx5 0"), None, None,
     C + "node_groups[0].nics[0].name: String should match pattern"),
    ("gpus-per-node-17", _set("node_groups.0.gpus_per_node", 17), None, None,
     C + "node_groups[0].gpus_per_node: Input should be less than or equal to 16"),
    ("driver-branch-shell", _set("software", {"driver_branch": "580; reboot"}), None, None,
     C + "software.driver_branch: String should match pattern"),
    ("gpu-memory-utilization-above-1", _set("serving.tiers.0.gpu_memory_utilization", 1.5), None, None,
     C + "serving.tiers[0].gpu_memory_utilization: Input should be less than or equal to 1"),
    ("replicas-zero", _set("serving.tiers.0.replicas", 0), None, None,
     C + "serving.tiers[0].replicas: Input should be greater than 0"),
    ("k8s-namespace-invalid", _set("serving.kubernetes", {"namespace": "Serving_NS"}), None, None,
     C + "serving.kubernetes.namespace: String should match pattern"),
    ("tier-unknown-node-group", _set("serving.tiers.0.node_group", "cpu_nodes"), None, None,
     C + "serving.tiers[0].node_group: no node group named 'cpu_nodes'"),
    ("duplicate-tier-name", _tiers(_tier(name="aa"), _tier(name="aa", port=8001)), None, None,
     C + "serving.tiers: duplicate tier name 'aa'"),
    ("kubeconfig-newline", lambda d: d["serving"].update(target="kubernetes", kubeconfig="k.yml\nx"), None, None,
     C + "serving.kubeconfig: must be one line without control characters"),
    ("http-mirror-without-key-pin", _set("software", {"package_mirror": "http://mirror.example.internal/cuda/"}),
     None, None, C + "software.package_mirror: a plain-http mirror needs software.package_mirror_key_fingerprint"),
    ("mirror-not-a-url", _set("software", {"package_mirror": "mirror.example.internal/cuda"}), None, None,
     C + "software.package_mirror: must be an http, https or file URL without whitespace"),
    ("mirror-url-with-space", _set("software", {"package_mirror": "https://m.example/cuda [trusted=yes]"}), None,
     None, C + "software.package_mirror: must be an http, https or file URL without whitespace"),
    ("mirror-key-pin-not-hex", _set("software", {"package_mirror": "http://m.example/cuda/",
                                                 "package_mirror_key_fingerprint": "3bf863cc"}), None, None,
     C + "software.package_mirror_key_fingerprint: String should match pattern"),
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


@pytest.mark.parametrize("software", [
    {"package_mirror": "https://mirror.example.internal/cuda/"},
    {"package_mirror": "http://mirror.example.internal/cuda/",
     "package_mirror_key_fingerprint": "EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"},
])
def test_a_tls_or_pinned_mirror_loads(tmp_path, monkeypatch, software):
    make_inventory(tmp_path, cluster={**CLUSTER, "software": software})
    monkeypatch.chdir(tmp_path)
    assert load("acme").spec.software.package_mirror == software["package_mirror"]


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


# --- hostile files: each is refused before anything is parsed further --------------------------------------

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True))
HOSTS_LAUGHS = ("all:\n  vars:\n    " + LAUGHS.replace("\n", "\n    ").rstrip() + "\n"
                "  children:\n    gpu_nodes:\n      hosts:\n        gpu01: {}\n")


def _write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def setup(inv: Path) -> None:
        path = inv / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def _fifo(rel: str) -> Callable[[Path], None]:
    def setup(inv: Path) -> None:
        path = inv / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    return setup


def _device(rel: str) -> Callable[[Path], None]:
    def setup(inv: Path) -> None:
        path = inv / rel
        path.unlink(missing_ok=True)
        path.symlink_to("/dev/zero")
    return setup


def _huge(rel: str, size: int) -> Callable[[Path], None]:
    def setup(inv: Path) -> None:
        with (inv / rel).open("ab") as fh:
            fh.truncate(size)  # sparse: 50 MB on paper, nothing on disk
    return setup


def _dir(rel: str) -> Callable[[Path], None]:
    def setup(inv: Path) -> None:
        (inv / rel).unlink()
        (inv / rel).mkdir()
    return setup


INV = "inventories/acme/"
H = INV + "hosts.yml: "
P = INV + "triton_versions.yml: "
GPU01 = "all.children.gpu_nodes.hosts.gpu01"
FILE_CASES = [
    ("cluster-not-utf8", _write("cluster.yml", b"customer: acme\xff\xfe\n"), C + "(file): not UTF-8"),
    ("cluster-control-bytes", _write("cluster.yml", "customer: ac\x07me\n"), C + "line 1: control character"),
    ("hosts-nul-byte", _write("hosts.yml", HOSTS + "# \x00\n"), H + "line 7: control character"),
    ("cluster-20000-deep", _write("cluster.yml", "a: " + "[" * 20000 + "]" * 20000 + "\n"),
     C + "line 1 column 68: nested deeper than 64 levels"),
    ("cluster-alias-inside-its-anchor", _write("cluster.yml", "a: &x [1, *x]\n"),
     C + "line 1 column 8: nested deeper than 64 levels"),  # endless once built: refused on the node graph
    ("cluster-5000-digit-int", _write("cluster.yml", "a: " + "1" * 5000 + "\n"),
     C + "line 1 column 4: not a valid int: Exceeds the limit (4300 digits) for integer string conversion"),
    ("cluster-impossible-date", _write("cluster.yml", "customer: acme\nsince: 2020-02-30\n"),
     C + "line 2 column 8: not a valid timestamp: day is out of range for month"),
    ("cluster-tagged-float", _write("cluster.yml", "a: !!float fast\n"),
     C + "line 1 column 4: not a valid float: could not convert string to float: 'fast'"),
    ("cluster-100-deep", _write("cluster.yml", "a: " + "[" * 100 + "]" * 100 + "\n"),
     C + "line 1 column 68: nested deeper than 64 levels"),
    ("cluster-fifo", _fifo("cluster.yml"), C + "(file): not a regular file"),
    ("hosts-fifo", _fifo("hosts.yml"), H + "(file): not a regular file"),
    ("cluster-device", _device("cluster.yml"), C + "(file): not a regular file"),
    ("cluster-directory", _dir("cluster.yml"), C + "(file): not a regular file"),
    ("cluster-50mb", _huge("cluster.yml", 50 * 1024 * 1024), C + "(file): 52428800 bytes, more than the 1048576"),
    ("hosts-alias-fan-out", _write("hosts.yml", HOSTS_LAUGHS), H + "(file): expands to more than 100000 nodes"),
    ("cluster-alias-fan-out", _write("cluster.yml", yaml.safe_dump(CLUSTER) + LAUGHS),
     C + "(file): expands to more than 100000 nodes"),
    ("pins-unknown-key", _write("triton_versions.yml", "lines: {llmapi: {imag: x}}\n"),
     P + "lines.llmapi.imag: Extra inputs are not permitted"),
    ("pins-bad-digest", _write("triton_versions.yml", "fixed_cost: {image_digest: 'sha256:abc'}\n"),
     P + "fixed_cost.image_digest: String should match pattern"),
    ("pins-unknown-line", _write("triton_versions.yml", "lines: {ensemble: {}}\n"), P + "lines.ensemble"),
    ("pins-a-list", _write("triton_versions.yml", "- llmapi\n"), P + "(top level): must be a mapping"),
    ("pins-duplicate-key", _write("triton_versions.yml", "fixed_cost: {}\nfixed_cost: {}\n"),
     P + "line 2 column 1: duplicate key 'fixed_cost'"),
    ("pins-fifo", _fifo("triton_versions.yml"), P + "(file): not a regular file"),
    ("pins-not-utf8", _write("triton_versions.yml", b"lines: {}\xff\n"), P + "(file): not UTF-8"),
    ("pins-syntax", _write("triton_versions.yml", "lines: [\n"), P + "line 2 column 1: YAML syntax error"),
    ("hosts-empty", _write("hosts.yml", ""), H + "(top level): must be a mapping of groups"),
    ("hosts-become-password", _write("hosts.yml", HOSTS.replace("gpu01: {}", "gpu01: {ansible_become_password: x1}")),
     H + f"{GPU01}.ansible_become_password: looks like a secret in plain text"),
    ("hosts-group-vars-token", _write("hosts.yml", HOSTS.replace("all:\n", "all:\n  vars: {hf_token: abc}\n")),
     H + "all.vars.hf_token: looks like a secret in plain text"),
    ("hosts-token-shaped-value", _write("hosts.yml", HOSTS.replace("gpu01: {}", f"gpu01: {{note: {HF_TOKEN_SHAPED}}}")),
     H + f"{GPU01}.note: has the shape of a credential"),
    ("host-vars-password", _write("host_vars/gpu01.yml", "ansible_password: hunter2\n"),
     INV + "host_vars/gpu01.yml: ansible_password: looks like a secret in plain text"),
    ("group-vars-json", _write("group_vars/all.json", '{"vault_pass": "x", "db": {"password": "x"}}'),
     INV + "group_vars/all.json: db.password: looks like a secret in plain text"),
    ("group-vars-no-extension", _write("group_vars/gpu_nodes", "gridready_vllm_api_key: abcdef\n"),
     INV + "group_vars/gpu_nodes: gridready_vllm_api_key: looks like a secret in plain text"),
    ("group-vars-nested-secret", _write("group_vars/all/main.yml", "proxy:\n  auth:\n    - {user: u, secret: s}\n"),
     INV + "group_vars/all/main.yml: proxy.auth[0].secret: looks like a secret in plain text"),
    ("group-vars-private-key", _write("group_vars/all/tls.yml", "tls: '-----BEGIN RSA PRIVATE KEY-----\\nMII'\n"),
     INV + "group_vars/all/tls.yml: tls: has the shape of a credential"),
    ("group-vars-secret-flag", _write("group_vars/all/main.yml", "extra_args: [--port, '1', --api-key, abc]\n"),
     INV + "group_vars/all/main.yml: extra_args[3]: value of a secret flag in plain text"),
    ("group-vars-secret-flag-inline", _write("group_vars/all/main.yml", "extra_args: ['--hf-token=abc']\n"),
     INV + "group_vars/all/main.yml: extra_args[0]: secret flag with a plain-text value"),
    ("group-vars-aws-key", _write("group_vars/all/main.yml", "note: AKIAABCDEFGHIJKLMNOP\n"),
     INV + "group_vars/all/main.yml: note: has the shape of a credential"),
    ("group-vars-not-mapping", _write("group_vars/all/main.yml", "- a\n- b\n"),
     INV + "group_vars/all/main.yml: (top level): must be a mapping of variables"),
    ("group-vars-fifo", _fifo("group_vars/all/main.yml"), INV + "group_vars/all/main.yml: (file): not a regular file"),
    ("group-vars-not-utf8", _write("group_vars/all/main.yml", b"x: \xc3\x28\n"),
     INV + "group_vars/all/main.yml: (file): not UTF-8"),
    ("host-vars-syntax", _write("host_vars/gpu02/main.yml", "a: [\n"), INV + "host_vars/gpu02/main.yml: line "),
    ("group-vars-vault-blob-pasted", _write("group_vars/all/main.yml", "x: '$ANSIBLE_VAULT;1.1;AES256 6133'\n"),
     INV + "group_vars/all/main.yml: x: has the shape of a credential"),
]


@pytest.mark.parametrize(("case", "setup", "expected"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_hostile_file_names_file_and_key(tmp_path, monkeypatch, case, setup, expected):
    setup(make_inventory(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    assert any(line.startswith(expected) for line in err.value.lines), err.value.lines
    assert all(line.startswith(INV) for line in err.value.lines)
    assert "hunter2" not in str(err.value) and "abcdef" not in str(err.value) and HF_TOKEN_SHAPED not in str(err.value)


ALL_KINDS = [(c[0], c[1], c[2], c[3], None, c[4]) for c in CASES] + [(c[0], None, None, None, c[1], c[2])
                                                                      for c in FILE_CASES]


def _files(root: Path) -> set[tuple[str, float]]:
    return {(str(p), p.lstat().st_mtime) for p in root.rglob("*")}


@pytest.mark.parametrize(("case", "mutate", "hosts", "raw", "setup", "expected"), ALL_KINDS,
                         ids=[k[0] for k in ALL_KINDS])
def test_every_bad_input_is_exit_2_one_line_no_trace_nothing_written(
        tmp_path, monkeypatch, capsys, case, mutate, hosts, raw, setup, expected):
    """The command line's path (cli.guarded around the inventory load that `invoke validate` and every stage
    run first), in process: exit 2, the line on stderr, no traceback, no file written anywhere."""
    inv = broken_inventory(tmp_path, mutate, hosts, raw)
    if setup:
        setup(inv)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRIDREADY_HOME", str(tmp_path))
    monkeypatch.delenv("GRIDREADY_ARTIFACTS", raising=False)
    cli.inventory.cache_clear()
    before = _files(tmp_path)
    with pytest.raises(cli.CommandExit) as exit_:
        cli.guarded(lambda: cli.inventory("acme"))()
    err = capsys.readouterr().err
    assert exit_.value.code == ExitCode.INVALID, err
    assert f"error: {expected}" in err
    assert all(line.startswith("error: inventories/acme/") for line in err.splitlines()), err
    assert "Traceback" not in err and "internal error" not in err
    assert _files(tmp_path) == before
    assert len(ALL_KINDS) >= 60
