"""Issue 32: every input a user can type, refused at validate with one line, never run, never echoed.

One table per input: cluster.yml, hosts.yml, group_vars/host_vars, the vault and its password file, the
environment, and the command line. Each row is a change to a valid inventory (and its environment) and the line
that must come out. The in-process rows go through the command line's guard around `cli.inventory`, the path
`invoke validate` and every stage take first; the command-line rows run the real `invoke`. Every row: exit 2,
the expected line on stderr, every line naming a file and key (or flag, or variable), no traceback, no file
written anywhere under the project, a few seconds at most, and no canary secret in the output.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

from gridready import cli
from gridready.exitcodes import ExitCode
from tests.unit.test_inventory_errors import CLUSTER, HOSTS, REPO, make_inventory

CANARY = "canary32Zq9Zq9Zq9Zq9"  # planted in every secret below; must never be printed
HF = "hf_" + "Cn32" * 9  # a Hugging Face token shape carrying the canary's role
REV = "0e9e39f249a16976918f6564b8830bc894c89659"
C = "inventories/acme/cluster.yml: "
H = "inventories/acme/hosts.yml: "
GV = "inventories/acme/group_vars/all/main.yml: "
VAULT = "inventories/acme/group_vars/all/vault.yml: "
PW = "GRIDREADY_VAULT_PASSWORD_FILE: (environment): "
G1 = H + "all.children.gpu_nodes.hosts.gpu01"
T0 = C + "serving.tiers[0]"

Setup = Callable[[Path, dict[str, str]], None]


# --- setups: each changes the valid inventory at `inv` and may set environment variables in `env` ----------------

def cl(mutate: Callable[[dict], object]) -> Setup:
    """Rewrite cluster.yml with `mutate` applied to the valid document."""
    def setup(inv: Path, env: dict[str, str]) -> None:
        doc = copy.deepcopy(CLUSTER)
        mutate(doc)
        (inv / "cluster.yml").write_text(yaml.safe_dump(doc))
    return setup


def at(path: str, value: object) -> Setup:
    """cluster.yml with `value` at the dotted `path` (numbers index lists; missing mappings are made)."""
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return cl(mutate)


def tier(**over: object) -> dict:
    base = copy.deepcopy(CLUSTER["serving"]["tiers"][0])
    base.update(tensor_parallel=1, pipeline_parallel=1)
    base.update(over)
    return base


def tiers(*many: dict, **serving: object) -> Setup:
    return cl(lambda d: d["serving"].update(tiers=list(many), **serving))


def raw(text: str) -> Setup:
    """cluster.yml: the valid document's YAML with `text` appended (or replaced, when text starts with '=')."""
    def setup(inv: Path, env: dict[str, str]) -> None:
        body = text[1:] if text.startswith("=") else yaml.safe_dump(CLUSTER) + text
        (inv / "cluster.yml").write_text(body)
    return setup


def hosts(text: str) -> Setup:
    def setup(inv: Path, env: dict[str, str]) -> None:
        (inv / "hosts.yml").write_text(text)
    return setup


def host_vars(**hvars: object) -> Setup:
    """hosts.yml with gpu01's variables."""
    doc = {"all": {"children": {"gpu_nodes": {"hosts": {"gpu01": hvars, "gpu02": {}}}}}}
    return hosts(yaml.safe_dump(doc))


def write(rel: str, data: str | bytes, mode: int | None = None) -> Setup:
    def setup(inv: Path, env: dict[str, str]) -> None:
        path = inv / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        if mode is not None:
            path.chmod(mode)
    return setup


def link(rel: str, target: str) -> Setup:
    def setup(inv: Path, env: dict[str, str]) -> None:
        path = inv / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    return setup


def fifo(rel: str) -> Setup:
    def setup(inv: Path, env: dict[str, str]) -> None:
        path = inv / rel
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    return setup


def env(**variables: str) -> Setup:
    def setup(inv: Path, env_: dict[str, str]) -> None:
        env_.update(variables)
    return setup


def both(*setups: Setup) -> Setup:
    def setup(inv: Path, env_: dict[str, str]) -> None:
        for one in setups:
            one(inv, env_)
    return setup


PASSWORD = f"pw-{CANARY}"


def password(content: str | None = PASSWORD, mode: int = 0o600, name: str = "vault-pass") -> Setup:
    """A password file beside the inventories (not in the project's inventory) named by the variable."""
    def setup(inv: Path, env_: dict[str, str]) -> None:
        path = inv.parent.parent / name
        if content is not None:
            path.write_text(content + "\n")
            path.chmod(mode)
        env_["GRIDREADY_VAULT_PASSWORD_FILE"] = str(path)
    return setup


def vault(text: str, pw: str = PASSWORD, truncate: int | None = None, rel: str = "group_vars/all/vault.yml"
          ) -> Setup:
    """An ansible-vault file of `text` encrypted with `pw` (vault id acme), optionally cut to `truncate` bytes."""
    def setup(inv: Path, env_: dict[str, str]) -> None:
        lib = VaultLib([("acme", VaultSecret(pw.encode()))])
        blob = lib.encrypt(text, lib.secrets[0][1], vault_id="acme")
        path = inv / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob[:truncate] if truncate else blob)
    return setup


def _inline_vault(pw: str) -> Setup:
    """group_vars/all/main.yml with an inline `!vault |` value encrypted with `pw`."""
    def setup(inv: Path, env_: dict[str, str]) -> None:
        lib = VaultLib([("acme", VaultSecret(pw.encode()))])
        blob = lib.encrypt(f"db-{CANARY}", lib.secrets[0][1], vault_id="acme").decode()
        text = "db_pass: !vault |\n" + "".join(f"  {line}\n" for line in blob.splitlines())
        write("group_vars/all/main.yml", text)(inv, env_)
    return setup


GOOD_VAULT = f"vault_gridready_vllm_api_key: key-{CANARY}\nvault_db_password: db-{CANARY}\n"
REFERENCE = write("group_vars/all/main.yml", "db_password: '{{ vault_db_password }}'\n")

# --- the tables: (id, setup, expected start of one line) ------------------------------------------------------------

