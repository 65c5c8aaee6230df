"""Issue 41, classes 6-8: an inventory never runs a command on the controller, never keeps a secret in the clear,
and never holds what the target would refuse later. Each row: a change to a valid inventory (or its environment)
through `invoke validate`'s path in process; exit 2, the one expected line naming file and key (or variable), no
traceback, no secret echoed, nothing written, within a time limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

from gridready import bastion as bastion_render
from gridready import cli, inventory_checks, secretscan
from gridready.exitcodes import ExitCode
from gridready.spec.bastion import Bastion
from tests.unit.test_bad_inputs import (
    CANARY,
    GV,
    PASSWORD,
    SCRUBBED,
    H,
    _files,
    _in_process,
    _lines_ok,
    at,
    both,
    cl,
    env,
    hosts,
    password,
    tier,
    tiers,
    vault,
    write,
)
from tests.unit.test_inventory_errors import REPO, make_inventory

C = "inventories/acme/cluster.yml: "
G1 = H + "all.children.gpu_nodes.hosts.gpu01"
HV = "inventories/acme/host_vars/gpu01.yml: "
K8S = {"target": "kubernetes", "kubeconfig": "/etc/kubeconfig"}
# a real OpenSSH ed25519 public key blob: the type string, then 32 key bytes
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.fixture(autouse=True)
def time_limit():
    """Every case of this file ends within 60 s: a hang is a failure, not a stuck CI job."""
    def expire(signum, frame):
        raise TimeoutError("a trust-boundary case hung")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def gvars(text: str, rel: str = "group_vars/all/main.yml"):
    return write(rel, text)


def hosts_doc(gpu01: dict | None = None, gpu02: dict | None = None, group_vars: dict | None = None):
    body: dict = {"hosts": {"gpu01": gpu01 or {}, "gpu02": gpu02 or {}}}
    if group_vars:
        body["vars"] = group_vars
    return hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": body}}}))


def k8s(mutate=None):
    def change(doc: dict) -> None:
        doc["serving"].update(K8S)
        if mutate:
            mutate(doc)
    return cl(change)


SSH = G1 + ".ansible_ssh_common_args: must not "
COMMANDS = [
    # every spelling ssh accepts for ProxyCommand: case, '=' or space, joined -oX, a cluster of flags, quotes
    ("proxy-lower-joined", hosts_doc({"ansible_ssh_common_args": "-oproxycommand=nc %h %p"}), SSH + "set ProxyCommand"),
    ("proxy-space", hosts_doc({"ansible_ssh_common_args": "-o 'ProxyCommand nc %h %p'"}), SSH + "set ProxyCommand"),
    ("proxy-flag-cluster", hosts_doc({"ansible_ssh_common_args": "-qvoProxyCommand=id"}), SSH + "set ProxyCommand"),
    ("proxy-quoted-keyword", hosts_doc({"ansible_ssh_common_args": "-o '\"ProxyCommand\" id'"}),
     SSH + "set ProxyCommand"),
    ("config-file", hosts_doc({"ansible_ssh_common_args": "-F /tmp/evil_config"}), SSH + "pass -F"),
    ("config-file-joined", hosts_doc({"ansible_ssh_common_args": "-C -F/tmp/evil_config"}), SSH + "pass -F"),
    ("config-file-in-cluster", hosts_doc({"ansible_ssh_common_args": "-vF /tmp/evil_config"}), SSH + "pass -F"),
    ("raw-jump", hosts_doc({"ansible_ssh_common_args": "-J ops@bastion"}), SSH + "pass -J is the raw form"),
    ("raw-proxyjump", hosts_doc({"ansible_ssh_common_args": "-o ProxyJump=ops@bastion"}), SSH + "set ProxyJump"),
    ("known-hosts-command", hosts_doc({"ansible_ssh_common_args": "-o KnownHostsCommand=/bin/id"}),
     SSH + "set KnownHostsCommand"),
    ("match-exec", hosts_doc({"ansible_ssh_common_args": "-o 'Match exec id'"}), SSH + "set Match"),
    ("include", hosts_doc({"ansible_ssh_common_args": "-oInclude=/tmp/more"}), SSH + "set Include"),
    ("pkcs11", hosts_doc({"ansible_ssh_common_args": "-I /tmp/lib.so"}), SSH + "pass -I"),
    ("local-command", gvars("ansible_ssh_extra_args: -o PermitLocalCommand=yes\n"),
     GV + "ansible_ssh_extra_args: must not set PermitLocalCommand"),
    ("scp-program", gvars("ansible_scp_extra_args: -S /tmp/prog\n"), GV + "ansible_scp_extra_args: must not pass -S"),
    ("sftp-batch-file", gvars("ansible_sftp_extra_args: -b /etc/passwd\n"),
     GV + "ansible_sftp_extra_args: must not pass -b"),
    ("common-args-reach-sftp", gvars("ansible_ssh_common_args: -D /tmp/server\n"),
     GV + "ansible_ssh_common_args: must not pass -D"),
    ("template-builds-option", gvars("ansible_ssh_common_args: \"-o {{ 'Proxy' ~ 'Command' }}=id\"\n"),
     GV + "ansible_ssh_common_args: must be literal ssh options"),
    ("nested-group-vars", hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {
        "hosts": {"gpu01": {}, "gpu02": {}},
        "children": {"inner": {"vars": {"ansible_ssh_common_args": "-F /tmp/cfg"}}}}}}})),
     H + "all.children.gpu_nodes.children.inner.vars.ansible_ssh_common_args: must not pass -F"),
    ("ssh-executable", gvars("ansible_ssh_executable: /tmp/evil\n", "host_vars/gpu01.yml"),
     HV + "ansible_ssh_executable: must not be set"),
    ("scp-executable", hosts_doc(group_vars={"ansible_scp_executable": "/tmp/evil"}),
     H + "all.children.gpu_nodes.vars.ansible_scp_executable: must not be set"),
    ("pkcs11-provider-var", gvars("ansible_ssh_pkcs11_provider: /tmp/evil.so\n"),
     GV + "ansible_ssh_pkcs11_provider: must not be set"),
    ("become-flags-injection", hosts_doc({"ansible_connection": "local", "ansible_become_flags": "-n; id"}),
     G1 + ".ansible_become_flags: must not hold shell syntax"),
    ("remote-tmp-substitution", gvars("ansible_remote_tmp: /tmp/$(id)\n"), GV + "ansible_remote_tmp: must not hold"),
    ("paramiko-proxy", gvars("ansible_paramiko_proxy_command: nc %h %p\n"),
     GV + "ansible_paramiko_proxy_command: must not be set"),
    ("connection-paramiko", hosts_doc({"ansible_connection": "paramiko"}),
     G1 + ".ansible_connection: must be ssh or local"),
    ("interpreter-shell", hosts_doc({"ansible_python_interpreter": "/usr/bin/python3; id"}),
     G1 + ".ansible_python_interpreter: must be an absolute path of a python"),
    ("interpreter-template", gvars("ansible_python_interpreter: \"{{ lookup('pipe', 'which python3') }}\"\n"),
     GV + "ansible_python_interpreter: must be an absolute path"),
    # lookups that run a command or read the controller, in every call form
    ("lookup-pipe", gvars("x: \"{{ lookup('pipe', 'id') }}\"\n"), GV + "x: lookup plugin 'pipe' runs on the"),
    ("query-lines", gvars("x: \"{{ query('lines', 'id') }}\"\n"), GV + "x: lookup plugin 'lines'"),
    ("q-fqcn-pipe", gvars("y: {z: [\"{{ q('ansible.builtin.pipe', 'id') }}\"]}\n"), GV + "y.z[0]: lookup plugin"),
    ("lookup-file", hosts_doc(group_vars={"x": "{{ lookup('file', '/etc/shadow') }}"}),
     H + "all.children.gpu_nodes.vars.x: lookup plugin 'file'"),
    ("lookup-computed", gvars("x: \"{{ lookup('pi' ~ 'pe', 'id') }}\"\n"), GV + "x: a lookup whose plugin is computed"),
    ("lookup-aliased", gvars("x: \"{% set f = lookup %}{{ f('pipe', 'id') }}\"\n"), GV + "x: lookup used other than"),
    ("lookup-env-secret", gvars("x: \"{{ lookup('env', 'AWS_SECRET_ACCESS_KEY') }}\"\n"),
     GV + "x: the env lookup reads the controller's environment"),
    ("lookup-in-host-var", hosts_doc({"note": "{{ lookup('pipe', 'id') | default('') }}"}),
     G1 + ".note: lookup plugin 'pipe'"),
    ("private-attribute", gvars("x: \"{{ ''.__class__.__mro__ }}\"\n"), GV + "x: reaches a private attribute"),
    ("private-attribute-by-filter", gvars("x: \"{{ '' | attr(name) }}\"\n"), GV + "x: an attr filter"),
    ("private-attribute-by-item", gvars("x: \"{{ cycler['__init__'] }}\"\n"), GV + "x: reaches a private"),
    ("old-host-alias-option", hosts_doc({"ansible_ssh_host": "-oProxyCommand=id"}),
     G1 + ".ansible_ssh_host: must be an IP address or a DNS host name"),
]

TOKEN = {
    "github-fine-grained": "github_pat_11AAAAAAA0" + CANARY + "_" + "b" * 50,
    "github-app": "ghs_" + CANARY + "c" * 20,
    "gitlab": "glpat-" + CANARY + "xy",
    "slack": "xoxb-1234-" + CANARY,
    "openai-project": "sk-proj-" + CANARY + "abcd",
    "aws-temporary": "ASIA" + "ABCDEFGHIJKLMNOP",
    "ngc": "nvapi-" + CANARY + "Zz",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOi" + CANARY + ".c2lnbmF0dXJl",
    "pgp-private-key": "-----BEGIN PGP PRIVATE KEY BLOCK-----\n" + CANARY,
}
def _inline_vault_value(plain: str):
    """group_vars/all/main.yml with one inline `!vault |` value holding `plain` (the password of `password()`)."""
    def setup(inv, env_):
        lib = VaultLib([("acme", VaultSecret(PASSWORD.encode()))])
        blob = lib.encrypt(plain, lib.secrets[0][1], vault_id="acme").decode()
        write("group_vars/all/main.yml", "db_pass: !vault |\n" + "".join(f"  {ln}\n" for ln in blob.splitlines())
              )(inv, env_)
    return setup


SECRETS = [
    ("vault-not-encrypted", write("group_vars/all/vault.yml", f"vault_x: {CANARY}\n"),
     "inventories/acme/group_vars/all/vault.yml: (file): named like a vault but not encrypted"),
    ("host-vault-yaml-not-encrypted", write("host_vars/gpu01/Vault.yaml", "vault_y: plain\n"),
     "inventories/acme/host_vars/gpu01/Vault.yaml: (file): named like a vault but not encrypted"),
    ("group-vars-top-level-vault", write("group_vars/vault.yaml", "vault_y: plain\n"),
     "inventories/acme/group_vars/vault.yaml: (file): named like a vault but not encrypted"),
    ("vault-named-empty-file", write("group_vars/all/secrets.vault.yml", ""),
     "inventories/acme/group_vars/all/secrets.vault.yml: (file): named like a vault"),
    ("lookup-inside-the-vault", both(vault("vault_x: \"{{ lookup('pipe', 'id') }}\"\n"), password()),
     "inventories/acme/group_vars/all/vault.yml: vault_x: lookup plugin 'pipe'"),
    ("lookup-inside-an-inline-vault", both(_inline_vault_value("{{ lookup('pipe', 'id') }}"), password()),
     GV + "db_pass: (!vault): lookup plugin 'pipe'"),
    ("become-password-binary", gvars("ansible_become_password: !!binary cGFzc3dvcmQ=\n"),
     GV + "line 1 column 26: ansible_become_password: the tag !!binary is not allowed here"),
    ("become-pass-float", hosts_doc({"ansible_become_pass": 1234.5}), G1 + ".ansible_become_pass: a secret given"),
    ("become-password-true", gvars("ansible_become_password: true\n"), GV + "ansible_become_password: a secret given"),
    ("ssh-pass-date", gvars("ansible_ssh_pass: 2024-01-31\n"), GV + "ansible_ssh_pass: a secret given"),
    *[(f"token-{name}", gvars(yaml.safe_dump({"note": value})), GV + "note: has the shape of a credential")
      for name, value in TOKEN.items()],
]

TARGET = [
    ("k8s-version-too-old", at("serving.kubernetes.kubernetes_version", "1.20"),
     C + "serving.kubernetes.kubernetes_version: must be a Kubernetes release from 1.26"),
    ("k8s-version-unknown", k8s(lambda d: d["serving"].setdefault("kubernetes", {}).update(kubernetes_version="1.99")),
     C + "serving.kubernetes.kubernetes_version: must be a Kubernetes release"),
    ("secret-name-upper", at("serving.kubernetes.hf_token_secret", "HF_Token"),
     C + "serving.kubernetes.hf_token_secret: must be a Kubernetes object name"),
    ("storage-class-double-dot", at("serving.kubernetes.storage_class", "fast..ssd"),
     C + "serving.kubernetes.storage_class: must be a Kubernetes object name"),
    ("label-value-space", at("serving.kubernetes.gpu_product_label", "NVIDIA H200"),
     C + "serving.kubernetes.gpu_product_label: must be a Kubernetes label value"),
    ("label-value-too-long", at("serving.kubernetes.gpu_product_label", "N" * 64),
     C + "serving.kubernetes.gpu_product_label: must be a Kubernetes label value"),
    ("resource-name-two-slashes", at("serving.kubernetes.rdma_resource", "rdma/ib/x"),
     C + "serving.kubernetes.rdma_resource: must be a Kubernetes resource name"),
    ("node-group-label-trailing-underscore", both(
        k8s(lambda d: d["node_groups"][0].update(name="gpu_nodes_")),
        hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes_": {"hosts": {"gpu01": {}, "gpu02": {}}}}}}))),
     C + "node_groups[0].name: on Kubernetes the node group is the label"),
    ("node-name-upper-case",
     both(k8s(), hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"GPU01": {}, "gpu02": {}}}}}}))),
     H + "gpu_nodes.hosts.GPU01: on Kubernetes a host is a Node name"),
    ("k8s-node-name-given-badly", both(k8s(), hosts_doc({"gridready_k8s_node_name": "Node_1"})),
     H + "gpu_nodes.hosts.gpu01.gridready_k8s_node_name: on Kubernetes a host is a Node name"),
    ("group-contains-itself", hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {
        "hosts": {"gpu01": {}, "gpu02": {}}, "children": {"gpu_nodes": {}}}}}})),
     H + "all.children.gpu_nodes.children.gpu_nodes: group 'gpu_nodes' contains itself"),
    ("group-cycle-through-another", hosts(yaml.safe_dump({
        "all": {"children": {"gpu_nodes": {"hosts": {"gpu01": {}, "gpu02": {}}, "children": {"racks": {}}}}},
        "racks": {"children": {"gpu_nodes": {}}}})),
     H + "all.children.gpu_nodes.children.racks: group 'gpu_nodes' contains itself (through 'racks')"),
    ("all-as-a-child", hosts(yaml.safe_dump({"gpu_nodes": {"hosts": {"gpu01": {}, "gpu02": {}},
                                                          "children": {"all": {}}}})),
     H + "gpu_nodes.children.all: 'all' holds every group"),
    ("ipv6-two-spellings", hosts_doc({"ansible_host": "2001:db8::1"}, {"ansible_host": "2001:DB8:0:0::1"}),
     H + "gpu02.ansible_host: the same address and port as host 'gpu01'"),
    ("ipv4-mapped", hosts_doc({"ansible_host": "10.0.0.1"}, {"ansible_host": "::ffff:10.0.0.1"}),
     H + "gpu02.ansible_host: the same address and port as host 'gpu01'"),
    ("ipv4-inet-aton-form", hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {
        "10.1": {}, "gpu02": {"ansible_host": "10.0.0.1"}}}}}})),
     H + "gpu02.ansible_host: the same address and port as host '10.1'"),
    ("dns-case", hosts_doc({"ansible_host": "node1.example.com"}, {"ansible_host": "Node1.Example.COM."}),
     H + "gpu02.ansible_host: the same address and port as host 'gpu01'"),
    ("adapter-names-repeat", tiers(tier(lora_adapters=[{"name": "sql", "path": "/models/a"},
                                                       {"name": "sql", "path": "/models/b"}])),
     C + "serving.tiers[0].lora_adapters[1].name: duplicate adapter name 'sql'"),
    ("adapter-named-like-model", tiers(tier(lora_adapters=[{"name": "llama", "path": "/models/a"}])),
     C + "serving.tiers[0].lora_adapters[0].name: 'llama' is the tier's served_name"),
]

ENVIRONMENT = [
    ("variable-with-newline", env(GRIDREADY_PROBE_PYTHON="python3\nid"),
     "GRIDREADY_PROBE_PYTHON: (environment): must be one line"),
    ("flag-zero", env(GRIDREADY_SERVE_SKIP_BENCH="0"), "GRIDREADY_SERVE_SKIP_BENCH: (environment): must be 1 or unset"),
    ("flag-true", env(GRIDREADY_SERVE_SKIP_BENCH="true"), "GRIDREADY_SERVE_SKIP_BENCH: (environment): must be 1"),
    ("evidence-key-missing", env(GRIDREADY_EVIDENCE_KEY="/nonexistent/evidence.key"),
     "GRIDREADY_EVIDENCE_KEY: (environment): names no regular file"),
    ("evidence-pubkey-directory", env(GRIDREADY_EVIDENCE_PUBKEY="/"),
     "GRIDREADY_EVIDENCE_PUBKEY: (environment): names no regular file"),
]


def _vault_password_under_artifacts(inv, env_):
    path = inv.parent.parent / "artifacts" / "vault-pass"
    path.parent.mkdir()
    path.write_text(f"pw-{CANARY}\n")
    path.chmod(0o600)
    env_["GRIDREADY_VAULT_PASSWORD_FILE"] = str(path)


def _artifacts_over_inventory(inv, env_):
    env_["GRIDREADY_ARTIFACTS"] = str(inv.parent)


def _kubeconfig_under_artifacts(inv, env_):
    k8s(lambda d: d["serving"].update(kubeconfig="../../artifacts/kubeconfig"))(inv, env_)


def _ssh_key_under_artifacts(inv, env_):
    hosts_doc({"ansible_ssh_private_key_file": str(inv.parent.parent / "artifacts" / "id_ed25519")})(inv, env_)


def _evidence_key_in_inventory(inv, env_):
    (inv / "evidence.key").write_text("not a key\n")
    env_["GRIDREADY_EVIDENCE_KEY"] = str(inv / "evidence.key")


STATE = [
    ("evidence-key-in-inventory", _evidence_key_in_inventory,
     "GRIDREADY_EVIDENCE_KEY: (environment): is inside the inventory inventories/acme, which is committed"),
    ("kubeconfig-under-artifacts", _kubeconfig_under_artifacts,
     C + "serving.kubeconfig: is under the artifacts folder"),
    ("ssh-key-under-artifacts", _ssh_key_under_artifacts,
     H + "gpu01.ansible_ssh_private_key_file: is under the artifacts folder"),
    ("vault-password-under-artifacts", _vault_password_under_artifacts,
     "GRIDREADY_VAULT_PASSWORD_FILE: (environment): is under the artifacts folder"),
    ("inventory-under-artifacts", _artifacts_over_inventory, "inventories/acme: (inventory): is under the artifacts"),
]

ROWS = [*COMMANDS, *SECRETS, *TARGET, *ENVIRONMENT, *STATE]


@pytest.mark.parametrize(("case", "setup", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_refused_at_validate_with_one_line(tmp_path, monkeypatch, capsys, case, setup, expected):
    _in_process(tmp_path, monkeypatch, setup)
    monkeypatch.setenv("GRIDREADY_HOME", str(tmp_path))
    before = _files(tmp_path)
    started = time.monotonic()
    with pytest.raises(cli.CommandExit) as exit_:
        cli.guarded(lambda: cli.inventory("acme"))()
    err = capsys.readouterr().err
    assert exit_.value.code == ExitCode.INVALID, err
    _lines_ok(err, expected)
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err  # one bad thing, one line
    assert _files(tmp_path) == before
    assert time.monotonic() - started < 10


GOOD = [
    ("sandbox-ssh-options", hosts_doc(group_vars={"ansible_ssh_common_args": (
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
        "-o ControlPath=/run/gridready/cp/%C -o ServerAliveInterval=30")})),
    ("python-and-connection", hosts_doc({"ansible_connection": "ssh",
                                         "ansible_python_interpreter": "/usr/bin/python3"})),
    ("playbook-python", hosts_doc({"ansible_connection": "local",
                                   "ansible_python_interpreter": "{{ ansible_playbook_python }}"})),
    ("env-python", hosts_doc({"ansible_python_interpreter": "/usr/bin/env python3"})),
    ("lookups-that-only-reshape-data",
     gvars("x: \"{{ query('inventory_hostnames', 'gpu_nodes') + lookup('ansible.builtin.vars', 'y') }}\"\n")),
    ("env-lookup-probe-python",
     gvars("p: \"{{ lookup('ansible.builtin.env', 'GRIDREADY_PROBE_PYTHON', default='python3') }}\"\n")),
    ("filters-and-defaults",
     gvars("x: \"{{ groups['gpu_nodes'] | map('extract', hostvars, 'ansible_host') | list }}\"\n")),
    ("filter-in-connection-var", gvars("ansible_ssh_private_key_file: \"{{ key | default('/k/id') }}\"\n")),
    ("vault-reference", both(gvars("k: \"{{ vault_gridready_hf_token | default('') }}\"\n"), password())),
    ("ipv6-distinct", hosts_doc({"ansible_host": "2001:db8::1"}, {"ansible_host": "2001:db8::2"})),
    ("same-address-other-port", hosts_doc({"ansible_host": "10.0.0.1", "ansible_port": 2201},
                                          {"ansible_host": "10.0.0.1", "ansible_port": 2202})),
    ("adapters-distinct", tiers(tier(lora_adapters=[{"name": "sql", "path": "/models/a"},
                                                    {"name": "chat", "path": "/models/b"}]))),
    ("flag-one", env(GRIDREADY_SERVE_SKIP_BENCH="1")),
    ("group-folder-named-vault", gvars("x: 1\n", "group_vars/vault_servers/main.yml")),
    ("k8s-names", k8s(lambda d: d["serving"].setdefault("kubernetes", {}).update(
        kubernetes_version="1.33", gpu_product_label="NVIDIA-H200", hf_token_secret="hf.token-1"))),
    ("k8s-node-name-renamed", both(k8s(), hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {
        "GPU01": {"gridready_k8s_node_name": "gpu01.example"}, "gpu02": {}}}}}})))),
    ("bastion", at("bastion", {"host": "bastion.example.com", "user": "ops", "host_key": ED25519})),
]


@pytest.mark.parametrize(("case", "setup"), GOOD, ids=[r[0] for r in GOOD])
def test_the_good_forms_still_load(tmp_path, monkeypatch, case, setup):
    _in_process(tmp_path, monkeypatch, setup)
    assert cli.inventory("acme").customer == "acme"


@pytest.mark.parametrize(("bastion", "expected"), [
    ({"host": "-oProxyCommand=id", "user": "ops", "host_key": ED25519}, "bastion.host: must be an IP address"),
    ({"host": "10.0.0.9", "user": "-l", "host_key": ED25519}, "bastion.user: String should match pattern"),
    ({"host": "10.0.0.9", "user": "ops", "host_key": "ssh-ed25519 notbase64!"}, "bastion.host_key: the key is not"),
    ({"host": "10.0.0.9", "user": "ops", "host_key": "ssh-rsa " + ED25519.split()[1]},
     "bastion.host_key: the key blob is of another type"),
    ({"host": "10.0.0.9", "user": "ops"}, "bastion.host_key: Field required"),
])
def test_a_bad_bastion_is_refused(tmp_path, monkeypatch, capsys, bastion, expected):
    _in_process(tmp_path, monkeypatch, at("bastion", bastion))
    with pytest.raises(cli.CommandExit) as exit_:
        cli.guarded(lambda: cli.inventory("acme"))()
    assert exit_.value.code == ExitCode.INVALID
    _lines_ok(capsys.readouterr().err, C + expected)


def test_the_bastion_renders_as_a_proxyjump_with_its_pinned_host_key(tmp_path):
    b = Bastion(host="2001:db8::9", port=2222, user="ops", host_key=ED25519 + " comment")
    extra = bastion_render.ansible_extravars(b, tmp_path)["ansible_ssh_extra_args"]
    config = (tmp_path / "bastion_ssh_config").read_text()
    assert extra.split() == ["-F", str(tmp_path / "bastion_ssh_config"), "-o", "ProxyJump=gridready-bastion"]
    assert "Host gridready-bastion\n  HostName 2001:db8::9\n  Port 2222\n  User ops\n" in config
    assert "StrictHostKeyChecking yes" in config and "GlobalKnownHostsFile none" in config
    assert (tmp_path / "bastion_known_hosts").read_text() == f"[2001:db8::9]:2222 {ED25519}\n"
    # what gridready renders passes its own refusal of raw forms only because it never comes from the inventory
    assert inventory_checks.ssh_args_problem("ansible_ssh_extra_args", extra) is not None
    assert bastion_render.ansible_extravars(None, tmp_path) == {}


def test_secret_values_are_never_echoed():
    lines = [f"{where}: {what}" for where, what in secretscan.find({"note": TOKEN["github-fine-grained"],
                                                                   "ansible_become_password": b"hunter2"})]
    assert len(lines) == 2 and not any(CANARY in ln or "hunter2" in ln for ln in lines)
    assert CANARY not in secretscan.redact(f"x {TOKEN['gitlab']} y")
    assert not secretscan.SECRET_VALUE.search("task-abcdefghijklmnopqrstuvwxyz0123")  # not inside a longer word


def test_the_fabric_ssh_runner_goes_through_the_bastion_too():
    from gridready.stages.fabric import SshRunner

    jump = ["-F", "/run/x/bastion_ssh_config", "-o", "ProxyJump=gridready-bastion"]
    argv = SshRunner({"gpu01": {"ansible_host": "10.0.0.1"}}, jump=jump).ssh_argv("gpu01")
    assert argv[argv.index("-F"):argv.index("-F") + 4] == jump and argv[-2:] == ["--", "10.0.0.1"]
    assert "-F" not in SshRunner({"gpu01": {}}).ssh_argv("gpu01")


def _pipe_marker(inv, env_):
    """A lookup that would leave a file beside the inventories if Ansible or anything else ever rendered it."""
    marker = inv.parent.parent / "ran"
    gvars(f"x: \"{{{{ lookup('pipe', 'touch {marker}') }}}}\"\n")(inv, env_)


END_TO_END = [  # one case per class, each through every command a bad case must stop
    ("commands", _pipe_marker, GV + "x: lookup plugin 'pipe' runs on the controller"),
    ("secrets", write("group_vars/all/vault.yml", f"vault_x: {CANARY}\n"),
     "inventories/acme/group_vars/all/vault.yml: (file): named like a vault but not encrypted"),
    ("target", hosts(yaml.safe_dump({"all": {"children": {"gpu_nodes": {
        "hosts": {"gpu01": {}, "gpu02": {}}, "children": {"gpu_nodes": {}}}}}})),
     H + "all.children.gpu_nodes.children.gpu_nodes: group 'gpu_nodes' contains itself"),
]
COMMANDS_OF_A_RUN = [["validate"], ["plan", "--offline"], ["serve", "--render"], ["status"], ["prune", "--dry-run"]]


@pytest.mark.parametrize("argv", COMMANDS_OF_A_RUN, ids=[" ".join(a) for a in COMMANDS_OF_A_RUN])
@pytest.mark.parametrize(("case", "setup", "expected"), END_TO_END, ids=[r[0] for r in END_TO_END])
def test_the_real_command_line_stops_a_bad_case(tmp_path, case, setup, expected, argv):
    """The real `invoke` in a subprocess (60 s at most): exit 2, the one line, nothing written, nothing run."""
    inv = make_inventory(tmp_path)
    variables: dict[str, str] = {}
    setup(inv, variables)
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    run_env = {**base, "GRIDREADY_INVENTORY": "acme", "GRIDREADY_HOME": str(tmp_path), **variables}
    before = _files(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *argv], cwd=tmp_path,
                          env=run_env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == ExitCode.INVALID, (proc.returncode, proc.stderr)
    _lines_ok(proc.stderr, expected)
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1, proc.stderr
    assert _files(tmp_path) == before and not (tmp_path / "ran").exists()


def test_the_fabric_ssh_runner_writes_the_bastion_config_and_removes_it(monkeypatch):
    import gc
    from types import SimpleNamespace

    from gridready.stages import fabric

    monkeypatch.setattr(fabric.ansible, "hostvars", lambda inv: {"gpu01": {"ansible_host": "10.0.0.1"}})
    inv = SimpleNamespace(spec=SimpleNamespace(bastion=Bastion(host="10.0.0.9", user="ops", host_key=ED25519)))
    runner = fabric.SshRunner.from_inventory(inv)
    argv = runner.ssh_argv("gpu01")
    config = Path(argv[argv.index("-F") + 1])
    assert "ProxyJump=gridready-bastion" in argv and "HostName 10.0.0.9" in config.read_text()
    del runner, argv
    gc.collect()
    assert not config.parent.exists()
