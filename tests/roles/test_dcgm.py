"""gridready_dcgm: DCGM 4 for CUDA 13 and the nvidia-dcgm host engine."""

from __future__ import annotations

import pytest

from gridready.probe import dcgm

pytestmark = pytest.mark.sandbox


def test_dcgm4_for_the_cuda_major_is_installed(node):
    pkg = node.package("datacenter-gpu-manager-4-cuda13")
    assert pkg.is_installed
    assert pkg.version.split(":")[-1].startswith("4.")
    assert node.package("datacenter-gpu-manager-4-proprietary-cuda13").version == pkg.version  # the diag plugins


def test_dcgm_diagnostics_run_on_every_gpu(node):
    """Read with the product's own parser: level 1's deployment tests ran, each on every GPU the node has (from
    nvidia-smi), and passed on a healthy node."""
    res = node.run("dcgmi diag -r 1 -j")
    assert res.rc == 0, res.stderr
    parsed = dcgm.parse_json(res.stdout)
    gpus = len(node.check_output("nvidia-smi --query-gpu=index --format=csv,noheader").split())
    assert gpus == 8 and parsed["schema"] == "4.x"
    names = {t["name"] for t in parsed["tests"]}
    assert "software" in names, names
    for t in parsed["tests"]:
        covered = sorted(g for r in t["results"] for g in r["gpus"])
        assert covered == list(range(gpus)), (t["name"], covered)
        assert {r["status"] for r in t["results"]} == {"pass"}, t
    assert dcgm.failed_tests(parsed) == []


def test_host_engine_is_enabled_and_running(node):
    svc = node.service("nvidia-dcgm")
    assert svc.is_enabled and svc.is_running


def test_dcgmi_answers(node):
    assert node.run("dcgmi discovery -l").rc == 0