YAML_TYPOS = [
    ("cluster-unquoted-template", raw("description: {{ name }}\n"), C + "line "),
    ("cluster-unquoted-template-in-list", at("serving.firewall_clients", "X"), None),  # replaced below
    ("cluster-complex-key", raw("? [a, b]\n: 1\n"), C + "line "),
    ("cluster-tab-indent", raw("=customer: acme\n\tnode_groups: []\n"), C + "line "),
    ("cluster-two-documents", raw("=customer: acme\n---\ncustomer: b\n"), C + "line 2 column 1: YAML syntax error"),
    ("cluster-list", raw("=- customer: acme\n"), C + "(top level): must be a mapping"),
    ("cluster-scalar", raw("=acme\n"), C + "(top level): must be a mapping"),
    ("cluster-empty", raw("="), C + "(top level): must be a mapping"),
    ("cluster-only-comment", raw("=# nothing\n"), C + "(top level): must be a mapping"),
    ("cluster-null-key", raw("~: 1\n"), C + "None: Keys should be strings"),
    ("cluster-python-tag", raw("x: !!python/object/apply:os.system ['id']\n"), C + "line "),
    ("cluster-unknown-tag", raw("x: !Ref other\n"), C + "line "),
    ("cluster-mapping-value-on-scalar", raw("=customer: acme: x\n"), C + "line "),
    ("hosts-unquoted-template", hosts(HOSTS.replace("gpu01: {}", "gpu01:\n          ansible_host: {{ ip }}")),
     H + "line "),
    ("hosts-complex-key", hosts("all:\n  ? [gpu01]\n  : {}\n"), H + "line "),
    ("hosts-list", hosts("- gpu01\n"), H + "(top level): must be a mapping of groups"),
    ("hosts-scalar", hosts("gpu01\n"), H + "(top level): must be a mapping of groups"),
    ("group-vars-unquoted-template", write("group_vars/all/main.yml", "x: {{ y }}\n"), GV + "line "),
    ("host-vars-complex-key", write("host_vars/gpu01.yml", "? {a: 1}\n: 2\n"),
     "inventories/acme/host_vars/gpu01.yml: line "),
]
YAML_TYPOS[1] = ("cluster-unquoted-template-in-list", raw("extra: [a, {{ b }}]\n"), C + "line ")
# an unknown key names the key it most resembles (difflib), where one is close
YAML_TYPOS += [
    ("cluster-key-typo-in-tier", at("serving.tiers.0.tensor_paralel", 4),
     C + "serving.tiers[0].tensor_paralel: Extra inputs are not permitted (unknown key; did you mean "
         "'tensor_parallel'?)"),
    ("cluster-key-typo-top", at("node_group", []), C + "node_group: Extra inputs are not permitted (unknown key; "
                                                      "did you mean 'node_groups'?)"),
]

TEMPLATES = [
    ("template-description", at("description", "{{ lookup('pipe', 'id') }}"),
     C + "description: must not hold a template"),
    ("template-statement", at("description", "{% for x in y %}"), C + "description: must not hold a template"),
    ("template-comment", at("description", "{# x #}"), C + "description: must not hold a template"),
    ("template-engine-arg-value", at("serving.tiers.0.extra_engine_args", {"tokenizer": "{{ lookup('env','HOME') }}"}),
     T0 + ".extra_engine_args.tokenizer: must not hold a template"),
    ("template-served-name", at("serving.tiers.0.served_name", "{{x}}"), T0 + ".served_name: must not"),
    ("template-kubeconfig", cl(lambda d: d["serving"].update(target="kubernetes", kubeconfig="{{ q('pipe','id') }}")),
     C + "serving.kubeconfig: must not hold a template"),
    ("template-k8s-image", at("serving.kubernetes", {"ray_image": "ray:{{x}}"}), C + "serving.kubernetes.ray_image"),
    ("template-lora-path", at("serving.tiers.0.lora_adapters", [{"name": "a", "path": "/srv/{{x}}"}]),
     T0 + ".lora_adapters[0].path"),
    ("template-driver-branch", at("software", {"doca_ofed": "{{ lookup('file','/etc/shadow') }}"}),
     C + "software.doca_ofed: must not hold a template"),
    ("template-router-gateway-route", cl(lambda d: d["serving"].update(router={"routes": [
        {"model": "llama", "targets": [{"tier": "llama"}], "fallback": ["{{x}}"]}]})),
     C + "serving.router.routes[0].fallback[0]"),
    ("template-gpu-label", at("serving.kubernetes", {"gpu_product_label": "{{ x }}"}),
     C + "serving.kubernetes.gpu_product_label: must not hold a template"),
]

NEWLINES = [
    ("newline-host-name", hosts(HOSTS.replace("gpu01: {}", "\"gpu01\\n\": {}")), G1 + "\\n"),
    ("newline-customer", at("customer", "acme\n"), C + "customer: String should match pattern"),
    ("newline-node-group", at("node_groups.0.name", "gpu_nodes\n"), C + "node_groups[0].name: String should match"),
    ("newline-tier-name", at("serving.tiers.0.name", "llama\n"), T0 + ".name: String should match"),
    ("newline-engine-arg-name", at("serving.tiers.0.extra_engine_args", {"swap_space\n": 4}),
     T0 + ".extra_engine_args.swap_space\\n: must be a vLLM engine argument name"),
    ("newline-revision", at("serving.tiers.0.model.revision", REV + "\n"), T0 + ".model.revision"),
    ("newline-mirror", at("software", {"package_mirror": "https://m.example/cuda\n"}), C + "software.package_mirror"),
    ("newline-firewall-client", at("serving.firewall_clients", ["10.0.0.0/8\n"]), C + "serving.firewall_clients[0]"),
    ("newline-ansible-host", host_vars(ansible_host="10.0.0.1\n"), G1 + ".ansible_host"),
    ("newline-ifname", at("serving.socket_ifname", "eth0\n"), C + "serving.socket_ifname"),
    ("newline-k8s-namespace", at("serving.kubernetes", {"namespace": "serving\n"}), C + "serving.kubernetes.namespace"),
    ("newline-lora-name", at("serving.tiers.0.lora_adapters", [{"name": "sql\n", "path": "/srv/sql"}]),
     T0 + ".lora_adapters[0].name"),
    ("unicode-line-separator", at("description", "a\u2028ExecStart=/bin/sh"), C + "description: must be one line"),
]

