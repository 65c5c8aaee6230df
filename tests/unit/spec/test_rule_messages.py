"""The cross-field rules of cluster.yml: for each broken value, the exact key path and the one-line message an
operator reads (inventory.load prints `<file>: <key>: <message>`); values at a limit pass, one beyond fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.spec import rules
from gridready.spec.cluster import ClusterSpec

REV = "0e9e39f249a16976918f6564b8830bc894c89659"
BASE: dict[str, Any] = {
    "customer": "acme",
    "node_groups": [{
        "name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 8, "mgmt_interface": "bond0",
        "nics": [{"name": f"mlx5_{i}", "kind": "infiniband", "rate_gbps": 400, "rail": i} for i in range(8)],
    }],
    "certification": {"min_certified_nodes": 1},
    "serving": {"tiers": [{
        "name": "llama", "engine": "vllm", "served_name": "llama",
        "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": REV}, "tensor_parallel": 8,
    }]},
}


def spec(**over: Any) -> ClusterSpec:
    """BASE with dotted keys replaced (`serving.tiers` replaces the whole list)."""
    data = copy.deepcopy(BASE)
    for dotted, value in over.items():
        *parents, last = dotted.split("__")
        node = data
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[last] = value
    return ClusterSpec.model_validate(data)


def tier(name: str = "llama", **over: Any) -> dict[str, Any]:
    t = {"name": name, "engine": "vllm", "served_name": name,
         "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": REV}, "tensor_parallel": 8,
         "pipeline_parallel": 1}
    t.update(over)
    return t


def test_the_base_inventory_breaks_no_rule():
    assert rules.check(spec(), {"gpu_nodes": 2}) == []
    assert list(rules.placement(spec(), {"gpu_nodes": 2})) == []


# --- one_line -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "message"), [
    ("llama\nfoo", "must be one line without control characters"),
    ("llama\x7f", "must be one line without control characters"),
    ("a\u2028b", "must be one line without control characters"),
    ("{{ lookup('pipe', 'id') }}", "must not hold a template delimiter ({{, {%, {#): values of cluster.yml are data"),
    ("{% if 1 %}", "must not hold a template delimiter ({{, {%, {#): values of cluster.yml are data"),
    ("{# x #}", "must not hold a template delimiter ({{, {%, {#): values of cluster.yml are data"),
])
def test_values_are_single_line_data(text, message):
    assert list(rules.one_line(spec(description=text))) == [("description", message)]


def test_one_line_names_the_nested_key_path():
    s = spec(**{"serving__tiers": [tier(extra_engine_args={"seed": "1\n2"})]})
    assert list(rules.one_line(s)) == [("serving.tiers[0].extra_engine_args.seed",
                                        "must be one line without control characters")]
    s = spec(**{"node_groups__0__nics__3__netdev": "ib{{x}}"})
    assert [k for k, _ in rules.one_line(s)] == ["node_groups[0].nics[3].netdev"]


def test_json_like_values_that_only_close_braces_are_fine():
    assert list(rules.one_line(spec(description='{"a": {"b": 1}}'))) == []


# --- field_patterns -------------------------------------------------------------------------------------------
IFACE = f"must be a Linux interface name (pattern ^{rules.IFNAME.pattern}$)"


@pytest.mark.parametrize(("over", "found"), [
    ({"node_groups__0__mgmt_interface": "a" * 15}, []),
    ({"node_groups__0__mgmt_interface": "a" * 16}, [("node_groups[0].mgmt_interface", IFACE)]),
    ({"node_groups__0__mgmt_interface": ".."}, [("node_groups[0].mgmt_interface", IFACE)]),
    ({"node_groups__0__mgmt_interface": "eth0:1"}, [("node_groups[0].mgmt_interface", IFACE)]),
    ({"node_groups__0__nics__2__netdev": "ib 2"}, [("node_groups[0].nics[2].netdev", IFACE)]),
    ({"serving__socket_ifname": "bond0/x"}, [("serving.socket_ifname", IFACE)]),
    ({"serving__kubernetes": {"socket_ifname": "net1;x"}}, [("serving.kubernetes.socket_ifname", IFACE)]),
    ({"serving__kubernetes": {"model_cache_path": "/var/lib/../etc"}},
     [("serving.kubernetes.model_cache_path", "must not contain a '.' or '..' path component")]),
    ({"certification__validity_hours": 24 * 366}, []),
    ({"certification__validity_hours": 24 * 366 + 1},
     [("certification.validity_hours", "must be at most 8784 (a year)")]),
])
def test_interfaces_paths_and_validity(over, found):
    assert list(rules.field_patterns(spec(**over))) == found


@pytest.mark.parametrize(("over", "found"), [
    ({"served_name": "meta/llama"},
     [("serving.tiers[0].served_name", f"must be a model name without '/' (pattern ^{rules.SERVED_NAME.pattern}$)")]),
    ({"model": {"hf_id": "meta-llama--x/Llama", "revision": REV}},
     [("serving.tiers[0].model.hf_id",
       f"must be a Hugging Face repo id (namespace/name) (pattern ^{rules.HF_ID.pattern}$)")]),
    ({"model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": REV[:39]}},
     [("serving.tiers[0].model.revision",
       f"must be a pinned commit (40 hex digits; a branch or tag moves) (pattern ^{rules.REVISION.pattern}$)")]),
    ({"model": {"local_path": "models/llama"}},
     [("serving.tiers[0].model.local_path", f"must be an absolute path (pattern ^{rules.ABS_PATH.pattern}$)")]),
    ({"model": {"local_path": "/srv/models/../llama"}},
     [("serving.tiers[0].model.local_path", "must not contain a '.' or '..' path component")]),
    ({"lora_adapters": [{"name": "sql", "path": "/srv/lora/./sql"}]},
     [("serving.tiers[0].lora_adapters[0].path", "must not contain a '.' or '..' path component")]),
    ({"lora_adapters": [{"name": "sql", "path": "acme/sql-lora"}]}, []),
    ({"lora_adapters": [{"name": "sql", "path": "s3://b/sql"}]},
     [("serving.tiers[0].lora_adapters[0].path", "must be an absolute path or a Hugging Face repo id")]),
])
def test_tier_values_on_hosts(over, found):
    assert list(rules.field_patterns(spec(**{"serving__tiers": [tier(**over)]}))) == found


@pytest.mark.parametrize(("path", "found"), [
    ("s3://acme-adapters/llama/sql", []),
    ("s3://acme-adapters/../sql", []),  # object keys are not paths; the store resolves no '..'
    ("ftp://acme/sql", [("serving.tiers[0].lora_adapters[0].path", "must be an absolute path or a Hugging Face repo "
                         "id, or on Kubernetes an s3://, gs://, abfss:// or azure:// URI")]),
])
def test_adapter_uris_on_kubernetes(path, found):
    s = spec(**{"serving__target": "kubernetes", "serving__kubeconfig": "k.yml",
                "serving__tiers": [tier(lora_adapters=[{"name": "sql", "path": path}])]})
    assert list(rules.field_patterns(s)) == found


@pytest.mark.parametrize(("args", "found"), [
    ({"seed": 1, "block_size": "16"}, []),
    ({"Seed": 1}, [("seed_key", f"must be a vLLM engine argument name (^{rules.ENGINE_ARG.pattern}$)")]),
    ({"tensor_parallel_size": 4}, [("tensor_parallel_size", "gridready sets this argument itself; use the tier's "
                                    "tensor_parallel")]),
    ({"api_key": "x"}, [("api_key", "gridready sets this argument itself (the vault: VLLM_API_KEY)")]),
    ({"tokenizer": "--trust"}, [("tokenizer", "value must not start with '-' (it would read as a flag)")]),
    ({"tokenizer": "/srv/../etc"}, [("tokenizer", "must not contain a '.' or '..' path component")]),
    ({"tool_call_parser": ".."}, []),  # no '/': a value, not a path
])
def test_extra_engine_args(args, found):
    found = [("serving.tiers[0].extra_engine_args." + ("Seed" if k == "seed_key" else k), m) for k, m in found]
    assert list(rules.engine_args("serving.tiers[0]", args)) == found


# --- firewall -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("clients", "anyway", "found"), [
    (["192.0.2.0/24", "10.0.0.0/8", "2001:db8::/32"], False, []),
    (["10.0.0.1/8"], False, [("serving.firewall_clients[0]",
                              "must be a CIDR network such as 192.0.2.0/24 (no host bits set)")]),
    (["192.0.2.0/24", "0.0.0.0/7"], False, [(
        "serving.firewall_clients[1]", "/7 opens every tier's API and metrics ports (Triton's have no authentication) "
        "to 33554432 addresses; narrow it, or set serving.firewall_clients_any: true to mean it")]),
    (["2000::/15"], False, [(
        "serving.firewall_clients[0]", "/15 opens every tier's API and metrics ports (Triton's have no "
        f"authentication) to {2 ** 113} addresses; narrow it, or set serving.firewall_clients_any: true to mean it")]),
    (["0.0.0.0/0"], True, []),
])
def test_firewall_clients(clients, anyway, found):
    s = spec(serving__firewall_clients=clients, serving__firewall_clients_any=anyway)
    assert list(rules.firewall(s)) == found


# --- mirror_trust, python_index_trust -------------------------------------------------------------------------
FP = "0123456789ABCDEF0123456789ABCDEF01234567"


@pytest.mark.parametrize(("url", "fingerprint", "message"), [
    ("https://mirror.example/nvidia/", None, None),
    ("file:///srv/mirror", None, None),
    ("http://mirror.example/nvidia", FP, None),
    ("http://mirror.example/nvidia", None, "a plain-http mirror needs software.package_mirror_key_fingerprint "
     "(its signing key would come over the same unauthenticated connection)"),
    ("ftp://mirror.example/nvidia", None, "must be an http, https or file URL without whitespace"),
    ("https://mirror.example/a b", None, "must be an http, https or file URL without whitespace"),
    ("https://user:pw@mirror.example/nvidia", None, "must not carry a user or password (they would reach every "
     "node's apt sources and the job events); use apt's auth.conf from the vault"),
    ("https://mirror.example/nvidia/../ubuntu/", None, "must not contain a '.' or '..' path component"),
])
def test_package_mirror(url, fingerprint, message):
    s = spec(software={"package_mirror": url, "package_mirror_key_fingerprint": fingerprint})
    assert list(rules.mirror_trust(s)) == ([("software.package_mirror", message)] if message else [])


@pytest.mark.parametrize(("url", "plain", "message"), [
    ("https://pypi.example:8443/simple/", False, None),
    ("http://pypi.example/simple", True, None),
    ("http://pypi.example/simple", False, "a plain-http index needs software.python_index_plain_http: true (pip "
     "would otherwise ignore it, and nothing authenticates its packages)"),
    ("https://u:p@pypi.example/simple", False, "must be an http(s) URL without credentials, query or whitespace"),
    ("https://pypi.example/simple?x=1", False, "must be an http(s) URL without credentials, query or whitespace"),
])
def test_python_index(url, plain, message):
    s = spec(software={"python_index": url, "python_index_plain_http": plain})
    assert list(rules.python_index_trust(s)) == ([("software.python_index", message)] if message else [])


# --- ranges ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("over", "found"), [
    ({"certification__nccl": {"min_bytes": 1024, "max_bytes": 1024}}, []),
    ({"certification__nccl": {"min_bytes": 1025, "max_bytes": 1024}},
     [("certification.nccl.min_bytes", "1025 is more than max_bytes (1024): the sweep would measure nothing")]),
    ({"certification__fabric": {"min_bytes": 2048, "pair_min_bytes": 1024, "max_bytes": 1024}},
     [("certification.fabric.min_bytes", "2048 is more than max_bytes (1024): the sweep would measure nothing")]),
    ({"certification__fabric": {"min_bytes": 1024, "pair_min_bytes": 4096, "max_bytes": 2048}},
     [("certification.fabric.pair_min_bytes", "4096 is more than max_bytes (2048): the sweep would measure nothing")]),
    ({"node_groups__0__nics__1__name": ".."}, [("node_groups[0].nics[1].name", "must not be '.' or '..'")]),
    ({"serving__tiers": [tier(lora_adapters=[{"name": "a", "path": "/l/a"}, {"name": ".", "path": "/l/b"}])]},
     [("serving.tiers[0].lora_adapters[1].name", "must not be '.' or '..'")]),
])
def test_ranges(over, found):
    assert list(rules.ranges(spec(**over))) == found
