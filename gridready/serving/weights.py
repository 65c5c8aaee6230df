"""Model weights on hosts: one Hugging Face cache per node, filled once per (model, revision) before any engine
starts, then read offline by the engines.

- Layout: huggingface_hub's cache under HF_HOME (`$HF_HOME/hub/models--<org>--<name>/snapshots/<commit>/`,
  `refs/<branch-or-tag>` holding the commit), shared by every engine and library on the node ("Understand
  caching", https://huggingface.co/docs/huggingface_hub/guides/manage-cache).
- Download: `hf download <repo> --revision <rev> --cache-dir $HF_HOME/hub` ("Command Line Interface",
  https://huggingface.co/docs/huggingface_hub/guides/cli); an interrupted download resumes from the blobs
  already in the cache. The token is read from HF_TOKEN_PATH (a root-only file), never from argv
  ("Environment variables", https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables).
- Engines: HF_HOME points at the cache and HF_HUB_OFFLINE=1 keeps them from reaching the Hub again, so every
  node of a multi-node tier loads the same pre-downloaded revision (vLLM, Parallelism and Scaling, "Pre-download
  Hugging Face models", https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html).
"""

from __future__ import annotations

import hashlib
from typing import Any

from gridready.serving.topology import TierPlan
from gridready.spec.serving import ModelSource

HF_HOME = "/var/lib/gridready/hf"
TOKEN_FILE = "/etc/gridready/hf-token"  # root 0600; HF_TOKEN_PATH of the download, never an engine argument


def repo_folder(hf_id: str) -> str:
    """huggingface_hub's folder name of a model repository in the cache."""
    return "models--" + hf_id.replace("/", "--")


def hub_cache(home: str = HF_HOME) -> str:
    return f"{home}/hub"


def marker(hf_id: str, revision: str, home: str = HF_HOME) -> str:
    """Written after a download completed: a partial snapshot (interrupted download) never counts as done."""
    digest = hashlib.sha256(f"{hf_id}@{revision}".encode()).hexdigest()[:16]
    return f"{home}/gridready/{repo_folder(hf_id)}-{digest}.done"


def engine_env(model: ModelSource, home: str = HF_HOME) -> dict[str, str]:
    """Environment of an engine that loads `model`: the node's cache, offline (nothing for a local path)."""
    if model.hf_id is None:
        return {}
    return {"HF_HOME": home, "HF_HUB_OFFLINE": "1"}


def download(model: ModelSource, home: str = HF_HOME) -> dict[str, Any] | None:
    """One download of the serve playbook (roles/gridready_model_weights), or None for a local path."""
    if model.hf_id is None or model.revision is None:
        return None
    return {
        "hf_id": model.hf_id,
        "revision": model.revision,
        "cache_dir": hub_cache(home),
        "marker": marker(model.hf_id, model.revision, home),
    }


def downloads_by_host(plans: list[TierPlan]) -> dict[str, list[dict[str, Any]]]:
    """Per serving node, the distinct (model, revision) pairs its tiers load: each is downloaded once per node."""
    out: dict[str, list[dict[str, Any]]] = {}
    for plan in plans:
        entry = download(plan.tier.model)
        if entry is None:
            continue
        for name in plan.nodes:
            wanted = out.setdefault(name, [])
            if entry not in wanted:
                wanted.append(entry)
    return out
