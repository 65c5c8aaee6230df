"""Per-client router keys on Kubernetes (issue 29, finding 12): the front checks `serving.router.keys` as the hosts'
router does (LiteLLM's custom_auth over the keys' SHA-256 digests, with their rpm/tpm limits); before, every client
used the one serving API key. The digests reach the pod from a Secret made of Pulumi secret config; the render and
the plain stack config hold no key."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from gridready import pulumi as gpulumi
from gridready import vault
from gridready.serving import topology
from gridready.stacks.serving import router as front
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import router as serve_router
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

KEYS = [{"name": "team-a", "vault_var": "vault_router_key_team_a", "rpm_limit": 60},
        {"name": "team-b", "vault_var": "vault_router_key_team_b", "tpm_limit": 100000}]


def _inv(make_inv, keys: list[dict[str, Any]]):
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2)], target="kubernetes")
    inv.spec.serving.router = inv.spec.serving.router.model_validate({"enabled": bool(keys), "keys": keys})
    return inv


def _render(inv) -> list[dict[str, Any]]:
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    configs = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))
    return gpulumi.render("serving", configs["serving"], "acme").manifests


def _doc(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_front_checks_each_clients_key_with_the_hosts_hook(make_inv) -> None:
    docs = _render(_inv(make_inv, KEYS))
    cm = _doc(docs, "ConfigMap", front.NAME)
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["general_settings"]["custom_auth"] == "gridready_router_auth.user_api_key_auth"
    assert cm["data"][front.AUTH_FILE] == serve_router.AUTH_MODULE.read_text()  # one hook for hosts and pods
    secret = _doc(docs, "Secret", front.KEYS_SECRET)
    assert secret["stringData"] == {"keys.json": gpulumi.REDACTED}  # digests come at deploy time, not in a render
    pod = _doc(docs, "Deployment", front.NAME)["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert {"name": "GRIDREADY_ROUTER_KEYS_FILE", "value": f"{front.KEYS_DIR}/keys.json"} in c["env"]
    assert {"name": "client-keys", "mountPath": front.KEYS_DIR, "readOnly": True} in c["volumeMounts"]
    assert {"name": "client-keys", "secret": {"secretName": front.KEYS_SECRET, "defaultMode": 0o400}} in pod["volumes"]


def test_without_client_keys_the_serving_key_stays_the_only_one(make_inv) -> None:
    docs = _render(_inv(make_inv, []))
    cm = _doc(docs, "ConfigMap", front.NAME)
    assert "custom_auth" not in yaml.safe_load(cm["data"]["config.yaml"])["general_settings"]
    assert front.AUTH_FILE not in cm["data"]
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == front.KEYS_SECRET]


def test_the_deploy_secret_holds_digests_and_limits_only(make_inv) -> None:
    inv = _inv(make_inv, KEYS)
    digests = json.loads(serve_router.client_key_digests(inv))  # the keys made in the vault on first use
    data = vault.read(inv.customer, inv.path)
    assert digests == [
        {"name": "team-a", "sha256": hashlib.sha256(data["vault_router_key_team_a"].encode()).hexdigest(),
         "rpm_limit": 60, "tpm_limit": None},
        {"name": "team-b", "sha256": hashlib.sha256(data["vault_router_key_team_b"].encode()).hexdigest(),
         "rpm_limit": None, "tpm_limit": 100000}]
    text = serve_router.client_key_digests(inv)
    assert data["vault_router_key_team_a"] not in text and data["vault_router_key_team_b"] not in text
    assert "routerKeys" in gpulumi.SECRET_KEYS["serving"]  # Pulumi secret config, never the plain stack config