SECRETS = [
    ("become-pass", host_vars(ansible_become_pass=CANARY), G1 + ".ansible_become_pass"),
    ("ssh-pass", write("host_vars/gpu01.yml", f"ansible_ssh_pass: {CANARY}\n"),
     "inventories/acme/host_vars/gpu01.yml: ansible_ssh_pass: looks like a secret"),
    ("group-become-pass", write("group_vars/all/main.yml", f"ansible_become_pass: {CANARY}\n"),
     GV + "ansible_become_pass: looks like a secret"),
    ("sudo-pass-hosts-vars", hosts(HOSTS.replace("all:\n", f"all:\n  vars: {{ansible_sudo_pass: {CANARY}}}\n")),
     H + "all.vars.ansible_sudo_pass: looks like a secret"),
    ("mirror-user-password", at("software", {"package_mirror": f"https://user:{CANARY}@m.example/cuda/"}),
     C + "software.package_mirror: a URL with a user:password part"),
    ("mirror-token-user", at("software", {"package_mirror": f"https://{CANARY}@m.example/cuda/"}),
     C + "software.package_mirror: must not carry a user or password"),
    ("proxy-url-credentials", write("group_vars/all/main.yml", f"http_proxy: http://u:{CANARY}@proxy:3128\n"),
     GV + "http_proxy: a URL with a user:password part"),
    ("credential-key-group-vars", write("group_vars/all/main.yml", f"{HF}: yes\n"),
     GV + "<redacted>: a key has the shape of a credential"),
    ("credential-key-engine-args", at("serving.tiers.0.extra_engine_args", {HF: 1}),
     T0 + ".extra_engine_args.<redacted>: a key has the shape"),
    ("credential-key-cluster-top", at(HF, 1), C + "<redacted>: a key has the shape"),
    ("credential-host-name", hosts(HOSTS.replace("gpu01: {}", f"{HF}: {{}}")), H + "all.children.gpu_nodes.hosts."),
    ("aws-key-description", at("description", "AKIAABCDEFGHIJKLMNOP"),
     C + "description: has the shape of a credential"),
    ("openai-key-served-name", at("serving.tiers.0.served_name", "sk-" + CANARY + "abcdefgh"),
     T0 + ".served_name: has the shape"),
    ("github-token-host-var", host_vars(note="ghp_" + "a1B2" * 9 + CANARY), G1 + ".note"),
    ("plain-vault-var", write("group_vars/all/main.yml", f"vault_gridready_router_master_key_password: {CANARY}\n"),
     GV + "vault_gridready_router_master_key_password: looks like a secret"),
    ("engine-password-flag-value", at("serving.tiers.0.extra_engine_args", {"db_password": CANARY}),
     T0 + ".extra_engine_args.db_password: looks like a secret"),
]

VAULTS = [
    ("vault-wrong-password", both(vault(GOOD_VAULT, pw="another"), password()), VAULT + "(vault): cannot be decrypted"),
    ("vault-truncated", both(vault(GOOD_VAULT, truncate=120), password()), VAULT + "(vault): cannot be decrypted"),
    ("vault-header-only", both(write("group_vars/all/vault.yml", "$ANSIBLE_VAULT;1.1;AES256\n"), password()),
     VAULT + "(vault): cannot be decrypted"),
    ("vault-not-hex", both(write("group_vars/all/vault.yml", "$ANSIBLE_VAULT;1.1;AES256\nzzzz\n"), password()),
     VAULT + "(vault): cannot be decrypted"),
    ("vault-password-unset", vault(GOOD_VAULT), PW + "not set; inventories/acme/group_vars/all/vault.yml"),
    ("vault-password-file-missing", both(vault(GOOD_VAULT), password(None)), PW + "cannot read"),
    ("vault-password-file-empty", both(vault(GOOD_VAULT), password("")), PW),
    ("vault-password-file-dir", both(vault(GOOD_VAULT), env(GRIDREADY_VAULT_PASSWORD_FILE="/tmp")),
     PW + "/tmp is not a regular file"),
    ("vault-password-file-device", env(GRIDREADY_VAULT_PASSWORD_FILE="/dev/zero"), PW + "/dev/zero is not a regular"),
    ("vault-password-file-executable", both(vault(GOOD_VAULT), password(mode=0o700)), PW),
    ("vault-password-path-space", both(vault(GOOD_VAULT), password(name="vault pass")),
     PW + "the path may hold only"),
    ("vault-password-file-huge", both(vault(GOOD_VAULT), password("x" * 10000)), PW),
    ("vault-not-a-mapping", both(vault(f"- {CANARY}\n"), password()), VAULT + "(top level): must be a mapping"),
    ("vault-not-yaml", both(vault(f"a: [{CANARY}\n"), password()), VAULT + "(vault): the decrypted text is not YAML"),
    ("vault-reference-missing", both(vault(f"vault_other: {CANARY}\n"), password(), REFERENCE),
     GV + "db_password: vault_db_password is referenced but no vault file defines it"),
    ("vault-reference-without-vault", REFERENCE, GV + "db_password: vault_db_password is referenced"),
    ("vault-reference-empty", both(vault("vault_db_password: ''\n"), password(), REFERENCE),
     VAULT + "vault_db_password: must be a non-empty string"),
    ("vault-reference-not-string", both(vault("vault_db_password: [1]\n"), password(), REFERENCE),
     VAULT + "vault_db_password: must be a non-empty string"),
    ("inline-vault-wrong-password", both(password(), _inline_vault("another")),
     GV + "db_pass: (!vault): cannot be decrypted"),
    ("inline-vault-damaged", both(password(), write("group_vars/all/main.yml",
                                                   "db_pass: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  0102\n")),
     GV + "db_pass: (!vault): cannot be decrypted"),
    ("inline-vault-no-password", _inline_vault(PASSWORD), PW + "not set; inventories/acme/group_vars/all/main.yml"),
    ("vault-wrong-password-host-vars", both(vault(GOOD_VAULT, pw="x", rel="host_vars/gpu01/vault.yml"), password()),
     "inventories/acme/host_vars/gpu01/vault.yml: (vault): cannot be decrypted"),
]

