"""certify with certification.runner kubernetes-job: a Job per node, waited for with a bound, each probe document
read from its pod's log and judged as the playbook's; a Job that fails or never runs is its node's ERROR naming
the Job's last condition. The cluster is a fake that reports what the API reports of a Job: only the fields of
batch/v1 JobStatus (Kubernetes API reference, workload-resources/job-v1: active, ready, succeeded, failed,
terminating, startTime, completionTime, conditions of type Complete, Failed, FailureTarget, SuccessCriteriaMet,
Suspended with status, reason, message, lastProbeTime, lastTransitionTime)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gridready import ansible, inventory
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.stages import certify as stage
from gridready.stages import certify_jobs, probe_jobs
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_stage import _bad, _ctx, _inv

REPO = Path(__file__).resolve().parents[3]
JOB_STATUS = {"active", "ready", "succeeded", "failed", "terminating", "startTime", "completionTime", "conditions",
              "completedIndexes", "failedIndexes", "uncountedTerminatedPods"}
CONDITION = {"type", "status", "reason", "message", "lastProbeTime", "lastTransitionTime"}
T = "2026-12-06T21:00:00Z"


def _cond(kind: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastProbeTime": T,
            "lastTransitionTime": T}


PENDING = {"active": 1, "ready": 0, "startTime": T}  # a pod not scheduled (yet)
RUNNING = {"active": 1, "ready": 1, "startTime": T}
COMPLETE = {"succeeded": 1, "startTime": T, "completionTime": T, "conditions": [
    _cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
    _cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]}
BACKOFF = {"failed": 1, "startTime": T, "conditions": [
    _cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    _cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]}
DEADLINE = {"active": 0, "failed": 1, "startTime": T, "conditions": [
    _cond("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")]}


def _log(doc: dict[str, Any]) -> str:
    return "\n".join(["probe: collector torch took 14 s", probe_jobs.BEGIN, json.dumps(doc, indent=1), "",
                      probe_jobs.END])


class FakeCluster:
    """The cluster as certify_jobs sees it: each Job's status moves along its script at every read; logs by node."""

    def __init__(self, scripts: dict[str, list[dict[str, Any] | None]], logs: dict[str, str | None]) -> None:
        self.scripts, self.logs = scripts, logs
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.node_of: dict[str, str] = {}
        self.reads = 0

    def create(self, obj: dict[str, Any]) -> None:
        self.created.append(obj)
        if obj["kind"] == "Job":
            self.node_of[obj["metadata"]["name"]] = obj["spec"]["template"]["spec"]["nodeSelector"][
                "kubernetes.io/hostname"]

    def job_statuses(self, namespace: str, run_id: str) -> dict[str, dict[str, Any]]:
        out = {}
        for name, node in self.node_of.items():
            script = self.scripts[node]
            status = script[min(self.reads, len(script) - 1)]
            if status is None:  # the API does not list it (yet)
                continue
            assert set(status) <= JOB_STATUS and all(set(c) <= CONDITION for c in status.get("conditions", []))
            out[name] = status
        self.reads += 1
        return out

    def job_log(self, namespace: str, job: str) -> str | None:
        return self.logs[self.node_of[job]]

    def delete_job(self, namespace: str, job: str) -> None:
        self.deleted.append(job)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _jobs_inv(tmp: Path) -> inventory.Inventory:
    inv = _inv(tmp)
    inv.spec.certification.runner = "kubernetes-job"
    inv.spec.certification.jobs.image = "registry.example/gridready-probe:1"
    return inv


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(scripts: dict[str, list[dict[str, Any] | None]], logs: dict[str, str | None]) -> FakeCluster:
        fake = FakeCluster(scripts, logs)
        clock = Clock()
        monkeypatch.setattr(certify_jobs.KubeApi, "from_inventory", classmethod(lambda cls, inv: fake))
        real_wait = certify_jobs.wait
        monkeypatch.setattr(certify_jobs, "wait", lambda *a, **kw: real_wait(*a, **{**kw, "clock": clock,
                                                                                   "sleep": clock.sleep}))
        fake.clock = clock  # type: ignore[attr-defined]

        def no_playbook(*a: Any, **kw: Any) -> None:
            raise AssertionError("the kubernetes-job runner ran the certify playbook")

        monkeypatch.setattr(ansible, "run_playbook", no_playbook)
        return fake
    return install


def test_a_job_per_node_and_its_document_judged_as_the_playbooks(tmp_path: Path, cluster: Any) -> None:
    fake = cluster({"gpu-a": [None, PENDING, RUNNING, COMPLETE], "gpu-b": [RUNNING, COMPLETE]},
                   {"gpu-a": _log(probe_quick()), "gpu-b": _log(_bad())})
    res = stage.run(_jobs_inv(tmp_path), _ctx(tmp_path, "20261206T210000Z-0001"))
    assert res.exit_code == ExitCode.OK and res.certified == ["gpu-a"] and res.quarantined == ["gpu-b"]
    assert "GPU 1" in res.hosts["gpu-b"].blocking[0]  # judged from the document, as with the playbook
    kinds = [o["kind"] for o in fake.created]
    assert kinds == ["ConfigMap", "Job", "Job"] and sorted(fake.node_of.values()) == ["gpu-a", "gpu-b"]
    probes = tmp_path / "artifacts" / "acme" / "20261206T210000Z-0001" / "certify" / "probes"
    assert json.loads((probes / "gpu-a" / "probe.json").read_text()) == probe_quick()
    assert res.data["runner"] == "kubernetes-job" and res.data["jobs_without_document"] == [] and not fake.deleted


