"""No secret in any artifact: `invoke provision certify serve` on a sandbox fleet with canary secrets in the
customer's vault and in the controller's environment, then every file under artifacts/ is searched for them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]

CANARIES = {name: f"canary{name.lower().replace('_', '')}{secrets.token_hex(12)}" for name in (
    "VAULT_API_KEY", "VAULT_OTHER", "AWS_SECRET_ACCESS_KEY", "GRIDREADY_HF_TOKEN", "GRIDREADY_PULUMI_PASSPHRASE",
    "CI_JOB_TOKEN")}


def _write_vault(inv: Path, password: bytes) -> None:
    customer = yaml.safe_load((inv / "cluster.yml").read_text())["customer"]
    plain = yaml.safe_dump({"vault_gridready_vllm_api_key": CANARIES["VAULT_API_KEY"],
                            "vault_canary_other": CANARIES["VAULT_OTHER"]})
    vault = VaultLib([(customer, VaultSecret(password))])
    (inv / "group_vars" / "all" / "vault.yml").write_bytes(vault.encrypt(plain, vault.secrets[0][1], customer))
    # referenced from a plain file, as a customer would
    (inv / "group_vars" / "all" / "secrets-refs.yml").write_text(
        'gridready_canary_reference: "{{ vault_canary_other }}"\n')


@pytest.fixture(scope="module")
def run(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(3)
    tmp = tmp_path_factory.mktemp("canary")
    password = tmp / "vault-pass"
    password.write_text(secrets.token_urlsafe(24) + "\n")
    password.chmod(0o600)
    _write_vault(fleet.inventory, password.read_bytes().strip())
    artifacts = tmp / "artifacts"
    env = {**os.environ, "GRIDREADY_INVENTORY": str(fleet.inventory), "GRIDREADY_ARTIFACTS": str(artifacts),
           "GRIDREADY_VAULT_PASSWORD_FILE": str(password), "CI": "1",
           **{k: v for k, v in CANARIES.items() if not k.startswith("VAULT_")}}
    proc = subprocess.run([sys.executable, "-m", "invoke", "provision", "certify", "serve"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3000, check=False)
    return fleet, artifacts, proc


def test_the_pipeline_runs_with_the_vault_key(run):
    _, artifacts, proc = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    bench = list(artifacts.glob("*/*/serve/bench/*.json"))
    assert bench, "readiness, smoke and the benchmark ran against the tiers with the key"


def test_no_canary_in_any_artifact_or_output(run):
    _, artifacts, proc = run
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    assert len(files) > 50  # runner events, summaries, reports, rendered output: the search covered a real run
    found = [(p.relative_to(artifacts), name) for p in files for name, value in CANARIES.items()
             if value.encode() in p.read_bytes()]
    assert found == []
    assert not any(v in proc.stdout or v in proc.stderr for v in CANARIES.values())


def test_the_engine_refuses_requests_without_the_key(run):
    _, artifacts, _ = run
    summary = json.loads(next(artifacts.glob("*/*/serve/summary.json")).read_text())
    vllm = [e for e in summary["endpoints"] if e["engine"] == "vllm"]
    assert vllm
    url = vllm[0]["url"] + "/v1/models"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 401
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {CANARIES['VAULT_API_KEY']}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
