"""The default sandbox's faulted host (node3: GPU 3's PCIe link down-trained to Gen4 x8), as its tools show it.

nvidia-smi --query-gpu shows the down-trained link on that GPU only; a multi-node all_reduce_perf that includes
node3 reaches a lower busbw than one between healthy hosts, because GPU 3's rail to its HCA crosses the slow link.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from tests.sandbox.fabric_simtools import ensure_sim_tools

pytestmark = pytest.mark.sandbox
QUERY = "index,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"


@pytest.fixture(scope="module")
def default_fleet(fleet):
    ensure_sim_tools(fleet)
    return fleet


def _links(fleet, host: str) -> dict[int, tuple[str, str]]:
    out = fleet.ssh(host, f"nvidia-smi --query-gpu={QUERY} --format=csv,noheader,nounits").stdout
    rows = [r for r in csv.reader(io.StringIO(out)) if r and not r[0].startswith("#")]
    return {int(r[0]): (r[1].strip(), r[3].strip()) for r in rows}


def _peak_busbw(fleet, a: str, b: str) -> float:
    cmd = (f"mpirun --allow-run-as-root -np 16 -H {fleet.addresses[a]}:8,{fleet.addresses[b]}:8 "
           "-x NCCL_NVLS_ENABLE=0 all_reduce_perf -b 1G -e 4G -f 2 -g 1")
    text = fleet.ssh(a, cmd).stdout
    rows = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+\s+\d+\s+\w+", ln)]
    return max(float(r[7]) for r in rows)  # out-of-place busbw column


def test_query_gpu_shows_the_down_trained_link_on_gpu3_only(default_fleet):
    node3 = _links(default_fleet, "node3")
    assert node3[3] == ("4", "8")
    assert all(v == ("5", "16") for i, v in node3.items() if i != 3)
    assert set(_links(default_fleet, "node1").values()) == {("5", "16")}


def test_all_reduce_with_the_faulted_host_is_lower(default_fleet):
    healthy = _peak_busbw(default_fleet, "node1", "node2")
    faulted = _peak_busbw(default_fleet, "node1", "node3")
    assert faulted < 0.8 * healthy, (healthy, faulted)
