"""The node probe as a Kubernetes Job per node (gridready.stages.probe_jobs) for the reference Kubernetes inventory:
one Job per GPU node pinned to it with all its GPUs, the role's probe options, and the probe document read back
from the Job's log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gridready import inventory
from gridready.errors import InvalidInput
from gridready.stages import certify as stage
from gridready.stages import probe_jobs

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_certify" / "tasks" / "main.yml"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[inventory.Inventory, list[dict]]:
    inv = inventory.load("acme-h200-k8s")
    variables = stage.extravars(inv, tmp_path_factory.mktemp("certify") / "probes")
    hosts = {h: inv.spec.group(inv.node_group_of(h) or "").gpus_per_node for h in inv.gpu_hosts()}
    return inv, probe_jobs.render(hosts, variables, run_id="20261206T184500Z-ab12", namespace="gridready-certify",
                                  image="registry.example/gridready-probe:1")


def test_a_job_per_gpu_node_pinned_to_it_with_all_its_gpus(rendered: tuple) -> None:
    inv, objs = rendered
    jobs = [o for o in objs if o["kind"] == "Job"]
    assert len(jobs) == len(inv.gpu_hosts()) >= 2
    for j, host in zip(jobs, inv.gpu_hosts(), strict=True):
        pod = j["spec"]["template"]["spec"]
        assert DNS_LABEL.fullmatch(j["metadata"]["name"]) and j["metadata"]["annotations"]["gridready.io/node"] == host
        assert pod["nodeSelector"] == {"kubernetes.io/hostname": host} and pod["restartPolicy"] == "Never"
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
        assert j["spec"]["backoffLimit"] == 0
        assert j["spec"]["activeDeadlineSeconds"] > inv.spec.certification.probe_timeout_s
    assert len({j["metadata"]["name"] for j in jobs}) == len(jobs)


def test_job_names_stay_dns_labels_for_long_host_names() -> None:
    name = probe_jobs.job_name("GPU_Node.rack-17.example.internal" * 3, "20261206T184500Z-ab12")
    assert DNS_LABEL.fullmatch(name) and len(name) <= 63


def test_the_job_runs_the_probe_with_the_roles_options(rendered: tuple, tmp_path: Path) -> None:
    _, objs = rendered
    script = next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]["command"][2]
    role = ROLE.read_text()
    task = role[role.index("- name: Run the probe"):role.index("- name: Fetch the probe JSON")]
    flags = set(re.findall(r"'(--[a-z][a-z-]*)", task))
    # the nccl-tests directory is passed only where gridready_certify_nccl_tests_dir is set (default "")
    assert flags and flags - {"--nccl-tests-dir"} == set(re.findall(r"(?<= )(--[a-z][a-z-]*)", script.split(" 2>")[0]))
    assert "--profile standard" in script and "-m gridready_probe" in script
    variables = {**stage.extravars(inventory.load("acme-h200-k8s"), tmp_path / "probes"),
                 "gridready_certify_nccl_tests_dir": "/opt/nccl-tests/bin"}
    assert probe_jobs.probe_argv(variables)[-2:] == ["--nccl-tests-dir", "/opt/nccl-tests/bin"]


def test_the_probe_package_fits_a_configmap(rendered: tuple) -> None:
    _, objs = rendered
    cm = objs[0]
    assert cm["kind"] == "ConfigMap" and "__main__.py" in cm["data"] and "collect.py" in cm["data"]
    assert len(json.dumps(cm).encode()) < 1 << 20  # the API server's limit on one object


def test_the_probe_document_comes_back_from_the_log() -> None:
    doc = {"schema": "gridready.probe/1", "host": "gpu01", "note": "a line\n" + probe_jobs.END}
    log = "\n".join(["probe: starting", probe_jobs.BEGIN, json.dumps(doc, indent=1), "", probe_jobs.END,
                     "probe: collector dcgm took 612 s"])
    assert probe_jobs.document_from_log(log, "job gridready-probe-gpu01") == doc
    with pytest.raises(InvalidInput, match=r"^job gridready-probe-gpu01: \(log\): no probe document"):
        probe_jobs.document_from_log("probe: killed\n", "job gridready-probe-gpu01")
    with pytest.raises(InvalidInput, match="not JSON"):
        probe_jobs.document_from_log(f"{probe_jobs.BEGIN}\n{{truncated\n{probe_jobs.END}\n", "job x")


def test_the_containers_script_prints_the_document_last_and_keeps_the_probes_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the container's shell line with a stand-in probe: its log's tail first, the document last (the kubelet
    rotates a long log and serves only the current file), the probe's exit code the container's."""
    import subprocess
    import sys

    monkeypatch.setattr(probe_jobs, "OUT", str(tmp_path / "probe.json"))
    monkeypatch.setattr(probe_jobs, "LOG", str(tmp_path / "probe.log"))
    probe = ("import json, sys; print('x' * 100, file=sys.stderr); "
             f"json.dump({{'schema': 'gridready.probe/1'}}, open({str(tmp_path / 'probe.json')!r}, 'w')); sys.exit(3)")
    script = probe_jobs._script([sys.executable, "-c", probe])
    # one stream, in the order written, as the pod's log holds stdout and stderr
    run = subprocess.run(["/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=False)
    log = run.stdout
    assert run.returncode == 3 and log.startswith("x" * 100) and log.rstrip().endswith(probe_jobs.END)
    assert probe_jobs.document_from_log(log, "job x") == {"schema": "gridready.probe/1"}


def test_the_probe_configmap_is_immutable_and_named_by_its_content(rendered: tuple) -> None:
    """Two certify runs in one namespace (two releases of gridready, or one run beside another) never replace each
    other's probe under running Jobs: the ConfigMap's name is its content's digest and it is immutable."""
    _, objs = rendered
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    name = cm["metadata"]["name"]
    assert cm["immutable"] is True and DNS_LABEL.fullmatch(name) and name.startswith("gridready-probe-")
    assert "collect.py" in cm["data"] and "__main__.py" in cm["data"]
    for j in (o for o in objs if o["kind"] == "Job"):
        assert j["spec"]["template"]["spec"]["volumes"] == [{"name": "probe", "configMap": {"name": name}}]
    same = probe_jobs.probe_configmap("gridready-certify", dict(cm["data"]))
    changed = {**cm["data"], "collect.py": cm["data"]["collect.py"] + "#"}
    other = probe_jobs.probe_configmap("gridready-certify", changed)
    assert same["metadata"]["name"] == name and other["metadata"]["name"] != name