SERVE_TIME = [
    ("placement-three-half-node-tiers", tiers(tier(name="aa", tensor_parallel=4), tier(name="bb", tensor_parallel=4,
                                                                                      port=8001),
                                               tier(name="cc", tensor_parallel=4, port=8002)),
     C + "serving.tiers[2]: needs 1 whole node(s) of gpu_nodes; 0 left of 2"),
    # derive's PP is the nodes the weights need: a 671B model in bf16 takes both H200 nodes, none is left
    ("placement-derive-first", tiers(tier(name="aa", tensor_parallel=8, pipeline_parallel="derive",
                                          model={"hf_id": "acme/Big-671B-Base", "revision": REV}),
                                     tier(name="bb", tensor_parallel=8, port=8001)),
     C + "serving.tiers[1]: needs 1 whole node(s) of gpu_nodes; 0 left"),
    ("placement-replicas", tiers(tier(name="aa", tensor_parallel=2, replicas=3)),
     T0 + ": tensor_parallel x pipeline_parallel = 2 x 1 needs 1 node(s) per replica x 3"),
    ("route-unknown-tier", cl(lambda d: d["serving"].update(router={"routes": [
        {"model": "x", "targets": [{"tier": "nosuch"}]}]})), C + "serving.router.routes[0].targets[0].tier: no tier"),
    ("route-unknown-fallback", cl(lambda d: d["serving"].update(router={"routes": [
        {"model": "x", "targets": [{"tier": "llama"}], "fallback": ["gone"]}]})),
     C + "serving.router.routes[0].fallback[0]: no tier named 'gone'"),
    ("router-port-is-tier-port", cl(lambda d: d["serving"].update(router={
        "enabled": True, "port": 8000, "keys": [{"name": "ci", "vault_var": "vault_ci_key"}]})),
     C + "serving.router.port: 8000 is already serving.tiers[0].port"),
    ("router-port-is-dashboard", cl(lambda d: d["serving"].update(router={
        "enabled": True, "port": 8265, "keys": [{"name": "ci", "vault_var": "vault_ci_key"}]})),
     C + "serving.router.port: 8265 is the Ray dashboard's port"),
    ("haproxy-tpm-limit", cl(lambda d: d["serving"].update(router={
        "enabled": True, "proxy": "haproxy", "keys": [{"name": "ci", "vault_var": "vault_ci_key", "tpm_limit": 9}]})),
     C + "serving.router.keys[0].tpm_limit: proxy haproxy limits requests, not tokens"),
    ("haproxy-route-renames-model", cl(lambda d: d["serving"].update(router={
        "enabled": True, "proxy": "haproxy", "keys": [{"name": "ci", "vault_var": "vault_ci_key"}],
        "routes": [{"model": "chat", "targets": [{"tier": "llama"}]}]})),
     C + "serving.router.routes[0].model: chat is not what tier llama serves"),
    ("router-key-is-engine-key", cl(lambda d: d["serving"].update(router={
        "enabled": True, "keys": [{"name": "ci", "vault_var": "vault_gridready_vllm_api_key"}]})),
     C + "serving.router.keys[0].vault_var: vault_gridready_vllm_api_key is the engines' API key"),
    ("router-key-is-master-key", cl(lambda d: d["serving"].update(router={
        "enabled": True, "keys": [{"name": "ci", "vault_var": "vault_gridready_router_master_key"}]})),
     C + "serving.router.keys[0].vault_var"),
    ("router-keys-share-variable", cl(lambda d: d["serving"].update(router={"enabled": True, "keys": [
        {"name": "ci", "vault_var": "vault_k"}, {"name": "cd", "vault_var": "vault_k"}]})),
     C + "serving.router.keys[1].vault_var: already the variable of key 'ci'"),
    ("router-keys-share-name", cl(lambda d: d["serving"].update(router={"enabled": True, "keys": [
        {"name": "ci", "vault_var": "vault_a"}, {"name": "ci", "vault_var": "vault_b"}]})),
     C + "serving.router.keys: duplicate key name 'ci'"),
    ("ray-port-on-dashboard", at("serving.ray_port", 8265), C + "serving.ray_port: 8265 is the Ray dashboard's port"),
    ("ray-port-in-worker-range", at("serving.ray_port", 11500), C + "serving.ray_port: 11500 is in Ray's worker port"),
    ("ray-port-on-client", at("serving.ray_port", 10001), C + "serving.ray_port: 10001 is the Ray client"),
    ("served-name-slash", at("serving.tiers.0.served_name", "meta-llama/Llama"),
     T0 + ".served_name: must be a model name without '/'"),
    ("instance-group-beyond-gpus", tiers({
        "name": "embed", "engine": "triton-embedding", "served_name": "bge", "tensor_parallel": 1,
        "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
        "embedding": {"model_file": "onnx/model.onnx", "instance_groups": [{"gpus": [0, 8]}],
                      "inputs": [{"name": "ids", "data_type": "TYPE_INT64", "dims": [-1]}],
                      "outputs": [{"name": "out", "data_type": "TYPE_FP32", "dims": [-1, 384]}]}}),
     T0 + ".embedding.instance_groups[0].gpus: GPU index 8 is beyond the 8 GPUs"),
    ("ansible-host-bad-ip", host_vars(ansible_host="999.1.1.1"), G1 + ".ansible_host"),
    ("ansible-host-underscore", host_vars(ansible_host="bad_host.example"), G1 + ""),
    ("ansible-host-space", host_vars(ansible_host="10.0.0.1 -oProxyCommand=id"), H + "all.children.gpu_nodes"),
    ("ansible-host-template", host_vars(ansible_host="{{ lookup('pipe','id') }}"), H + "all.children.gpu_nodes"),
    ("ansible-host-number", host_vars(ansible_host=10), G1 + ".ansible_host"),
    ("host-two-addresses", hosts("all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu01: {ansible_host: "
                                 "10.0.0.1}\n        gpu02: {}\n    rack1:\n      hosts:\n        gpu01: "
                                 "{ansible_host: 10.0.0.9}\n"),
     H + "all.children.rack1.hosts.gpu01.ansible_host: the host already has another address"),
    ("two-hosts-one-address", hosts(HOSTS.replace("gpu01: {}", "gpu01: {ansible_host: 10.0.0.1}")
                                    .replace("gpu02: {}", "gpu02: {ansible_host: 10.0.0.1}")),
     H + "gpu02.ansible_host: the same address and port as host 'gpu01'"),
    ("ansible-port-text", host_vars(ansible_port="ssh"), G1 + ".ansible_port"),
    ("ansible-port-range", host_vars(ansible_port=70000), G1 + ".ansible_port"),
    ("ansible-user-option", host_vars(ansible_user="-oProxyCommand=id"), G1 + ""),
    ("ansible-user-group-vars", hosts(HOSTS.replace("all:\n", "all:\n  vars: {ansible_user: 'root;id'}\n")),
     H + "all.vars.ansible_user: must be a user name"),
    ("host-vars-file-ansible-host", write("host_vars/gpu01.yml", "ansible_host: -oProxyCommand=id\n"),
     "inventories/acme/host_vars/gpu01.yml: ansible_host: must be an IP address"),
    ("ssh-proxy-command", host_vars(ansible_ssh_common_args="-o ProxyCommand='sh -c id'"),
     G1 + ".ansible_ssh_common_args: must not set ProxyCommand"),
    ("ssh-local-command-group-vars", write("group_vars/all/main.yml",
                                           "ansible_ssh_extra_args: -oPermitLocalCommand=yes -oLocalCommand=id\n"),
     GV + "ansible_ssh_extra_args: must not set PermitLocalCommand"),
    ("ssh-args-not-string", host_vars(ansible_ssh_common_args=["-o", "x"]),
     G1 + ".ansible_ssh_common_args: must be a string"),
    ("xid-allow-negative", at("certification.xid_allow", [-13]), C + "certification.xid_allow[0]"),
    ("k8s-shm-not-quantity", at("serving.kubernetes", {"shm_size": "64GB"}), C + "serving.kubernetes.shm_size"),
    ("k8s-cpu-not-quantity", at("serving.kubernetes", {"worker_cpu": "lots"}), C + "serving.kubernetes.worker_cpu"),
    ("k8s-memory-negative", at("serving.kubernetes", {"worker_memory": "-5Gi"}),
     C + "serving.kubernetes.worker_memory"),
    ("k8s-ephemeral-space", at("serving.kubernetes", {"ephemeral_storage": "50 Gi"}),
     C + "serving.kubernetes.ephemeral_storage"),
]


