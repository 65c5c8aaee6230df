"""A fake Kubernetes API on loopback (tests only): GET of namespaced objects, bearer token checked, 404 for the
rest. Its objects carry only status fields the pinned controllers publish (KubeRay v1.7.0 RayService conditions
Ready/UpgradeInProgress with reasons Initializing, InitializingTimeout, NonZeroServeEndpoints; LWS v0.10.0
readyReplicas and Available/Progressing; apps/v1 Deployment status)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

TOKEN = "fake-token"


def kubeconfig(url: str) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "contexts": [{"name": "fake", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}]})


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-06T18:00:00Z"}


def rayservice(name: str, ready: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name},
            "status": {"conditions": [condition("Ready", ready, reason, message)],
                       "numServeEndpoints": 1 if ready == "True" else 0}}


@contextmanager
def serve(objects: dict[str, dict[str, Any]], seen: list[str] | None = None) -> Iterator[str]:
    """objects: API path (with its query, for a list) -> object; DELETE removes one. Yields the server's URL;
    `seen` collects "METHOD path" of every request."""
    seen = [] if seen is None else seen

    class Handler(BaseHTTPRequestHandler):
        def do_DELETE(self) -> None:
            self.do_GET(objects.pop(unquote(self.path), None))

        def do_GET(self, deleted: dict[str, Any] | None = None) -> None:
            path = unquote(self.path)  # as the API server reads a query's escaped label selector
            seen.append(f"{self.command} {path}")
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.send_response(401)
                self.end_headers()
                return
            body = deleted if self.command == "DELETE" else objects.get(path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body or {"kind": "Status", "code": 404}).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# What each controller publishes once a workload serves, and nothing else: KubeRay v1.7.0 rayservice_types.go
# (condition Ready, reasons Initializing / InitializingTimeout / NonZeroServeEndpoints; numServeEndpoints), LWS
# v0.10.0 leaderworkerset_types.go (readyReplicas, replicas, updatedReplicas, condition Available), apps/v1
# DeploymentStatus; Gateway API v1.6.1 (Gateway status.addresses and condition Programmed; HTTPRoute
# status.parents[].conditions Accepted). test_k8s_serves checks the keys against the vendored CRDs' status schemas.
def ready(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (a rendered object) as its controller reports it once it serves."""
    kind, replicas = doc["kind"], int((doc.get("spec") or {}).get("replicas") or 1)
    status: dict[str, Any]
    if kind == "RayService":
        status = {"conditions": [condition("Ready", "True", "NonZeroServeEndpoints")], "numServeEndpoints": 1}
    elif kind == "LeaderWorkerSet":
        status = {"conditions": [condition("Available", "True", "AllGroupsReady")], "readyReplicas": replicas,
                  "replicas": replicas, "updatedReplicas": replicas}
    elif kind == "Deployment":
        status = {"observedGeneration": 1, "replicas": replicas, "availableReplicas": replicas,
                  "updatedReplicas": replicas,
                  "conditions": [condition("Progressing", "True", "NewReplicaSetAvailable")]}
    elif kind == "HTTPRoute":
        status = {"parents": [{"parentRef": ref, "controllerName": "example.net/gateway-controller",
                               "conditions": [condition("Accepted", "True", "Accepted")]}
                              for ref in doc["spec"]["parentRefs"]]}
    else:
        raise ValueError(kind)
    return {**doc, "metadata": {**doc["metadata"], "generation": 1}, "status": status}


def gateway(name: str, address: str, port: int) -> dict[str, Any]:
    """A Gateway programmed by its controller, listening for HTTP on `port` at `address`."""
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": name},
            "spec": {"gatewayClassName": "example", "listeners": [{"name": "http", "port": port, "protocol": "HTTP"}]},
            "status": {"addresses": [{"type": "IPAddress", "value": address}],
                       "conditions": [condition("Accepted", "True", "Accepted"),
                                      condition("Programmed", "True", "Programmed")]}}


def path_of(doc: dict[str, Any]) -> str:
    """The API path of a namespaced object."""
    group = "/api/v1" if doc["apiVersion"] == "v1" else f"/apis/{doc['apiVersion']}"
    plural = {"RayService": "rayservices", "LeaderWorkerSet": "leaderworkersets", "Deployment": "deployments",
              "Gateway": "gateways", "HTTPRoute": "httproutes"}[doc["kind"]]
    return f"{group}/namespaces/{doc['metadata']['namespace']}/{plural}/{doc['metadata']['name']}"
