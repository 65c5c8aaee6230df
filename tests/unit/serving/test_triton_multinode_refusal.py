"""A Triton TRT-LLM replica across nodes (issue 44, findings 5 and 6): refused at validate on hosts (the role
serves one node) and on Kubernetes without an image that runs sshd; with one, the rendered LeaderWorkerSet runs
that image and calls mpirun by the absolute path the recipe checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import inventory
from gridready import pulumi as gpulumi
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import MPI_IMAGE
from tests.unit.serving.test_consistency import triton_tier


def _load(make_inv, tmp_path: Path, target: str, **kubernetes: Any) -> Any:
    inv = make_inv(2, [triton_tier()], target="kubernetes")  # valid: the conftest states an image with sshd
    path = inv.path / "cluster.yml"
    doc = yaml.safe_load(path.read_text())
    doc["serving"]["target"] = target
    doc["serving"]["kubernetes"] = kubernetes
    if target == "hosts":
        del doc["serving"]["kubeconfig"]
    path.write_text(yaml.safe_dump(doc))
    return inventory.load(inv.path)


def _refusal(make_inv, tmp_path: Path, target: str) -> str:
    with pytest.raises(GridreadyError) as err:
        _load(make_inv, tmp_path, target)
    assert err.value.code == ExitCode.INVALID
    return str(err.value)


def test_hosts_refuse_a_triton_replica_across_nodes_at_validate(make_inv, tmp_path) -> None:
    text = _refusal(make_inv, tmp_path, "hosts")
    assert "serving.tiers[0]" in text and "across 2 nodes" in text and "target kubernetes" in text


def test_kubernetes_refuses_it_without_an_image_that_runs_sshd(make_inv, tmp_path) -> None:
    text = _refusal(make_inv, tmp_path, "kubernetes")
    assert "serving.tiers[0]" in text and "triton_mpi_image" in text and "no sshd" in text


def test_with_the_image_the_rendered_group_runs_it_and_an_absolute_mpirun(make_inv, tmp_path) -> None:
    from gridready.serving.triton.launch import MPIRUN_ACROSS_NODES  # here: the other tests run on older code

    inv = _load(make_inv, tmp_path, "kubernetes", triton_mpi_image=MPI_IMAGE)
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    config = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    docs = gpulumi.render("serving", config, "acme").manifests
    (lws,) = [d for d in docs if d["kind"] == "LeaderWorkerSet"]
    templates = [lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"], lws["spec"]["leaderWorkerTemplate"]
                 ["workerTemplate"]]
    assert {c["image"] for t in templates for c in t["spec"]["containers"]} == {MPI_IMAGE}
    launch = next(d for d in docs if d["kind"] == "ConfigMap" and "launch.sh" in d.get("data", {}))
    assert f"exec {MPIRUN_ACROSS_NODES} --allow-run-as-root" in launch["data"]["launch.sh"]
    assert "exec mpirun" not in launch["data"]["launch.sh"]