def _doc_with(path: str, value: object) -> str:
    """cluster.yml text with `value` (YAML text such as .nan) at `path`."""
    doc = copy.deepcopy(CLUSTER)
    node = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[last] = "@@VALUE@@"
    return "=" + yaml.safe_dump(doc).replace("'@@VALUE@@'", str(value))


LIMITS = [
    ("floor-nan", raw(_doc_with("certification.floors.bf16_gemm_tflops", ".nan")),
     C + "certification.floors.bf16_gemm_tflops: Input should be a finite number"),
    ("floor-inf", raw(_doc_with("certification.floors.hbm_copy_tbps", ".inf")),
     C + "certification.floors.hbm_copy_tbps: Input should be a finite number"),
    ("floor-negative-collective", at("certification.floors", {"nccl_collectives_gbps": {"alltoall": -1}}),
     C + "certification.floors.nccl_collectives_gbps.alltoall"),
    ("gpu-memory-nan", raw(_doc_with("serving.tiers.0.gpu_memory_utilization", ".nan")),
     T0 + ".gpu_memory_utilization: Input should be a finite number"),
    ("goodput-percent", at("serving.tiers.0.slo", {"goodput_min": 90}), T0 + ".slo.goodput_min"),
    ("slo-ttft-nan", raw(_doc_with("serving.tiers.0.slo", "{ttft_ms_p99: .nan}")), T0 + ".slo.ttft_ms_p99"),
    ("slo-negative", at("serving.tiers.0.slo", {"e2e_ms_p99": -1}), T0 + ".slo.e2e_ms_p99"),
    ("multinode-fraction-percent", at("certification.nccl", {"multinode_fraction_of_nic": 92}),
     C + "certification.nccl.multinode_fraction_of_nic: Input should be less than or equal to 1.2"),
    ("fabric-floor-fraction-percent", at("certification.fabric", {"floor_fraction": {"ring": 92}}),
     C + "certification.fabric.floor_fraction.ring: Input should be less than or equal to 1.2"),
    ("fabric-floor-fraction-unknown-algo", at("certification.fabric", {"floor_fraction": {"rign": 0.9}}),
     C + "certification.fabric.floor_fraction.rign"),
    ("fabric-floor-gbps-negative", at("certification.fabric", {"floor_gbps": {"ring": -3}}),
     C + "certification.fabric.floor_gbps.ring"),
    ("hca-fraction-percent", at("certification.fabric", {"hca_bw_fraction": 90}), C + "certification.fabric.hca_bw"),
    ("tie-margin-percent", at("serving.decision", {"tie_margin": 2}), C + "serving.decision.tie_margin"),
    ("gpu-temp-absurd", at("certification.floors", {"max_gpu_temp_c": 500}), C + "certification.floors"),
    ("mad-threshold-inf", raw(_doc_with("certification.outlier_mad_threshold", ".inf")),
     C + "certification.outlier_mad_threshold"),
    ("engine-arg-nan", raw(_doc_with("serving.tiers.0.extra_engine_args", "{swap_space: .nan}")),
     T0 + ".extra_engine_args.swap_space"),
    ("nvls-without-nvswitch", cl(lambda d: (d["node_groups"][0].update(gpus_per_node=4),
                                            d["serving"]["tiers"][0].update(tensor_parallel=4),
                                            d["certification"].update(nccl={"algo": "nvls"}))),
     C + "certification.nccl.algo: nvls needs NVSwitch, which gpu_nodes lacks"),
    ("fabric-nvls-without-nvswitch", cl(lambda d: (d["node_groups"][0].update(gpus_per_node=4),
                                                   d["serving"]["tiers"][0].update(tensor_parallel=4),
                                                   d["certification"].update(fabric={"algo": "nvls"}))),
     C + "certification.fabric.algo: nvls needs NVSwitch"),
    ("duplicate-netdev", cl(lambda d: [n.update(netdev="ibp12s0") for n in d["node_groups"][0]["nics"][:2]]),
     C + "node_groups[0]: duplicate NIC netdevs: ibp12s0"),
    ("nccl-sweep-inverted", at("certification.nccl", {"min_bytes": 1 << 33, "max_bytes": 1 << 30}),
     C + "certification.nccl.min_bytes: 8589934592 is more than max_bytes"),
    ("fabric-pair-sweep-inverted", at("certification.fabric", {"pair_min_bytes": 1 << 34}),
     C + "certification.fabric.pair_min_bytes"),
    ("validity-nan", raw(_doc_with("certification.validity_hours", ".nan")), C + "certification.validity_hours"),
]

