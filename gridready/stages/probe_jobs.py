"""The node probe as a Kubernetes Job per node, for a fleet one Ansible controller cannot fan out to
(docs/benchmarks.md, 'Fan-out'): every node probes itself at once and the controller only reads the documents
back and judges them as the certify stage does.

`render` gives a ConfigMap holding the probe package (the same files the role sends) and one batch/v1 Job per node,
pinned to it by its `kubernetes.io/hostname` label (the inventory's host name), tolerating every taint (a node
quarantined by an earlier run is probed again), asking for all its GPUs, privileged with the host's PID namespace
and network (the probe reads dmesg, sysfs, dcgmi and the HCAs as on the host), and running the probe with the
options the role passes (`probe_argv`, from the same role variables). The container prints the tail of the
probe's own log, then the probe document between two marker lines, last: the kubelet rotates a container's log at
containerLogMaxSize (10Mi by default) and the log endpoint serves the current file only, so the document is written
where rotation cannot have moved it. `document_from_log` takes the document out of the pod's log as
probes/<node>/probe.json, which the stage's judge reads unchanged; `job_state` reads a Job's batch/v1 status.

Why the log: every cluster serves a finished pod's log through the API (GET .../pods/<pod>/log) for as long as the
pod exists (`ttlSecondsAfterFinished` keeps it a day) with no permission in the pod; a ConfigMap written from the
pod needs a ServiceAccount allowed to write ConfigMaps on every GPU node and holds at most 1 MiB, and a volume
(hostPath) needs the controller to reach each node again, which is what the Job per node is there to avoid.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

from gridready.errors import InvalidInput

BEGIN, END = "----- gridready probe document -----", "----- end of the gridready probe document -----"
PROBE_DIR = "/opt/gridready_probe"
OUT = "/tmp/probe.json"
LOG = "/tmp/probe.log"
CONFIGMAP = "gridready-probe"  # the ConfigMap's name prefix; the suffix is its content's digest
_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def probe_argv(v: dict[str, Any], python: str = "python3") -> list[str]:
    """The probe's command line from the certify role's variables (gridready.stages.certify.extravars), as the role's
    'Run the probe' task builds it (roles/gridready_certify/tasks/main.yml; a test holds the two to the same flags)."""
    argv = ["timeout", "--kill-after=30", str(v["gridready_certify_timeout_s"]), python, "-m", "gridready_probe",
            "--profile", v["gridready_certify_profile"], "--algo", v["gridready_certify_algo"],
            "--nccl-min-bytes", str(v["gridready_certify_nccl_min_bytes"]),
            "--nccl-max-bytes", str(v["gridready_certify_nccl_max_bytes"]),
            "--best-of", str(v["gridready_certify_best_of"]),
            "--nccl-check-iters", str(v["gridready_certify_nccl_check_iters"]),
            "--collectives", ",".join(v["gridready_certify_collectives"]),
            "--dcgm-precision", v["gridready_certify_dcgm_precision"],
            "--dcgm-outlier-pcnt", str(v["gridready_certify_dcgm_outlier_pcnt"]),
            "--timeout", str(v["gridready_certify_gate_timeout_s"]),
            "--skip", ",".join(dict.fromkeys(v["gridready_certify_skip"])), "--out", OUT]
    if int(v["gridready_certify_dcgm_level"]) > 0:
        argv += ["--dcgm-level", str(v["gridready_certify_dcgm_level"])]
    if v.get("gridready_certify_nccl_tests_dir"):
        argv += ["--nccl-tests-dir", v["gridready_certify_nccl_tests_dir"]]
    return argv


def job_name(host: str, run_id: str) -> str:
    """A DNS-1123 label unique per node and run: gridready-probe-<host>-<run>, cut to 63 characters."""
    base = _DNS_LABEL.sub("-", f"{host}-{run_id}".lower()).strip("-")
    return f"gridready-probe-{base}"[:63].rstrip("-")


LOG_TAIL_BYTES = 65536


def _script(argv: list[str]) -> str:
    """The probe, then the tail of its log on stderr, then its document between the markers on stdout, last; the
    probe's exit code."""
    return (f"{shlex.join(argv)} 2>{LOG}; rc=$?; tail -c {LOG_TAIL_BYTES} {LOG} >&2; echo {shlex.quote(BEGIN)}; "
            f"cat {OUT}; echo; echo {shlex.quote(END)}; exit $rc")


