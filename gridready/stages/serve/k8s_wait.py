"""After `pulumi up`: wait until every serving workload's controller reports it ready, each within its budget.

pulumi-kubernetes awaits Deployments but not custom resources (RayService, LeaderWorkerSet: pulumi/pulumi-kubernetes
#3143), so `up` returns while KubeRay is still starting the Ray cluster. This step polls the Kubernetes API for the
objects the serving stack rendered (gridready.serving.k8s_status) and fails (exit 3) naming the tier and the
controller's last condition when one gives up or outlasts its budget.

The API is read with plain GETs (JSON) through the cluster and credentials of `serving.kubeconfig`'s current
context: a bearer token or a client certificate, the cluster's CA (or the system's). Exec and auth-provider
credential plugins are not run; such a kubeconfig is refused with a one-line error naming the key.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gridready import console
from gridready.errors import InvalidInput, StageFailed
from gridready.serving import k8s_status
from gridready.serving.k8s_status import Watch

Reader = Callable[[Watch], Mapping[str, Any] | None]
POLL_S = 15.0
REQUEST_TIMEOUT_S = 30.0
PLURALS = {"RayService": "rayservices", "LeaderWorkerSet": "leaderworkersets", "Deployment": "deployments",
           "Gateway": "gateways", "HTTPRoute": "httproutes"}


def _pick(items: list[Any], name: str, where: str) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    raise InvalidInput(f"{where}: no entry named {name!r}")


def object_path(watch: Watch) -> str:
    group = "/api/v1" if watch.api_version == "v1" else f"/apis/{watch.api_version}"
    return f"{group}/namespaces/{watch.namespace}/{PLURALS[watch.kind]}/{watch.name}"


class ApiReader:
    """GET of one object through the kubeconfig's current context; None when the API answers 404."""

    def __init__(self, kubeconfig_text: str, where: str) -> None:
        try:
            cfg = yaml.safe_load(kubeconfig_text) or {}
        except yaml.YAMLError as err:
            raise InvalidInput(f"{where}: not YAML: {str(err).splitlines()[0]}") from None
        if not isinstance(cfg, dict):
            raise InvalidInput(f"{where}: not a kubeconfig (a mapping)")
        current = cfg.get("current-context")
        if not current:
            raise InvalidInput(f"{where}: current-context is not set")
        context = _pick(cfg.get("contexts", []), current, f"{where}: contexts").get("context") or {}
        cluster = _pick(cfg.get("clusters", []), context.get("cluster", ""), f"{where}: clusters").get("cluster") or {}
        user = _pick(cfg.get("users", []), context.get("user", ""), f"{where}: users").get("user") or {}
        self.server = str(cluster.get("server") or "").rstrip("/")
        if not self.server.startswith(("https://", "http://")):
            raise InvalidInput(f"{where}: clusters[{context.get('cluster')}].server: not an http(s) URL")
        if "exec" in user or "auth-provider" in user:
            raise InvalidInput(f"{where}: users[{context.get('user')}]: credential plugins (exec, auth-provider) are "
                               "not run by gridready's status reader; use a token or a client certificate")
        self.headers = {"Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = f"Bearer {user['token']}"
        self._tmp = tempfile.TemporaryDirectory(prefix="gridready-kube-")
        self.context = self._tls(cluster, user, where) if self.server.startswith("https://") else None

    def _file(self, data_b64: str, name: str) -> str:
        path = Path(self._tmp.name) / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(base64.b64decode(data_b64))
        return str(path)

    def _tls(self, cluster: Mapping[str, Any], user: Mapping[str, Any], where: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        try:
            if cluster.get("insecure-skip-tls-verify"):
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            elif cluster.get("certificate-authority-data"):
                ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
            elif cluster.get("certificate-authority"):
                ctx.load_verify_locations(cafile=str(cluster["certificate-authority"]))
            cert = user.get("client-certificate-data") and self._file(user["client-certificate-data"], "cert.pem")
            key = user.get("client-key-data") and self._file(user["client-key-data"], "key.pem")
            cert = cert or user.get("client-certificate")
            key = key or user.get("client-key")
            if cert:
                ctx.load_cert_chain(cert, key)
        except (ValueError, OSError, ssl.SSLError) as err:
            raise InvalidInput(f"{where}: the cluster's CA or the client certificate cannot be used: {err}") from None
        return ctx

    def call(self, method: str, path: str, what: str) -> Mapping[str, Any] | None:
        """One request (JSON answer); None on 404; StageFailed naming `what` otherwise."""
        request = urllib.request.Request(self.server + path, headers=self.headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S, context=self.context) as answer:
                answer_json: Mapping[str, Any] = json.loads(answer.read())
                return answer_json
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise StageFailed(f"Kubernetes API: {method} {what}: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise StageFailed(f"Kubernetes API {self.server}: {method} {what}: {err}") from None

    def __call__(self, watch: Watch) -> Mapping[str, Any] | None:
        return self.call("GET", object_path(watch), watch.ref)


def wait_ready(read: Reader, watches: list[Watch], *, poll_s: float = POLL_S,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
               ) -> dict[str, str]:
    """Poll every workload until all are ready; StageFailed (exit 3) naming the tier and its controller's last
    condition as soon as one fails for good or outlasts its budget. Returns each workload's last detail."""
    start = clock()
    pending = {w.ref: w for w in watches}
    last: dict[str, str] = {}
    while True:
        for ref, watch in list(pending.items()):
            seen = k8s_status.state(watch.kind, read(watch))
            if seen.detail != last.get(ref):
                console.info(f"[kubernetes] tier {watch.tier}: {ref}: {'ready' if seen.ready else seen.detail}")
            last[ref] = seen.detail
            if seen.ready:
                del pending[ref]
            elif seen.failed or clock() - start >= watch.timeout_s:
                why = "its controller gave up" if seen.failed else f"not ready after {watch.timeout_s} s"
                raise StageFailed(f"tier {watch.tier}: {ref}: {why}; last condition: {seen.detail}")
        if not pending:
            return last
        sleep(poll_s)


def after_up(kubeconfig_text: str, where: str, rendered: Path, default_timeout_s: int,
             data: dict[str, Any], messages: list[str], reader: Reader | None = None) -> list[Watch]:
    """The hook of the Kubernetes deploy: every workload of the serving stack's render (`rendered`, its
    manifests.yaml) waited for through the API; the outcome in data["ready"] and one message. Returns the
    workloads waited for."""
    docs = [d for d in yaml.safe_load_all(rendered.read_text()) if isinstance(d, dict)]
    found = k8s_status.watches(docs, default_timeout_s)
    read = reader or ApiReader(kubeconfig_text, where)
    data["ready"] = wait_ready(read, found)
    messages.append(f"kubernetes: {len(found)} workloads ready ({', '.join(sorted({w.tier for w in found}))})")
    return found