PATHS = [
    # what a plain `invoke` in the inventory's folder would import or read as its own configuration
    ("inventory-tasks-module", write("tasks.py", "import os\n"), "inventories/acme/tasks.py: (file): an inventory "
                                                                  "holds data only; invoke would load this module"),
    ("inventory-tasks-package", write("tasks/__init__.py", ""), "inventories/acme/tasks: (file): an inventory"),
    ("inventory-invoke-py", write("invoke.py", "x = 1\n"), "inventories/acme/invoke.py: (file): an inventory"),
    ("inventory-invoke-yml", write("invoke.yml", "tasks: {}\n"), "inventories/acme/invoke.yml: (file): an inventory "
                                                                  "holds data only; invoke would load this "
                                                                  "configuration"),
    ("revision-branch", at("serving.tiers.0.model.revision", "main"), T0 + ".model.revision: must be a "
                                                                         "pinned commit"),
    ("revision-tag", at("serving.tiers.0.model.revision", "v1.0"), T0 + ".model.revision"),
    ("revision-traversal", at("serving.tiers.0.model.revision", REV + "/../../x"), T0 + ".model.revision"),
    ("revision-short-sha", at("serving.tiers.0.model.revision", "0e9e39f"), T0 + ".model.revision"),
    ("lora-traversal", at("serving.tiers.0.lora_adapters", [{"name": "a", "path": "/srv/adapters/../../etc"}]),
     T0 + ".lora_adapters[0].path: must not contain a '.' or '..'"),
    ("lora-dot", at("serving.tiers.0.lora_adapters", [{"name": "a", "path": "/srv/./a"}]),
     T0 + ".lora_adapters[0].path"),
    ("local-path-traversal", at("serving.tiers.0.model", {"local_path": "/models/../../etc/shadow"}),
     T0 + ".model.local_path: must not contain"),
    ("model-file-traversal", tiers({
        "name": "embed", "engine": "triton-embedding", "served_name": "bge", "tensor_parallel": 1,
        "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
        "embedding": {"model_file": "onnx/../../../etc/passwd",
                      "inputs": [{"name": "ids", "data_type": "TYPE_INT64", "dims": [-1]}],
                      "outputs": [{"name": "out", "data_type": "TYPE_FP32", "dims": [-1, 384]}]}}),
     T0 + ".embedding.model_file: must not contain"),
    ("model-cache-traversal", at("serving.kubernetes", {"model_cache_path": "/var/lib/../../etc"}),
     C + "serving.kubernetes.model_cache_path: must not contain"),
    ("engine-arg-path-traversal", at("serving.tiers.0.extra_engine_args", {"chat_template": "/srv/../etc/passwd"}),
     T0 + ".extra_engine_args.chat_template: must not contain"),
    ("mirror-path-traversal", at("software", {"package_mirror": "https://m.example/cuda/../../x"}),
     C + "software.package_mirror: must not contain"),
    ("nic-name-dot-dot", at("node_groups.0.nics.0.name", ".."), C + "node_groups[0].nics[0].name: must not be"),
    ("lora-name-dot-dot", at("serving.tiers.0.lora_adapters", [{"name": "..", "path": "/srv/a"}]),
     T0 + ".lora_adapters[0].name: must not be '.' or '..'"),
    ("group-name-template", hosts(HOSTS.replace("all:\n  children:\n", "all:\n  children:\n    '{{ x }}': {}\n")),
     H + "all.children.{{ x }}: not a valid group name"),
    ("group-name-space", hosts(HOSTS.replace("all:\n  children:\n", "all:\n  children:\n    'rack 1': {}\n")),
     H + "all.children.rack 1: not a valid group name"),
    ("group-vars-link-out", link("group_vars/all/main.yml", "/etc/hostname"),
     GV + "(file): a symbolic link out of the inventory directory"),
    ("group-vars-dir-link-root", link("group_vars/gpu_nodes", "/"),
     "inventories/acme/group_vars/gpu_nodes: (file): a symbolic link out of the inventory directory"),
    ("host-vars-link-other-customer", link("host_vars/gpu01.yml", "../../../other/secrets.yml"),
     "inventories/acme/host_vars/gpu01.yml: (file): a symbolic link out of the inventory directory"),
    ("hosts-fifo-link", both(fifo("hosts.yml")), H + "(file): not a regular file"),
    ("cluster-link-loop", link("cluster.yml", "cluster.yml"), C + "(file): cannot read"),
]

FIREWALL = [
    ("firewall-everyone", at("serving.firewall_clients", ["0.0.0.0/0"]),
     C + "serving.firewall_clients[0]: /0 opens every tier's API and metrics ports"),
    ("firewall-everyone-v6", at("serving.firewall_clients", ["::/0"]), C + "serving.firewall_clients[0]: /0 opens"),
    ("firewall-half-internet", at("serving.firewall_clients", ["0.0.0.0/1", "128.0.0.0/1"]),
     C + "serving.firewall_clients[0]: /1 opens"),
    ("firewall-slash-4", at("serving.firewall_clients", ["10.0.0.0/8", "16.0.0.0/4"]),
     C + "serving.firewall_clients[1]: /4 opens"),
    ("firewall-v6-global", at("serving.firewall_clients", ["2000::/3"]), C + "serving.firewall_clients[0]: /3 opens"),
]

OVERRIDES = [(f"engine-arg-{name}", at("serving.tiers.0.extra_engine_args", {name: value}),
              C + f"serving.tiers[0].extra_engine_args.{name}: gridready sets this argument itself")
             for name, value in [("tensor_parallel_size", 4), ("pipeline_parallel_size", 1), ("port", 9000),
                                 ("host", "0.0.0.0"), ("model", "other/model"), ("served_model_name", "x"),
                                 ("trust_remote_code", True), ("revision", "main"), ("download_dir", "/tmp"),
                                 ("max_model_len", 131072), ("distributed_executor_backend", "mp"),
                                 ("data_parallel_size", 2), ("gpu_memory_utilization", 0.99),
                                 ("enable_lora", True), ("api_key", "{{ vault_x }}")]] + [
    # SGLang's name: vLLM 0.33.0's parser has no --tp-size (nor an option it begins), so its start would fail
    ("engine-arg-tp_size", at("serving.tiers.0.extra_engine_args", {"tp_size": 8}),
     C + "serving.tiers[0].extra_engine_args.tp_size: --tp-size is not an option of vLLM 0.33.0")]

