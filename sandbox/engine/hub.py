"""SIMULATED Hugging Face Hub for the sandbox: `hf download` into huggingface_hub's cache layout, and the check
an engine makes when it loads a Hub model from that cache. Stdlib only; runs as a script on the sandbox hosts
(`python3 hub.py download <repo> --revision <rev> --cache-dir <dir>`), where no Hub is reachable.

What it mimics, with sources:
- cache layout `models--<org>--<name>/{blobs,refs,snapshots/<commit>}`, a branch or tag revision stored as
  refs/<name> holding the commit ("Understand caching",
  https://huggingface.co/docs/huggingface_hub/guides/manage-cache);
- the token from HF_TOKEN, else the file at HF_TOKEN_PATH, else $HF_HOME/token ("Environment variables",
  https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables);
- the errors of `hf download` (huggingface_hub utils/_http.py hf_raise_for_status): an unknown repository is
  RepositoryNotFoundError ("Repository Not Found for url"), an unknown revision RevisionNotFoundError ("Revision
  Not Found for url" + the Hub's "Invalid rev id: <rev>"), a gated repository without a token GatedRepoError
  ("Cannot access gated repo for url");
- offline loading (HF_HUB_OFFLINE=1) of a revision missing from the cache: LocalEntryNotFoundError "Cannot find an
  appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been
  disabled" (huggingface_hub _snapshot_download.py); online, the sandbox has no route to the Hub, so the same
  lookup fails as a connection error does there.
The simulated Hub cannot check a real account's access: any token opens a gated repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ENDPOINT = "https://huggingface.co"
SIMULATED = "SIMULATED by gridready's sandbox hub: no weights inside"


class HubError(Exception):
    """One of huggingface_hub's errors: `kind` is its class name, str() its message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def line(self) -> str:
        return f"huggingface_hub.errors.{self.kind}: {self}"


# The repositories the sandbox inventories and tests serve: commit, branch heads, gated or not, architecture.
REPOS: dict[str, dict[str, object]] = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "commits": ["0e9e39f249a16976918f6564b8830bc894c89659"],
        "refs": {"main": "0e9e39f249a16976918f6564b8830bc894c89659"},
        "gated": True, "architecture": "LlamaForCausalLM",
    },
    "meta-llama/Llama-3.1-70B-Instruct": {
        "commits": ["1605565b47bb9346c5515c34102e054115b4f98b"],
        "refs": {"main": "1605565b47bb9346c5515c34102e054115b4f98b"},
        "gated": True, "architecture": "LlamaForCausalLM",
    },
    "meta-llama/Llama-3.3-70B-Instruct": {
        "commits": ["6f6073b423013f6a7d4d9f39144961bfbfbc386b"],
        "refs": {"main": "6f6073b423013f6a7d4d9f39144961bfbfbc386b"},
        "gated": True, "architecture": "LlamaForCausalLM",
    },
    # an embedding model with its ONNX export in the repository (onnx/model.onnx), for triton-embedding tiers
    "BAAI/bge-small-en-v1.5": {
        "commits": ["5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"],
        "refs": {"main": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
        "gated": False, "architecture": "BertModel", "files": ["onnx/model.onnx"],
    },
}


def is_hub_id(model: str) -> bool:
    """A `namespace/name` Hub id (not a path). Single names are the simulated engine's own local models."""
    parts = model.split("/")
    return len(parts) == 2 and all(parts) and not model.startswith((".", "/")) and not Path(model).exists()


