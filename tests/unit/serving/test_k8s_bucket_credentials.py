"""Object-storage LoRA adapters of vLLM tiers on Kubernetes get the bucket's credentials from the vault as a Secret
the Ray pods take as environment, never in argv, plain config or artifacts (issue 44, finding 4)."""

from __future__ import annotations

import json

import pytest

from gridready import pulumi as gpulumi
from gridready import vault
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

LORA = [{"name": "sql", "path": "s3://acme-adapters/sql"}]
BUCKET_SECRET = "lora-bucket"  # docs/kubernetes.md; gridready.stacks.serving.program.BUCKET_SECRET
# the modules this issue added are imported in the tests that use them, so that the others run (and fail) on the
# code before it


def test_the_ray_pods_take_the_bucket_secret_as_environment(make_inv) -> None:
    inv = make_inv(1, [vllm_tier(lora_adapters=LORA)], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01"]))
    config = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    docs = gpulumi.render("serving", config, "acme").manifests
    secret = next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == BUCKET_SECRET)
    assert secret["metadata"]["namespace"] == "gridready-serving"
    (rs,) = [d for d in docs if d["kind"] == "RayService"]
    rc = rs["spec"]["rayClusterConfig"]
    groups = [rc["headGroupSpec"], *rc["workerGroupSpecs"]]
    containers = [c for g in groups for c in g["template"]["spec"]["containers"]]
    assert all(c["envFrom"] == [{"secretRef": {"name": BUCKET_SECRET}}] for c in containers)


def test_a_tier_without_object_storage_adapters_gets_no_bucket_secret(make_inv) -> None:
    inv = make_inv(1, [vllm_tier()], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01"]))
    config = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    docs = gpulumi.render("serving", config, "acme").manifests
    assert not [d for d in docs if d["metadata"]["name"] == BUCKET_SECRET]


def test_the_credentials_come_from_the_vault_checked(make_inv) -> None:
    from gridready.stacks.serving.program import bucket_env
    from gridready.stages.serve import k8s_bucket as serve_k8s_bucket

    inv = make_inv(1, [vllm_tier(lora_adapters=LORA)], target="kubernetes")
    assert serve_k8s_bucket.env_json(inv.customer, inv.path) == "{}"
    creds = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}
    vault.write(inv.customer, inv.path, {serve_k8s_bucket.BUCKET_ENV_VAR: creds})
    text = serve_k8s_bucket.env_json(inv.customer, inv.path)
    assert bucket_env(text) == creds
    vault.write(inv.customer, inv.path, {serve_k8s_bucket.BUCKET_ENV_VAR: {"LD_PRELOAD": "/tmp/x.so"}})
    with pytest.raises(GridreadyError) as err:
        serve_k8s_bucket.env_json(inv.customer, inv.path)
    assert err.value.code == ExitCode.INVALID and serve_k8s_bucket.BUCKET_ENV_VAR in str(err.value)
    assert "LD_PRELOAD" in str(err.value) and "/tmp/x.so" not in str(err.value)


def test_the_bucket_env_is_pulumi_secret_config() -> None:
    assert "loraBucketEnv" in gpulumi.SECRET_KEYS["serving"]
    from gridready.stacks.serving.program import BUCKET_SECRET as NAME
    from gridready.stacks.serving.program import bucket_env

    assert NAME == BUCKET_SECRET
    assert bucket_env(gpulumi.REDACTED) == {} and bucket_env(json.dumps({"AWS_REGION": "eu"})) == {"AWS_REGION": "eu"}
