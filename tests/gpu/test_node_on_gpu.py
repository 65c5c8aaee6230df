"""On a real GPU machine: the probe measures, the gates judge, nccl-tests parses; figures against the catalog.

Run there with `python3 -m pytest -m gpu tests/gpu` (docs/device.md). The node's shape comes from the GPU count
torch sees and GRIDREADY_PLATFORM (default passthrough: the lent H200 machines are VMs)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from gridready import catalog
from gridready.certify.judge import judge_node
from gridready.certify.result import GateStatus
from gridready.probe import nccl_tests
from gridready.probe.collect import Probe
from gridready.probe.profiles import PROFILES, GiB, MiB
from gridready.spec import NodeGroup
from gridready.spec.certification import CertificationSpec

pytestmark = pytest.mark.gpu


def _world() -> int:
    import torch

    return torch.cuda.device_count()


@pytest.fixture(scope="module")
def probe_doc() -> dict[str, Any]:
    opts = {"profile": "quick", "dcgm_level": 1, "algo": "ring", "nccl_min_bytes": GiB, "nccl_max_bytes": 4 * GiB,
            "best_of": 1, "timeout": 300.0, "skip": ["dcgm", "hca", "nvbandwidth", "gpu_burn"], "out": "-",
            "nccl_tests_dir": os.environ.get("NCCL_TESTS_DIR")}
    return Probe(opts).run()


def test_probe_reads_nvidias_xml_and_measures_every_gpu(probe_doc: dict[str, Any]) -> None:
    q = probe_doc["nvidia_smi"]["q"]
    assert q["format"] == "xml" and len(q["gpus"]) == _world()
    sku = catalog.lookup(q["gpus"][0]["device_id"])
    assert sku is not None, q["gpus"][0]["device_id"]
    for g in probe_doc["torch"]["gpus"]:
        assert max(g["bf16_gemm_tflops"].values()) >= sku.bf16_gemm_floor_tflops
        assert max(g["fp8_gemm_tflops"].values()) >= sku.fp8_gemm_floor_tflops
        assert g["hbm_copy_tbps"] >= sku.hbm_copy_floor_tbps and min(g["h2d_gbps"], g["d2h_gbps"]) >= sku.h2d_floor_gbps


def test_the_node_certifies_with_its_shapes_na_set(probe_doc: dict[str, Any]) -> None:
    world = _world()
    sku = catalog.lookup(probe_doc["nvidia_smi"]["q"]["gpus"][0]["device_id"])
    assert sku is not None
    group = NodeGroup(name="gpu_nodes", sku=sku.name, gpus_per_node=world, gpudirect_rdma=False,
                      platform=os.environ.get("GRIDREADY_PLATFORM", "passthrough"))  # type: ignore[arg-type]
    spec = CertificationSpec(profile="quick", not_applicable=["dcgm"],  # DCGM is not on the lent machines
                             nccl={"min_bytes": GiB, "max_bytes": 4 * GiB, "best_of": 1})  # type: ignore[arg-type]
    v = judge_node(spec, group, probe_doc, node="gpu-machine", driver_branch="580")
    assert v.certified, v.blocking
    na = {r.gate for r in v.gates if r.status is GateStatus.SKIPPED and r.reason.startswith("n/a: ")}
    shape = group.catalog_sku.shape(world, group.platform)
    assert shape is not None
    assert ("nccl_allreduce" in na) == (world == 1)
    assert ("peer_bandwidth" in na) == (world == 1 or not shape.nvlink_links)
    assert ("services" in na) == (not shape.nvswitch) and ("nvlink" in na) == (shape.nvlink_links == 0)
    for gate in ("gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth", "sdc"):
        assert v.worst(gate) is GateStatus.PASS, gate
    assert "training_goodput" in na  # the quick profile runs no training steps


def test_probe_hbm_and_gemm_within_3pct_of_the_best_method() -> None:
    from gridready.probe import torch_bench  # imports torch

    prof = PROFILES["quick"]
    probe_hbm = torch_bench.hbm_copy(0, prof["hbm_bytes"], prof["copy_iters"], prof["trials"])
    best_hbm = torch_bench.hbm_copy(0, 8 * GiB, 20, 10)
    probe_mm = torch_bench.gemm_bf16(0, 8192, prof["gemm_iters"], prof["trials"])
    best_mm = torch_bench.gemm_bf16(0, 8192, 50, 10)
    assert probe_hbm >= 0.97 * best_hbm, (probe_hbm, best_hbm)
    assert probe_mm >= 0.97 * best_mm, (probe_mm, best_mm)


def test_nccl_tests_output_reads_with_the_one_parser() -> None:
    binary = nccl_tests.find_binary("all_reduce_perf", os.environ.get("NCCL_TESTS_DIR"))
    if binary is None:
        pytest.skip("nccl-tests not built on this machine (NCCL_TESTS_DIR)")
    world = _world()
    res = subprocess.run([binary, "-b", "8", "-e", str(64 * MiB), "-f", "4", "-g", str(world), "-c", "1"],
                         capture_output=True, text=True, timeout=300, check=True)
    parsed = nccl_tests.parse_text(res.stdout)
    assert parsed["ranks"] == world and parsed["validation"] == 1 and parsed["rows"]
    assert all(r["oop"]["wrong"] == 0 for r in parsed["rows"])
    if world == 1:  # one rank: busbw is 0 by definition (nccl-tests PERFORMANCE.md), nothing to gate
        assert all(r["oop"]["busbw"] == 0 for r in parsed["rows"])


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"])
def test_torch_collective_sweeps_run_and_check_their_results(collective: str) -> None:
    """Every collective's torch.distributed sweep on this machine's GPUs: results correct, a row per size; busbw
    by nccl-tests' factor (0 for one rank except sendrecv, which sends to itself)."""
    from gridready.probe import torch_allreduce

    world = _world()
    res = torch_allreduce.sweep(world, [64 * MiB, 256 * MiB], 5, 2, 1, {"NCCL_NVLS_ENABLE": "0"}, 300.0,
                                collective=collective)
    assert res["wrong"] == 0 and res["collective"] == collective
    assert [r["bytes"] for r in res["sizes"]] == [64 * MiB, 256 * MiB]
    if world > 1 or collective == "sendrecv":
        assert all(r["busbw_gbps"] > 0 for r in res["sizes"])