ENVIRONMENT = [
    ("lock-wait-nan", env(GRIDREADY_LOCK_WAIT_S="nan"), "GRIDREADY_LOCK_WAIT_S: (environment): must be a number"),
    ("lock-wait-inf", env(GRIDREADY_LOCK_WAIT_S="inf"), "GRIDREADY_LOCK_WAIT_S: (environment)"),
    ("lock-wait-negative", env(GRIDREADY_LOCK_WAIT_S="-1"), "GRIDREADY_LOCK_WAIT_S: (environment)"),
    ("lock-wait-text", env(GRIDREADY_LOCK_WAIT_S="soon"), "GRIDREADY_LOCK_WAIT_S: (environment)"),
    ("lock-wait-years", env(GRIDREADY_LOCK_WAIT_S="1e12"), "GRIDREADY_LOCK_WAIT_S: (environment)"),
    ("run-id-newline", env(GRIDREADY_RUN_ID="run1\n"), "GRIDREADY_RUN_ID: (run id): must match"),
    ("run-id-traversal", env(GRIDREADY_RUN_ID="../../acme"), "GRIDREADY_RUN_ID: (run id)"),
    ("run-id-slash", env(GRIDREADY_RUN_ID="a/b"), "GRIDREADY_RUN_ID: (run id)"),
    ("run-id-dot", env(GRIDREADY_RUN_ID=".hidden"), "GRIDREADY_RUN_ID: (run id)"),
    ("run-id-too-long", env(GRIDREADY_RUN_ID="r" * 65), "GRIDREADY_RUN_ID: (run id)"),
    ("vault-password-env-device", env(GRIDREADY_VAULT_PASSWORD_FILE="/dev/urandom"), PW + "/dev/urandom is not"),
    ("vault-password-env-missing", env(GRIDREADY_VAULT_PASSWORD_FILE="/nonexistent/pass"), PW + "cannot read"),
    ("artifacts-is-a-file", env(GRIDREADY_ARTIFACTS="/etc/hostname"), "GRIDREADY_ARTIFACTS: (environment)"),
    ("artifacts-is-a-device", env(GRIDREADY_ARTIFACTS="/dev/null"), "GRIDREADY_ARTIFACTS: (environment)"),
    ("state-is-a-file", env(GRIDREADY_STATE="/etc/hostname"), "GRIDREADY_STATE: (environment)"),
]

IN_PROCESS = [row for row in [*YAML_TYPOS, *TEMPLATES, *NEWLINES, *SECRETS, *VAULTS, *SERVE_TIME, *LIMITS, *PATHS,
                              *FIREWALL, *OVERRIDES, *ENVIRONMENT]]

SCRUBBED = ("GRIDREADY_", "INVOKE_", "ANSIBLE_VAULT")


def _files(root: Path) -> set[tuple[str, float]]:
    return {(str(p), p.lstat().st_mtime) for p in root.rglob("*")}


def _lines_ok(err: str, expected: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert any(ln.startswith(f"error: {expected}") for ln in lines), err
    assert all(ln.startswith("error: ") and ": " in ln.removeprefix("error: ") for ln in lines), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert CANARY not in err and HF not in err, err


def _in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: Setup) -> None:
    """An inventory in tmp_path given `setup`, the environment it asks for (none of the caller's GRIDREADY_* or
    vault settings), the working directory there and cli's caches empty: one fresh command line."""
    for name in [n for n in os.environ if n.startswith(SCRUBBED)]:
        monkeypatch.delenv(name)
    inv = make_inventory(tmp_path)
    variables: dict[str, str] = {}
    setup(inv, variables)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    cli.inventory.cache_clear()
    cli._raw_run_id.cache_clear()


@pytest.mark.parametrize(("case", "setup", "expected"), IN_PROCESS, ids=[r[0] for r in IN_PROCESS])
def test_every_bad_input_is_exit_2_one_line_nothing_written(tmp_path, monkeypatch, capsys, case, setup, expected):
    """`invoke validate`'s path in process (cli.guarded around cli.inventory)."""
    _in_process(tmp_path, monkeypatch, setup)
    monkeypatch.setenv("GRIDREADY_HOME", str(tmp_path))
    before = _files(tmp_path)
    started = time.monotonic()
    with pytest.raises(cli.CommandExit) as exit_:
        cli.guarded(lambda: cli.inventory("acme"))()
    err = capsys.readouterr().err
    assert exit_.value.code == ExitCode.INVALID, err
    _lines_ok(err, expected)
    assert _files(tmp_path) == before
    assert time.monotonic() - started < 5


# --- the real command line ------------------------------------------------------------------------------------------

def _invoke_file(text: str | None, name: str = "invoke.yaml") -> Setup:
    def setup(inv: Path, env_: dict[str, str]) -> None:
        if text is not None:
            (inv / name).write_text(text)
    return setup


def _template_inventory(inv: Path, env_: dict[str, str]) -> None:
    tpl = inv.parent / "_evil"
    tpl.mkdir()
    for name in ("cluster.yml", "hosts.yml"):
        (tpl / name).write_bytes((inv / name).read_bytes())


