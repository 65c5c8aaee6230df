"""gridready_nccl: NCCL pinned to the CUDA version; nccl-tests built with MPI under a versioned prefix."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox

PERF = ["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"]


@pytest.mark.parametrize("name", ["libnccl2", "libnccl-dev"])
def test_nccl_is_pinned_to_the_cuda_version(node, name):
    pkg = node.package(name)
    assert pkg.is_installed
    assert pkg.version.startswith("2.28.9-") and pkg.version.endswith("+cuda13.0")


def test_nccl_tests_live_under_a_versioned_prefix(node):
    link = node.file("/opt/nccl-tests/current")
    assert link.is_symlink and link.linked_to == "/opt/nccl-tests/2.17.6"


@pytest.mark.parametrize("prog", PERF)
def test_nccl_tests_binaries_run(node, prog):
    path = f"/opt/nccl-tests/current/bin/{prog}"
    assert node.file(path).mode & 0o111
    res = node.run(f"{path} -b 8 -e 128 -f 2 -g 1")
    assert res.rc == 0, res.stderr
    assert "Avg bus bandwidth" in res.stdout