def repo_folder(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


def token_from_env(env: dict[str, str]) -> str:
    if env.get("HF_TOKEN"):
        return env["HF_TOKEN"].strip()
    home = env.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    path = Path(env.get("HF_TOKEN_PATH") or f"{home}/token")
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def resolve(repo: str, revision: str, token: str) -> str:
    """The commit of `revision`, or the HubError `hf download` raises for it."""
    url = f"{ENDPOINT}/api/models/{repo}/revision/{revision}"
    info = REPOS.get(repo)
    if info is None:
        raise HubError("RepositoryNotFoundError",
                       f"404 Client Error. (Request ID: SIMULATED)\n\nRepository Not Found for url: {url}.\n"
                       "Please make sure you specified the correct `repo_id` and `repo_type`.\n"
                       "If you are trying to access a private or gated repo, make sure you are authenticated.")
    if info["gated"] and not token:
        raise HubError("GatedRepoError",
                       f"401 Client Error. (Request ID: SIMULATED)\n\nCannot access gated repo for url {url}.\n"
                       f"Access to model {repo} is restricted. You must have access to it and be authenticated "
                       "to access it. Please log in.")
    refs = info["refs"]
    assert isinstance(refs, dict)
    commit = refs.get(revision) or (revision if revision in info["commits"] else None)  # type: ignore[operator]
    if commit is None:
        raise HubError("RevisionNotFoundError",
                       f"404 Client Error. (Request ID: SIMULATED)\n\nRevision Not Found for url: {url}.\n"
                       f"Invalid rev id: {revision}")
    return str(commit)


def download(repo: str, revision: str, cache_dir: Path, token: str) -> Path:
    """Write the snapshot of `repo` at `revision` into the cache; return its folder (as `hf download` prints)."""
    commit = resolve(repo, revision, token)
    info = REPOS[repo]
    storage = cache_dir / repo_folder(repo)
    files = {
        "config.json": json.dumps({"architectures": [info["architecture"]], "_gridready": SIMULATED}, indent=2),
        "README.md": f"# {repo}@{commit}\n\n{SIMULATED}.\n",
    }
    extra = info.get("files", [])
    assert isinstance(extra, list)
    files.update({name: f"{SIMULATED}: {repo}@{commit} {name}\n" for name in extra})
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (storage / "blobs").mkdir(exist_ok=True)
    for name, text in files.items():
        data = text.encode()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            tmp = blob.with_name(blob.name + ".incomplete")
            tmp.write_bytes(data)
            tmp.replace(blob)
        link = snapshot / name
        if not link.is_symlink():  # snapshot files link to their blob, as deep as the file sits
            link.parent.mkdir(parents=True, exist_ok=True)
            up = Path(*[".."] * (len(Path(name).parts) + 1))
            link.symlink_to(up / "blobs" / blob.name)
    if revision != commit:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    return snapshot


def cached_snapshot(repo: str, revision: str | None, cache_dir: Path) -> Path | None:
    """The cached snapshot an offline load would use: the commit itself, or the commit refs/<revision> names."""
    storage = cache_dir / repo_folder(repo)
    revision = revision or "main"
    ref = storage / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    snapshot = storage / "snapshots" / commit
    return snapshot if (snapshot / "config.json").exists() else None


def hub_cache(env: dict[str, str]) -> Path:
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    home = env.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    return Path(home) / "hub"


def require_cached(repo: str, revision: str | None, env: dict[str, str]) -> Path:
    """What loading a Hub model does in the sandbox: the cached snapshot, else the error huggingface_hub raises
    (offline: nothing looked up; online: the Hub is unreachable from the sandbox)."""
    found = cached_snapshot(repo, revision, hub_cache(env))
    if found is not None:
        return found
    if env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise HubError("LocalEntryNotFoundError",
                       "Cannot find an appropriate cached snapshot folder for the specified revision on the local "
                       "disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, "
                       "set 'HF_HUB_OFFLINE=0' as environment variable.")
    raise HubError("LocalEntryNotFoundError",
                   "An error happened while trying to locate the files on the Hub, and we cannot find the "
                   "appropriate snapshot folder for the specified revision on the local disk. Please check your "
                   "internet connection and try again. (SIMULATED: the sandbox has no route to the Hub)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hf (SIMULATED)", description=f"{SIMULATED}: `hf download` of the sandbox")
    sub = ap.add_subparsers(dest="command", required=True)
    dl = sub.add_parser("download")
    dl.add_argument("repo_id")
    dl.add_argument("--revision", default="main")
    dl.add_argument("--cache-dir", type=Path)
    args = ap.parse_args(argv)
    env = dict(os.environ)
    cache = args.cache_dir or hub_cache(env)
    try:
        snapshot = download(args.repo_id, args.revision, cache, token_from_env(env))
    except HubError as err:
        print(err.line(), file=sys.stderr)
        return 1
    print(f"Fetching {len(list(snapshot.iterdir()))} files (SIMULATED)", file=sys.stderr)
    print(snapshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
