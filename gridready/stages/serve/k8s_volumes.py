"""`serve --down --purge-volumes` on Kubernetes: delete the claims the serving stack keeps on destroy.

The weights and engine-cache PersistentVolumeClaims (label gridready.io/kept-volume, gridready/stacks/serving/
triton.py) are retained by Pulumi on `destroy`, so the next `serve` neither downloads the weights nor builds the
engines again. Purging lists them in the serving namespace through the Kubernetes API and deletes each; the
StorageClass's reclaim policy decides what becomes of the volumes behind them.
"""

from __future__ import annotations

from urllib.parse import quote

from gridready.stacks.serving.triton import KEPT_VOLUME_LABEL
from gridready.stages.serve.k8s_wait import ApiReader

MANAGED = "app.kubernetes.io/managed-by=gridready"


def claims_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"


def purge(api: ApiReader, namespace: str) -> list[str]:
    """Delete the kept claims of `namespace`; returns their names."""
    selector = quote(f"{KEPT_VOLUME_LABEL}=true,{MANAGED}", safe="=,")
    listed = api.call("GET", f"{claims_path(namespace)}?labelSelector={selector}", f"claims of {namespace}") or {}
    names = sorted(str(item["metadata"]["name"]) for item in listed.get("items") or [])
    for name in names:
        api.call("DELETE", f"{claims_path(namespace)}/{name}", f"PersistentVolumeClaim {namespace}/{name}")
    return names