def job(host: str, *, run_id: str, namespace: str, image: str, gpus: int, argv: list[str], configmap: str,
        deadline_s: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "gridready-probe", "app.kubernetes.io/managed-by": "gridready",
              "gridready.io/run-id": run_id}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(host, run_id), "namespace": namespace, "labels": labels,
                     "annotations": {"gridready.io/node": host}},
        "spec": {
            "backoffLimit": 0,  # a probe that failed is a verdict, not something to retry
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": host},
                    "tolerations": [{"operator": "Exists"}],
                    "hostPID": True, "hostNetwork": True,
                    "containers": [{
                        "name": "probe", "image": image,
                        "command": ["/bin/sh", "-c", _script(argv)],
                        "workingDir": "/tmp",
                        "env": [{"name": "PYTHONPATH", "value": str(Path(PROBE_DIR).parent)}],
                        "resources": {"limits": {"nvidia.com/gpu": gpus}},
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "probe", "mountPath": PROBE_DIR, "readOnly": True}],
                    }],
                    "volumes": [{"name": "probe", "configMap": {"name": configmap}}],
                },
            },
        },
    }


def probe_configmap(namespace: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    """The probe package's modules (gridready/probe, flat: the keys are file names) as an immutable ConfigMap named
    by its content's digest: runs of one gridready release share it, a run of another release (or a concurrent one
    in the same namespace) gets its own, so no run's Jobs ever see another run's probe. A mounted ConfigMap that is
    replaced is updated in running pods by the kubelet; an immutable one cannot be changed at all ("Immutable
    ConfigMaps", https://kubernetes.io/docs/concepts/configuration/configmap/#configmap-immutable, GA in 1.21)."""
    if data is None:
        from gridready import probe

        src = Path(probe.__file__).parent
        data = {p.name: p.read_text() for p in sorted(src.glob("*.py"))}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": {"name": f"{CONFIGMAP}-{digest}", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "gridready-probe",
                                    "app.kubernetes.io/managed-by": "gridready"}},
            "data": data}


def deadline_s(variables: dict[str, Any], start_timeout_s: int) -> int:
    """A Job's activeDeadlineSeconds: time to start (scheduling, image pull), the probe's own limit and its kill."""
    return start_timeout_s + int(variables["gridready_certify_timeout_s"]) + 60


def render(hosts: dict[str, int], variables: dict[str, Any], *, run_id: str, namespace: str,
           image: str, start_timeout_s: int = 120) -> list[dict[str, Any]]:
    """The ConfigMap and a Job per host (host -> GPUs per node) for one certify run."""
    argv = probe_argv(variables)
    deadline = deadline_s(variables, start_timeout_s)
    cm = probe_configmap(namespace)
    return [cm, *(job(h, run_id=run_id, namespace=namespace, image=image, gpus=n, argv=argv,
                      configmap=cm["metadata"]["name"], deadline_s=deadline) for h, n in hosts.items())]


def document_from_log(log: str, where: str) -> dict[str, Any]:
    """The probe document between the markers of a Job's log; InvalidInput naming `where` when there is none."""
    lines = log.splitlines()
    try:
        start, stop = lines.index(BEGIN), lines.index(END)
    except ValueError:
        raise InvalidInput(f"{where}: (log): no probe document between the markers (the probe did not finish)") \
            from None
    try:
        doc = json.loads("\n".join(lines[start + 1:stop]))
    except json.JSONDecodeError as err:
        raise InvalidInput(f"{where}: (log): the probe document is not JSON ({err.msg})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: (log): the probe document is not a JSON object")
    return doc


def job_state(status: dict[str, Any] | None) -> tuple[str | None, str]:
    """("complete" | "failed" | None while it runs, the last condition in words) from a Job's batch/v1 `status`
    (JobStatus: conditions of type Complete or Failed end it; FailureTarget and SuccessCriteriaMet come before
    them and do not; Kubernetes API reference, workload-resources/job-v1)."""
    status = status or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    for kind, state in (("Failed", "failed"), ("Complete", "complete")):
        done = next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)
        if done is not None:
            return state, _condition(done)
    if conditions:
        return None, _condition(conditions[-1])
    counts = ", ".join(f"{k} {status[k]}" for k in ("active", "ready", "succeeded", "failed") if status.get(k))
    return None, f"no condition yet ({counts or 'no pod started'})"


def _condition(c: dict[str, Any]) -> str:
    reason = f" ({c['reason']})" if c.get("reason") else ""
    message = f": {c['message']}" if c.get("message") else ""
    return f"{c.get('type')}{reason}{message}"