INV_FILE = "inventories/acme/invoke.yaml: "
# (id, setup, argv after `invoke`, expected start of one line)
COMMAND_LINE = [
    ("unknown-flag", None, ["validate", "--bogus"], "(command line): No idea what '--bogus' is!"),
    ("unknown-task", None, ["validatee"], "(command line): No idea what 'validatee' is!"),
    ("unknown-flag-of-stage", None, ["certify", "--tags", "x"], "(command line): No idea what '--tags' is!"),
    ("hosts-not-a-number", None, ["sandbox.up", "--hosts", "three"], "--hosts: (command line): not a value"),
    ("hosts-not-a-number-inline", None, ["sandbox.up", "--hosts=3x"], "--hosts: (command line): not a value"),
    ("discover-without-host", None, ["discover"], "(command line): "),
    ("limit-matches-nothing", None, ["provision", "--limit", "gpu99"],
     "--limit: (command line): the pattern 'gpu99' matches no host of inventories/acme/hosts.yml"),
    ("limit-excludes-everything", None, ["certify", "--limit", "!all"], "--limit: (command line): the pattern"),
    ("limit-empty", None, ["provision", "--limit", " "], "--limit: (command line): must be an Ansible host pattern"),
    ("batch-zero", None, ["provision", "--batch", "0"], "--batch: (command line): '0' is out of range"),
    ("batch-not-a-count", None, ["provision", "--batch", "half"], "--batch: (command line): 'half' is not a node"),
    ("batch-over-a-whole", None, ["provision", "--batch", "120%"], "--batch: (command line): '120%' is out of range"),
    ("max-fail-negative", None, ["provision", "--max-fail", "-1"], "--max-fail: (command line): '-1' is not a node"),
    ("limit-unknown-group", None, ["serve", "--limit", "cpu_nodes"], "--limit: (command line): the pattern"),
    ("invoke-file-missing", None, ["-f", "inventories/acme/invoke.yml", "validate"],
     "inventories/acme/invoke.yml: (file): missing"),
    ("invoke-file-empty", _invoke_file(""), ["-f", "inventories/acme/invoke.yaml", "validate"],
     INV_FILE + "gridready: must be a mapping"),
    ("invoke-file-broken", _invoke_file("gridready: [\n"), ["-f", "inventories/acme/invoke.yaml", "validate"],
     INV_FILE + "line 2 column 1: YAML syntax error"),
    ("invoke-file-list", _invoke_file("- acme\n"), ["-f", "inventories/acme/invoke.yaml", "validate"],
     INV_FILE + "gridready: must be a mapping"),
    ("invoke-file-inventory-number", _invoke_file("gridready:\n  inventory: 5\n"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "gridready.inventory: must be a name"),
    ("invoke-file-unknown-key", _invoke_file("gridready:\n  inventroy: acme\n"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "gridready.inventroy: unknown key"),
    ("invoke-file-invoke-setting", _invoke_file("gridready:\n  inventory: acme\ntasks:\n  executor_class: os.Exec\n"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "tasks: an invoke setting"),
    ("invoke-file-run-setting", _invoke_file("run:\n  shell: /tmp/x\ngridready:\n  inventory: acme\n"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "run: an invoke setting"),
    ("invoke-variable", env(INVOKE_TASKS_EXECUTOR_CLASS="os.Exec"), ["validate"],
     "INVOKE_TASKS_EXECUTOR_CLASS: (environment): an invoke setting, which gridready does not read"),
    ("inventory-invoke-file-setting", _invoke_file("tasks:\n  collection_name: evil\n"), ["validate"],
     INV_FILE + "tasks: an invoke setting"),
    ("invoke-file-python", _invoke_file("gridready = {}\n", "invoke.py"),
     ["-f", "inventories/acme/invoke.py", "validate"], "inventories/acme/invoke.py: (file): gridready reads a YAML"),
    ("invoke-file-device", lambda inv, e: (inv / "invoke.yaml").symlink_to("/dev/zero"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "(file): not a regular file"),
    ("invoke-file-unquoted-template", _invoke_file("gridready:\n  inventory: {{ name }}\n"),
     ["-f", "inventories/acme/invoke.yaml", "validate"], INV_FILE + "line "),
    ("inventory-env-missing", env(GRIDREADY_INVENTORY="acmee"), ["validate"],
     "inventories/acmee: (inventory): no such inventory directory"),
    ("template-inventory-runs-nothing", both(_template_inventory, env(GRIDREADY_INVENTORY="_evil")),
     ["provision"], "inventories/_evil: (directory name): a template inventory"),
    ("lock-wait-nan-stage", env(GRIDREADY_LOCK_WAIT_S="nan"), ["certify"], "GRIDREADY_LOCK_WAIT_S: (environment)"),
    ("run-id-newline-stage", env(GRIDREADY_RUN_ID="ci-1\n"), ["provision"], "GRIDREADY_RUN_ID: (run id)"),
    ("vault-password-device-stage", env(GRIDREADY_VAULT_PASSWORD_FILE="/dev/zero"), ["serve"], PW),
    ("canary-weight-not-number", None, ["serve", "--canary", "llama", "--weight", "ten"], "--weight"),
    ("purge-volumes-without-down", None, ["serve", "--purge-volumes"], "--purge-volumes: (command line): only with"),
]


@pytest.mark.parametrize(("case", "setup", "argv", "expected"), COMMAND_LINE, ids=[r[0] for r in COMMAND_LINE])
def test_the_command_line_and_environment_exit_2_with_one_line(tmp_path, case, setup, argv, expected):
    """The real `invoke`, in a subprocess: exit 2, one line naming the flag, variable or file, nothing written."""
    inv = make_inventory(tmp_path)
    variables: dict[str, str] = {}
    if setup:
        setup(inv, variables)
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    run_env = {**base, "GRIDREADY_INVENTORY": "acme", "GRIDREADY_HOME": str(tmp_path), **variables}
    before = _files(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *argv], cwd=tmp_path,
                          env=run_env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    # `validate` runs before every stage and says so (with its warnings: a gated model without a token); the
    # stage's own refusal follows
    err = "\n".join(ln for ln in proc.stderr.splitlines()
                    if not (ln.startswith("inventory ") and ": valid (" in ln) and not ln.startswith("warning: "))
    _lines_ok(err, expected)
    assert _files(tmp_path) == before


def test_the_tables_hold_150_bad_inputs_across_every_input():
    assert len(IN_PROCESS) + len(COMMAND_LINE) >= 150
    ids = [r[0] for r in IN_PROCESS] + [r[0] for r in COMMAND_LINE]
    assert len(ids) == len(set(ids))


# --- the good forms still load ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("setup", [
    at("serving.firewall_clients", ["10.0.0.0/8", "2001:db8::/32"]),
    cl(lambda d: d["serving"].update(firewall_clients=["0.0.0.0/0"], firewall_clients_any=True)),
    at("serving.tiers.0.trust_remote_code", True),
    host_vars(ansible_host="gpu01.example.com", ansible_port=2222, ansible_user="ops"),
    host_vars(ansible_host="2001:db8::1"),
    both(vault(GOOD_VAULT), password(), REFERENCE),
    write("group_vars/all/main.yml", "x: !unsafe '{{ not a template }}'\nuse: \"{{ vault_absent | default('') }}\"\n"),
    write("group_vars/all/main.yml", "gridready_vllm_api_key: \"{{ vault_gridready_vllm_api_key }}\"\n"),
], ids=["private-cidrs", "open-with-opt-in", "trust-remote-code", "dns-host", "ipv6-host", "vault-opens",
        "unsafe-tag-and-default", "serve-generates-the-api-key"])
def test_the_good_forms_load(tmp_path, monkeypatch, setup):
    _in_process(tmp_path, monkeypatch, setup)
    assert cli.inventory("acme").customer == "acme"


def test_trust_remote_code_is_the_named_field_that_reaches_vllm(tmp_path, monkeypatch):
    from gridready.serving import vllm
    from gridready.spec.parallel import Parallelism
    from gridready.spec.serving import Tier

    class Plan:
        tier = Tier.model_validate(tier(trust_remote_code=True))
        tensor_parallel, pipeline_parallel, nodes_per_replica = 1, 1, 1
        parallel = Parallelism(1, 1, 8)

    assert "--trust-remote-code" in vllm.serve_args(Plan())  # type: ignore[arg-type]
    Plan.tier = Tier.model_validate(tier())
    assert "--trust-remote-code" not in vllm.serve_args(Plan())  # type: ignore[arg-type]