@pytest.mark.parametrize(("status", "condition"), [
    (BACKOFF, "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit"),
    (DEADLINE, "Failed (DeadlineExceeded): Job was active longer than specified deadline"),
], ids=["probe-failed", "never-started-in-its-deadline"])
def test_a_failed_job_is_its_nodes_error_naming_its_last_condition(tmp_path: Path, cluster: Any,
                                                                   status: dict, condition: str) -> None:
    cluster({"gpu-a": [COMPLETE], "gpu-b": [PENDING, status]}, {"gpu-a": _log(probe_quick()), "gpu-b": None})
    res = stage.run(_jobs_inv(tmp_path), _ctx(tmp_path, "20261206T210000Z-0002"))
    name = probe_jobs.job_name("gpu-b", "20261206T210000Z-0002")
    assert res.certified == ["gpu-a"] and res.quarantined == ["gpu-b"]
    (line,) = [b for b in res.hosts["gpu-b"].blocking if "probe" in b]
    assert f"no probe output from this node (Job {name} failed; last condition: {condition})" in line


def test_a_job_that_never_ends_is_deleted_at_the_bound(tmp_path: Path, cluster: Any) -> None:
    fake = cluster({"gpu-a": [COMPLETE], "gpu-b": [None, PENDING]}, {"gpu-a": _log(probe_quick()), "gpu-b": None})
    inv = _jobs_inv(tmp_path)
    res = stage.run(inv, _ctx(tmp_path, "20261206T210000Z-0003"))
    name = probe_jobs.job_name("gpu-b", "20261206T210000Z-0003")
    spec = inv.spec.certification
    bound = spec.jobs.start_timeout_s + spec.probe_timeout_s + 60 + certify_jobs.GRACE_S
    assert fake.deleted == [name] and fake.clock.now == bound  # waited exactly its bound, no longer
    (line,) = [b for b in res.hosts["gpu-b"].blocking if "probe" in b]
    assert (f"Job {name} not finished after {bound} s, deleted; last condition: no condition yet (active 1)"
            in line)


def test_a_complete_job_without_a_document_is_its_nodes_error(tmp_path: Path, cluster: Any) -> None:
    cluster({"gpu-a": [COMPLETE], "gpu-b": [COMPLETE]}, {"gpu-a": _log(probe_quick()), "gpu-b": "Killed\n"})
    res = stage.run(_jobs_inv(tmp_path), _ctx(tmp_path, "20261206T210000Z-0004"))
    name = probe_jobs.job_name("gpu-b", "20261206T210000Z-0004")
    assert res.quarantined == ["gpu-b"]
    assert any(f"Job {name}: (log): no probe document between the markers" in b for b in res.hosts["gpu-b"].blocking)


def test_check_mode_jobs_leave_out_what_loads_the_gpus(tmp_path: Path, cluster: Any) -> None:
    fake = cluster({"gpu-a": [COMPLETE], "gpu-b": [COMPLETE]},
                   {"gpu-a": _log(probe_quick()), "gpu-b": _log(probe_quick())})
    ctx = _ctx(tmp_path, "20261206T210000Z-0005")
    ctx.check = True
    stage.run(_jobs_inv(tmp_path), ctx)
    script = fake.created[1]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    skip = script.split("--skip ")[1].split()[0].split(",")
    assert {"dcgm", "torch", "nccl_tests", "gpu_burn", "hca"} <= set(skip)


def test_a_limit_pattern_is_refused_with_the_job_runner(tmp_path: Path, cluster: Any) -> None:
    cluster({}, {})
    ctx = _ctx(tmp_path, "20261206T210000Z-0006")
    ctx.limit = "all,!gpu-b"
    with pytest.raises(InvalidInput) as err:
        stage.run(_jobs_inv(tmp_path), ctx)
    assert err.value.lines == ["--limit: (command line): all,!gpu-b: certification.runner kubernetes-job takes host "
                               "and group names only (a,b or a:b)"]


