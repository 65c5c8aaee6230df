"""certify's probe as a Kubernetes Job per node (certification.runner: kubernetes-job): the ConfigMap and the Jobs
of gridready.stages.probe_jobs created on the cluster of serving.kubeconfig, their status read until each ends or
the bound passes, each finished Job's probe document read from its pod's log into probes/<node>/probe.json, where
the judge reads it as it reads a document the playbook fetched.

A node whose Job failed, never started or outlived the bound gets no document and a reason naming the Job's last
condition (its verdict: the probe gate's ERROR). The bound is the Job's own activeDeadlineSeconds (start, probe,
kill) plus GRACE_S for the Job controller to record the end; Jobs still unfinished then are deleted, with their
pods, so that none holds a node's GPUs after certify has given up on it.

The API is reached with plain HTTP through the kubeconfig's current context (gridready.stages.serve.k8s_wait's
reader: token or client certificate, no credential plugins).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import yaml

from gridready import console
from gridready.artifacts import make_dirs, write_atomic
from gridready.errors import InvalidInput, StageFailed
from gridready.inventory import Inventory, display_path
from gridready.stages import probe_jobs
from gridready.yamlio import YamlError, read_capped

GRACE_S = 120
PARALLEL_CALLS = 16  # Jobs created and logs read this many at a time
ROLE_VARS = Path(__file__).resolve().parents[2] / "roles" / "gridready_certify" / "vars" / "main.yml"


class ClusterApi(Protocol):
    """What the runner asks of the cluster."""

    def create(self, obj: dict[str, Any]) -> None:
        """Create the object; a ConfigMap that exists is kept (its name is its content's digest)."""

    def job_statuses(self, namespace: str, run_id: str) -> dict[str, Mapping[str, Any]]:
        """Job name -> its batch/v1 status, for the Jobs labelled with this run."""

    def job_log(self, namespace: str, job: str) -> str | None:
        """The log of the Job's pod; None when it has no pod."""

    def delete_job(self, namespace: str, job: str) -> None:
        """Delete the Job and its pods."""


def check_mode_skip() -> list[str]:
    """The probe collectors check mode leaves out (the role's own list: nothing loads the GPUs or the fabric)."""
    skip: list[str] = yaml.safe_load(ROLE_VARS.read_text())["__gridready_certify_check_skip"]
    return skip


def probe_all(inv: Inventory, hosts: list[str], variables: dict[str, Any], fetch_dir: Path, *, run_id: str,
              api: ClusterApi | None = None, clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Probe `hosts` with a Job each; write each document to fetch_dir/<host>/probe.json. Returns host -> why it
    has no document."""
    jobs_spec = inv.spec.certification.jobs
    api = api or KubeApi.from_inventory(inv)
    gpus = {h: inv.spec.group(inv.node_group_of(h) or "").gpus_per_node for h in hosts}  # type: ignore[union-attr]
    objs = probe_jobs.render(gpus, variables, run_id=run_id, namespace=jobs_spec.namespace,
                             image=str(jobs_spec.image), start_timeout_s=jobs_spec.start_timeout_s)
    names = {probe_jobs.job_name(h, run_id): h for h in hosts}
    api.create(objs[0])
    with ThreadPoolExecutor(PARALLEL_CALLS) as pool:
        list(pool.map(api.create, objs[1:]))
    console.info(f"[certify] {len(names)} probe Jobs created in namespace {jobs_spec.namespace}")
    bound = probe_jobs.deadline_s(variables, jobs_spec.start_timeout_s) + GRACE_S
    ended, last = wait(api, jobs_spec.namespace, run_id, names, bound=bound, poll_s=jobs_spec.poll_s, clock=clock,
                       sleep=sleep)
    missing: dict[str, str] = {}
    for name, host in names.items():
        if name not in ended:
            missing[host] = f"Job {name} not finished after {bound} s, deleted; last condition: {last[name]}"
            api.delete_job(jobs_spec.namespace, name)
        elif ended[name] == "failed":
            missing[host] = f"Job {name} failed; last condition: {last[name]}"
    done = [n for n in names if ended.get(n) == "complete"]
    namespace = jobs_spec.namespace

    def collect(name: str) -> str | None:
        """The Job's document read from its log and written for the judge (a few logs in memory at a time, not
        the fleet's); why there is none otherwise."""
        try:
            log = api.job_log(namespace, name)
            if log is None:
                raise InvalidInput(f"Job {name}: complete, but its pod is gone (no log to read)")
            doc = probe_jobs.document_from_log(log, f"Job {name}")
        except InvalidInput as err:
            return str(err)
        make_dirs(fetch_dir / names[name])
        write_atomic(fetch_dir / names[name] / "probe.json", json.dumps(doc).encode(), mode=0o644)
        return None

    make_dirs(fetch_dir)  # once, before the threads make each node's folder in it
    with ThreadPoolExecutor(PARALLEL_CALLS) as pool:
        for name, why in zip(done, pool.map(collect, done), strict=True):
            if why is not None:
                missing[names[name]] = why
    return missing


def wait(api: ClusterApi, namespace: str, run_id: str, names: Mapping[str, str], *, bound: float, poll_s: float,
         clock: Callable[[], float], sleep: Callable[[float], None]) -> tuple[dict[str, str], dict[str, str]]:
    """Read the Jobs' status until each has ended or `bound` seconds have passed: (name -> complete | failed,
    name -> its last condition in words)."""
    start = clock()
    ended: dict[str, str] = {}
    last = dict.fromkeys(names, "not seen by the API")
    while True:
        statuses = api.job_statuses(namespace, run_id)
        for name in names:
            if name in ended or name not in statuses:
                continue
            state, detail = probe_jobs.job_state(dict(statuses[name]))
            last[name] = detail
            if state is not None:
                ended[name] = state
        if len(ended) == len(names) or clock() - start >= bound:
            return ended, last
        sleep(min(poll_s, max(0.0, bound - (clock() - start))))


def kubeconfig_text(inv: Inventory) -> tuple[str, str]:
    """serving.kubeconfig read beneath the inventory (an absolute path is the operator's choice), and where it is
    named; InvalidInput (exit 2) naming the key when it cannot be read."""
    where = f"{display_path(inv.path / 'cluster.yml')}: serving.kubeconfig"
    if not inv.spec.serving.kubeconfig:
        raise InvalidInput(f"{where}: required when certification.runner is kubernetes-job")
    path = Path(inv.spec.serving.kubeconfig)
    root = None if path.is_absolute() else inv.path
    path = path if path.is_absolute() else inv.path / path
    try:
        return read_capped(path, root=root).decode("utf-8"), where
    except YamlError as err:
        raise InvalidInput(f"{where}: {path}: {err}") from None
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{where}: {path}: not UTF-8 (byte {err.start})") from None


LOG_LIMIT = 64 << 20


class KubeApi:
    """ClusterApi over the Kubernetes REST API (batch/v1 Jobs, v1 ConfigMaps, Pods and their logs)."""

    def __init__(self, kubeconfig: str, where: str) -> None:
        from gridready.stages.serve.k8s_wait import ApiReader

        self.reader = ApiReader(kubeconfig, where)

    @classmethod
    def from_inventory(cls, inv: Inventory) -> KubeApi:
        return cls(*kubeconfig_text(inv))

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None, *,
              raw: bool = False) -> tuple[int, Any]:
        import urllib.error
        import urllib.request

        r = self.reader
        data = None if body is None else json.dumps(body).encode()
        headers = {**r.headers, **({"Content-Type": "application/json"} if data is not None else {})}
        if raw:
            headers["Accept"] = "text/plain"
        request = urllib.request.Request(r.server + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30, context=r.context) as answer:
                payload = answer.read(LOG_LIMIT + 1)
                if len(payload) > LOG_LIMIT:
                    raise StageFailed(f"Kubernetes API: {method} {path}: answer larger than {LOG_LIMIT} bytes")
                return answer.status, payload.decode("utf-8", "replace") if raw else json.loads(payload or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise StageFailed(f"Kubernetes API {r.server}: {method} {path}: {err}") from None

    def _ok(self, method: str, path: str, body: dict[str, Any] | None = None, *, allow: tuple[int, ...] = (),
            raw: bool = False) -> tuple[int, Any]:
        code, answer = self._send(method, path, body, raw=raw)
        if code >= 300 and code not in allow:
            raise StageFailed(f"Kubernetes API: {method} {path}: HTTP {code}")
        return code, answer

    def create(self, obj: dict[str, Any]) -> None:
        ns, kind = obj["metadata"]["namespace"], obj["kind"]
        base = f"/api/v1/namespaces/{ns}/configmaps" if kind == "ConfigMap" else f"/apis/batch/v1/namespaces/{ns}/jobs"
        code, _ = self._send("POST", base, obj)
        if code == 404:
            raise StageFailed(f"Kubernetes API: POST {base}: HTTP 404 (the namespace {ns} must exist and admit "
                              "privileged pods: certification.jobs.namespace)")
        if code >= 300 and code != 409:
            raise StageFailed(f"Kubernetes API: POST {base} ({kind} {obj['metadata']['name']}): HTTP {code}")
        if code == 409 and kind == "ConfigMap":
            return  # named by its content's digest: the one there holds the same probe
        if code == 409:
            raise StageFailed(f"Kubernetes API: Job {obj['metadata']['name']} exists already in namespace {ns}")

    def job_statuses(self, namespace: str, run_id: str) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        token = ""
        while True:
            query = urllib.parse.urlencode({"labelSelector": f"gridready.io/run-id={run_id}", "limit": 500,
                                            **({"continue": token} if token else {})})
            _, answer = self._ok("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}")
            for item in answer.get("items") or []:
                out[item["metadata"]["name"]] = item.get("status") or {}
            token = (answer.get("metadata") or {}).get("continue") or ""
            if not token:
                return out

    def job_log(self, namespace: str, job: str) -> str | None:
        query = urllib.parse.urlencode({"labelSelector": f"batch.kubernetes.io/job-name={job}"})
        _, pods = self._ok("GET", f"/api/v1/namespaces/{namespace}/pods?{query}")
        items = [p["metadata"]["name"] for p in pods.get("items") or []]
        if not items:
            return None
        _, text = self._ok("GET", f"/api/v1/namespaces/{namespace}/pods/{items[-1]}/log?container=probe",
                           raw=True)
        return str(text)

    def delete_job(self, namespace: str, job: str) -> None:
        self._ok("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}",
                 {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}, allow=(404,))
