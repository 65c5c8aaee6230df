"""Model weights: one download per node and revision, engines offline on the node's cache, the simulated Hub's
errors as huggingface_hub prints them, and the simulated engine refusing a Hub model missing from the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gridready.serving import sglang, topology, vllm, weights
from gridready.spec.serving import ModelSource
from sandbox.engine import hub
from tests.summaries import certified_ledger
from tests.unit.bench.conftest import REPO, engine_factory
from tests.unit.serving.conftest import vllm_tier

__all__ = ["engine_factory"]

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"


def _plan(make_inv, nodes: int):
    inv = make_inv(nodes, [vllm_tier(pipeline_parallel=nodes)])
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    (plan,) = topology.plan_tiers(inv, cert)
    return inv, cert, plan


def test_every_node_of_a_tier_downloads_its_revision_once(make_inv):
    inv, cert, plan = _plan(make_inv, 2)
    model = plan.tier.model
    by_host = weights.downloads_by_host([plan, plan])  # the same tier twice: still one download per node
    assert sorted(by_host) == ["gpu01", "gpu02"]
    for entries in by_host.values():
        assert entries == [{"hf_id": model.hf_id, "revision": model.revision, "cache_dir": "/var/lib/gridready/hf/hub",
                            "marker": weights.marker(model.hf_id, model.revision)}]
    # every rank (Ray on each node; each SGLang rank) loads offline from that node's cache
    for name in ("gpu01", "gpu02"):
        for env in (vllm.node_env(plan, cert.certified[name], inv.spec.serving),
                    sglang.node_env(plan, cert.certified[name], inv.spec.serving)):
            assert env["HF_HOME"] == "/var/lib/gridready/hf" and env["HF_HUB_OFFLINE"] == "1"
    assert "--revision" in vllm.serve_args(plan) and model.revision in vllm.serve_args(plan)


def test_a_local_path_model_needs_no_download_and_no_hub_env():
    local = ModelSource(local_path="/models/llama")
    assert weights.download(local) is None
    assert weights.engine_env(local) == {}
    hub_model = ModelSource(hf_id=LLAMA, revision=COMMIT)
    assert weights.engine_env(hub_model) == {"HF_HOME": weights.HF_HOME, "HF_HUB_OFFLINE": "1"}
    assert weights.marker(LLAMA, COMMIT) != weights.marker(LLAMA, "main")


def test_simulated_hub_writes_the_cache_layout(tmp_path):
    snap = hub.download(LLAMA, "main", tmp_path, token="hf_test")
    storage = tmp_path / "models--meta-llama--Llama-3.1-8B-Instruct"
    assert snap == storage / "snapshots" / COMMIT
    assert (storage / "refs" / "main").read_text() == COMMIT
    assert (snap / "config.json").is_symlink() and "LlamaForCausalLM" in (snap / "config.json").read_text()
    assert hub.cached_snapshot(LLAMA, "main", tmp_path) == snap
    assert hub.cached_snapshot(LLAMA, COMMIT, tmp_path) == snap
    assert hub.download(LLAMA, COMMIT, tmp_path, token="hf_test") == snap  # a second download changes nothing


@pytest.mark.parametrize(("repo", "revision", "token", "kind", "text"), [
    ("acme/no-such-model", "main", "hf_test", "RepositoryNotFoundError",
     "Repository Not Found for url: https://huggingface.co/api/models/acme/no-such-model/revision/main."),
    (LLAMA, "ffffffffffffffffffffffffffffffffffffffff", "hf_test", "RevisionNotFoundError",
     "Invalid rev id: ffffffffffffffffffffffffffffffffffffffff"),
    (LLAMA, COMMIT, "", "GatedRepoError", f"Cannot access gated repo for url https://huggingface.co/api/models/{LLAMA}"),
])
def test_simulated_hub_refuses_as_hf_download_does(tmp_path, repo, revision, token, kind, text):
    with pytest.raises(hub.HubError) as err:
        hub.download(repo, revision, tmp_path, token=token)
    assert err.value.kind == kind and text in str(err.value)
    assert not list(tmp_path.iterdir())  # nothing written


def test_simulated_hub_cli_reads_the_token_file_never_argv(tmp_path):
    token = tmp_path / "hf-token"
    token.write_text("hf_fromthevault\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    cmd = [sys.executable, str(REPO / "sandbox/engine/hub.py"), "download", LLAMA, "--revision", COMMIT,
           "--cache-dir", str(tmp_path / "hub")]
    refused = subprocess.run(cmd, env={**base, "HF_TOKEN_PATH": str(tmp_path / "absent")}, capture_output=True,
                             text=True)
    assert refused.returncode == 1 and "huggingface_hub.errors.GatedRepoError" in refused.stderr
    done = subprocess.run(cmd, env={**base, "HF_TOKEN_PATH": str(token)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"snapshots/{COMMIT}")


def _engine(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return subprocess.run([sys.executable, "-m", "sandbox.engine", "serve", LLAMA, "--revision", COMMIT,
                           "--host", "127.0.0.1", "--port", "0", "--hardware-profile", "none", *args],
                          cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_simulated_engine_fails_on_a_model_missing_from_the_cache(tmp_path):
    offline = _engine(tmp_path, {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 1
    assert ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for "
            "the specified revision on the local disk and outgoing traffic has been disabled") in offline.stderr
    online = _engine(tmp_path, {"HF_HOME": str(tmp_path / "hf")})
    assert online.returncode == 1 and "Please check your internet connection" in online.stderr
    # the wrong revision is missing too, even with another revision of the same model cached
    hub.download(LLAMA, COMMIT, tmp_path / "hf" / "hub", token="hf_test")
    other = subprocess.run([sys.executable, "-m", "sandbox.engine", "serve", LLAMA, "--revision", "v9",
                            "--host", "127.0.0.1", "--port", "0"], cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, timeout=60)
    assert other.returncode == 1 and "LocalEntryNotFoundError" in other.stderr


def test_simulated_engine_serves_a_model_found_in_the_cache(tmp_path, engine_factory):
    hub.download(LLAMA, COMMIT, tmp_path / "hf" / "hub", token="hf_test")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    e = engine_factory("--model", LLAMA, "--revision", COMMIT, "--served-model-name", "llama", env=env)
    assert e.proc.poll() is None
    assert f"snapshots/{COMMIT}" in e.log()
