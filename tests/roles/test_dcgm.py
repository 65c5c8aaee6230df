"""gridready_dcgm: DCGM 4 for CUDA 13 and the nvidia-dcgm host engine."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox


def test_dcgm4_for_the_cuda_major_is_installed(node):
    pkg = node.package("datacenter-gpu-manager-4-cuda13")
    assert pkg.is_installed
    assert pkg.version.split(":")[-1].startswith("4.")
    assert node.package("datacenter-gpu-manager-4-proprietary-cuda13").version == pkg.version  # the diag plugins


def test_dcgm_diagnostics_run(node):
    assert node.run("dcgmi diag -r 1 -j").rc == 0


def test_host_engine_is_enabled_and_running(node):
    svc = node.service("nvidia-dcgm")
    assert svc.is_enabled and svc.is_running


def test_dcgmi_answers(node):
    assert node.run("dcgmi discovery -l").rc == 0