def test_the_objects_are_valid_kubernetes(tmp_path: Path) -> None:
    inv = inventory.load("acme-h200-k8s")
    assert inv.spec.certification.runner == "kubernetes-job"
    variables = stage.extravars(inv, tmp_path / "probes")
    objs = probe_jobs.render({h: 8 for h in inv.gpu_hosts()}, variables, run_id="20261206T210000Z-0007",
                             namespace=inv.spec.certification.jobs.namespace,
                             image=str(inv.spec.certification.jobs.image))
    for version in ("1.30.0", kubernetes_validate.utils.latest_version()):
        for obj in objs:
            kubernetes_validate.validate(obj, version, strict=True)
    broken = json.loads(json.dumps(objs[1]))
    broken["spec"]["template"]["spec"]["nodeSelectr"] = broken["spec"]["template"]["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):  # the check can fail
        kubernetes_validate.validate(broken, "1.30.0", strict=True)


@pytest.mark.parametrize(("edit", "line"), [
    ({"image": None}, "certification.jobs.image: required when certification.runner is kubernetes-job"),
    ({"kubeconfig": None}, "serving.kubeconfig: required when certification.runner is kubernetes-job"),
])
def test_the_job_runner_needs_its_image_and_a_kubeconfig(tmp_path: Path, edit: dict, line: str) -> None:
    import yaml

    inv = tmp_path / "acme-h200-k8s"
    shutil.copytree(REPO / "inventories" / "acme-h200-k8s", inv)
    cluster = yaml.safe_load((inv / "cluster.yml").read_text())
    if "image" in edit:
        del cluster["certification"]["jobs"]["image"]
    else:
        cluster["serving"]["target"] = "hosts"
        del cluster["serving"]["kubeconfig"]
    (inv / "cluster.yml").write_text(yaml.safe_dump(cluster))
    with pytest.raises(InvalidInput) as err:
        inventory.load(inv)
    assert [x for x in err.value.lines if line in x] and err.value.code == 2


def test_the_rest_calls_against_an_http_stand_in_on_loopback() -> None:
    """KubeApi's paths, queries, bodies and answers as the API server's REST interface has them (a ConfigMap that
    exists is replaced, Jobs listed by label page by page, a Job's pod found by its job-name label, its log read as
    text, a Job deleted with its pods); a missing namespace is one line naming the setting."""
    import http.server
    import threading
    import urllib.parse

    seen: list[tuple[str, str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, code: int, body: Any, text: bool = False) -> None:
            data = body.encode() if text else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> tuple[str, dict[str, list[str]]]:
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            assert self.headers["Authorization"] == "Bearer t0ken"
            seen.append((self.command, url.path, body))
            return url.path, urllib.parse.parse_qs(url.query)

        def do_POST(self) -> None:
            path, _ = self._record()
            if path.startswith("/api/v1/namespaces/missing/"):
                self._answer(404, {"kind": "Status", "reason": "NotFound"})
            else:
                self._answer(409 if path.endswith("/configmaps") else 201, {})

        def do_PUT(self) -> None:
            self._record()
            self._answer(200, {})

        def do_DELETE(self) -> None:
            self._record()
            self._answer(200, {})

        def do_GET(self) -> None:
            path, query = self._record()
            if path.endswith("/jobs"):
                assert query["labelSelector"] == ["gridready.io/run-id=r1"]
                page = query.get("continue", [""])[0]
                self._answer(200, {"metadata": {"continue": "" if page else "p2"}, "items": [
                    {"metadata": {"name": "job-b" if page else "job-a"}, "status": COMPLETE if page else RUNNING}]})
            elif path.endswith("/pods"):
                assert query["labelSelector"] == ["batch.kubernetes.io/job-name=job-a"]
                self._answer(200, {"items": [{"metadata": {"name": "job-a-x7k2p"}}]})
            else:
                assert path.endswith("/pods/job-a-x7k2p/log") and query["container"] == ["probe"]
                self._answer(200, _log({"schema": "x"}), text=True)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kubeconfig = {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                      "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                      "users": [{"name": "u", "user": {"token": "t0ken"}}]}
        api = certify_jobs.KubeApi(json.dumps(kubeconfig), "cluster.yml: serving.kubeconfig")
        cm = {"kind": "ConfigMap", "metadata": {"name": "gridready-probe", "namespace": "ns"}, "data": {}}
        job = {"kind": "Job", "metadata": {"name": "job-a", "namespace": "ns"}, "spec": {}}
        api.create(cm)
        api.create(job)
        assert api.job_statuses("ns", "r1") == {"job-a": RUNNING, "job-b": COMPLETE}
        assert probe_jobs.document_from_log(str(api.job_log("ns", "job-a")), "job-a") == {"schema": "x"}
        api.delete_job("ns", "job-a")
        with pytest.raises(certify_jobs.StageFailed, match=r"the namespace missing must exist .*"
                                                           r"certification\.jobs\.namespace"):
            api.create({**cm, "metadata": {"name": "gridready-probe", "namespace": "missing"}})
    finally:
        server.shutdown()
    # the ConfigMap exists (409): it is named by its content, so it is kept, never replaced under running Jobs
    assert [(m, p) for m, p, _ in seen[:3]] == [
        ("POST", "/api/v1/namespaces/ns/configmaps"),
        ("POST", "/apis/batch/v1/namespaces/ns/jobs"), ("GET", "/apis/batch/v1/namespaces/ns/jobs")]
    assert not [m for m, _, _ in seen if m == "PUT"]
    assert seen[1][2] == job and ("DELETE", "/apis/batch/v1/namespaces/ns/jobs/job-a", {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}) in seen
