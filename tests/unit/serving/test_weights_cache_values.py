"""The weights cache to the value, in process: huggingface_hub's cache folder names ("Understand caching",
https://huggingface.co/docs/huggingface_hub/guides/manage-cache: `models--<org>--<name>`), the done-marker's
path and digest, the engines' offline environment, and one download per (model, revision) per node across tiers."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

from gridready.serving import weights
from gridready.spec.serving import ModelSource

LLAMA, COMMIT = "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"
QWEN, QWEN_REV = "Qwen/Qwen2.5-7B-Instruct", "a09a35458c702b33eeacc393d103063234e8bc28"


def test_cache_folders_are_huggingface_hub_s():
    assert weights.repo_folder(LLAMA) == "models--meta-llama--Llama-3.1-8B-Instruct"
    assert weights.repo_folder("gpt2") == "models--gpt2"
    assert weights.hub_cache() == "/var/lib/gridready/hf/hub"
    assert weights.hub_cache("/srv/hf") == "/srv/hf/hub"
    assert (weights.HF_HOME, weights.TOKEN_FILE) == ("/var/lib/gridready/hf", "/etc/gridready/hf-token")


def test_the_marker_is_named_for_the_repository_and_16_hex_of_sha256_of_id_at_revision():
    digest = hashlib.sha256(f"{LLAMA}@{COMMIT}".encode()).hexdigest()
    assert weights.marker(LLAMA, COMMIT) == (
        f"/var/lib/gridready/hf/gridready/models--meta-llama--Llama-3.1-8B-Instruct-{digest[:16]}.done")
    assert weights.marker(LLAMA, COMMIT, "/srv/hf").startswith("/srv/hf/gridready/models--meta-llama--")


def test_engines_read_the_node_cache_offline_and_a_local_path_needs_nothing():
    assert weights.engine_env(ModelSource(hf_id=LLAMA, revision=COMMIT)) == {
        "HF_HOME": "/var/lib/gridready/hf", "HF_HUB_OFFLINE": "1"}
    assert weights.engine_env(ModelSource(hf_id=LLAMA, revision=COMMIT), "/srv/hf") == {
        "HF_HOME": "/srv/hf", "HF_HUB_OFFLINE": "1"}
    assert weights.engine_env(ModelSource(local_path="/models/llama")) == {}


def test_one_download_names_the_model_revision_cache_and_marker():
    assert weights.download(ModelSource(hf_id=QWEN, revision=QWEN_REV), "/srv/hf") == {
        "hf_id": QWEN, "revision": QWEN_REV, "cache_dir": "/srv/hf/hub",
        "marker": weights.marker(QWEN, QWEN_REV, "/srv/hf")}
    assert weights.download(ModelSource(local_path="/models/qwen")) is None
    # a model without a revision never reaches here (the spec refuses it); a stand-in shows the guard
    assert weights.download(SimpleNamespace(hf_id=QWEN, revision=None)) is None  # type: ignore[arg-type]


def _plan(model: ModelSource, *replicas: tuple[str, ...]) -> SimpleNamespace:
    """What downloads_by_host reads of a TierPlan: the tier's model and its nodes, replica by replica."""
    return SimpleNamespace(tier=SimpleNamespace(model=model), nodes=tuple(n for r in replicas for n in r))


def test_each_node_downloads_each_model_of_its_tiers_once_in_tier_order():
    llama = ModelSource(hf_id=LLAMA, revision=COMMIT)
    qwen = ModelSource(hf_id=QWEN, revision=QWEN_REV)
    plans = [
        _plan(llama, ("n1", "n2"), ("n3", "n4")),
        _plan(ModelSource(local_path="/models/x"), ("n5",)),  # nothing to download: skipped, not the end
        _plan(qwen, ("n2",), ("n6",)),
        _plan(llama, ("n6",)),
        _plan(ModelSource(hf_id=LLAMA, revision="main"), ("n1",)),  # another revision: another download
    ]
    got = weights.downloads_by_host(plans)  # type: ignore[arg-type]
    one = {"hf_id": LLAMA, "revision": COMMIT, "cache_dir": "/var/lib/gridready/hf/hub",
           "marker": weights.marker(LLAMA, COMMIT)}
    two = {"hf_id": QWEN, "revision": QWEN_REV, "cache_dir": "/var/lib/gridready/hf/hub",
           "marker": weights.marker(QWEN, QWEN_REV)}
    main = {"hf_id": LLAMA, "revision": "main", "cache_dir": "/var/lib/gridready/hf/hub",
            "marker": weights.marker(LLAMA, "main")}
    assert got == {"n1": [one, main], "n2": [one, two], "n3": [one], "n4": [one], "n6": [two, one]}
    assert list(got) == ["n1", "n2", "n3", "n4", "n6"]
    assert weights.downloads_by_host([_plan(llama, ("n1",)), _plan(llama, ("n1",))]) == {  # type: ignore[list-item]
        "n1": [one]}
