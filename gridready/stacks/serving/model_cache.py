"""The node-local Hugging Face cache of the GPU pods: a hostPath directory every serving pod on a node mounts as
HF_HOME, so a model revision is downloaded once per node and a restarted or rescheduled pod finds it there
instead of downloading the weights again past the RayService initializing timeout.

hostPath type DirectoryOrCreate makes the directory on first use (Kubernetes docs, Volumes, hostPath,
https://kubernetes.io/docs/concepts/storage/volumes/#hostpath); HF_HOME holds huggingface_hub's cache
(https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables). The ephemeral-storage
request reserves the pod's writable layer (vLLM's torch.compile cache, logs) on the node (Kubernetes docs,
Local ephemeral storage, https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/).

hostPath DirectoryOrCreate makes the directory root-owned 0755 (the kubelet creates it), and the Ray images run as
the user `ray`, uid 1000, gid 100 (ray-project/ray docker/base-deps/Dockerfile, RAY_UID/RAY_GID): an init container
of the same image running as root hands the directory to the pods' user before the engine starts.
"""

from __future__ import annotations

from typing import Any

VOLUME = "hf-cache"


def env(path: str) -> list[dict[str, Any]]:
    return [{"name": "HF_HOME", "value": path}]


def mount(path: str) -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": path}


def volume(path: str) -> dict[str, Any]:
    return {"name": VOLUME, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}


RAY_UID, RAY_GID = 1000, 100  # the `ray` user of the rayproject images


def owner_init(image: str, path: str, uid: int, gid: int) -> dict[str, Any]:
    """An init container (root, same image) that gives the cache directory to uid:gid before the engine runs."""
    return {
        "name": "hf-cache-owner",
        "image": image,
        "command": ["sh", "-c", f"mkdir -p {path} && chown {uid}:{gid} {path} && chmod 0775 {path}"],
        "securityContext": {"runAsUser": 0, "runAsGroup": 0},
        "volumeMounts": [mount(path)],
    }
