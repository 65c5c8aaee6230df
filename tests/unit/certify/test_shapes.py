"""Node shapes (catalog: GPU count x platform): a gate the shape makes meaningless is n/a with its reason, never an
error and never a silent pass; a shape that expects a gate's subject (NVSwitch, NVLinks) still fails without it.

Real captures: the one-GPU H200 VM (tests/fixtures/h200x1, `-q -x` with fabric state N/A, `nvlink -s` empty) and
the two-GPU VM (tests/fixtures/h200x2). Simulated hosts of every H200 shape (1/2/4/8 GPUs) run the whole probe
against the sandbox's simulated tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gridready import catalog
from gridready.certify.judge import NodeVerdict, judge_node
from gridready.certify.result import GateStatus
from gridready.probe.collect import Probe
from gridready.probe.offline import doc_from_outputs
from gridready.probe.profiles import GiB
from gridready.spec import NodeGroup
from sandbox.profile import HardwareProfile
from sandbox.sim import simcore
from sandbox.sim import sysfs as simsysfs
from tests.unit.certify.fixtures_io import FIX, group, probe_quick, spec, write_sim_tools

H200X1 = FIX / "h200x1"
NO_TORCH = ["gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth", "gpu_burn"]


def _na(v: NodeVerdict) -> dict[str, str]:
    return {r.gate: r.reason for r in v.gates if r.status is GateStatus.SKIPPED and r.reason.startswith("n/a: ")}


def _h200x1_doc() -> dict[str, Any]:
    return doc_from_outputs({
        "nvidia_smi_q_x": (H200X1 / "nvidia-smi-q-x.xml").read_text(),
        "nvidia_smi_nvlink_s": (H200X1 / "nvlink-s.txt").read_text(),  # empty: the VM exposes no NVLinks
        "nvidia_smi_nvlink_e": "",
        "all_reduce_perf": (H200X1 / "all_reduce_perf_1gpu.txt").read_text(),
        # no kernel log was captured on h200x1 (an empty log is no evidence: the xid gate errors on it); the h200x2
        # machine's real NVRM lines (same driver branch) stand in, this test is about shapes
        "kernel_log": probe_quick()["raw"]["kernel_log"],
    }, host="h200x1", modules=["nvidia"], cmdline="quiet")


def test_one_gpu_vm_certifies_with_every_na_and_its_reason() -> None:
    v = judge_node(spec(not_applicable=["dcgm", *NO_TORCH]), group(gpus=1), _h200x1_doc(), node="h200x1",
                   driver_branch="580")
    assert v.certified, v.blocking
    na = _na(v)
    assert set(na) == {"services", "nvlink", "peer_bandwidth", "nccl_allreduce"}
    assert "no NVSwitch" in na["services"] and "fabric manager does not apply" in na["services"]
    assert "exposes no NVLinks" in na["nvlink"]
    assert "one GPU" in na["peer_bandwidth"] and "one GPU" in na["nccl_allreduce"]
    assert all(not r.required for r in v.gates if r.gate in na)


def test_fabric_state_na_fails_where_the_shape_has_nvswitches() -> None:
    """The same capture judged as one GPU of an 8-GPU HGX board: fabric manager is expected and is not there."""
    v = judge_node(spec(not_applicable=["dcgm", *NO_TORCH]), group(gpus=8), _h200x1_doc(), node="h200x1",
                   driver_branch="580")
    services = next(r for r in v.gates if r.gate == "services")
    assert services.status is GateStatus.FAIL and "fabric N/A/N/A" in services.reason
    assert next(r for r in v.gates if r.gate == "nvlink").status is GateStatus.ERROR  # 18 links expected, none read
    assert not v.certified


def test_active_nvlinks_on_a_shape_exposing_none_fail() -> None:
    """Links up on a node declared a one-GPU slice: the spec names the wrong shape; never an n/a."""
    doc = _h200x1_doc()
    doc["nvidia_smi"]["nvlink_status"] = {"gpus": {"0": {"links": {"0": 26.562}, "all_inactive": False}}}
    (r,) = [r for r in judge_node(spec(), group(gpus=1), doc, node="x").gates if r.gate == "nvlink"]
    assert r.status is GateStatus.FAIL and "wrong shape" in r.reason


def test_two_gpu_vm_reads_fabric_and_nvlinks() -> None:
    """The real 2-GPU VM sits on an NVSwitch board: fabric manager state is checked (Completed), links counted."""
    from tests.unit.certify.fixtures_io import h200_doc

    v = judge_node(spec(), group(gpus=2), h200_doc(), node="h200x2", driver_branch="580")
    assert v.worst("services") is GateStatus.PASS and v.worst("nvlink") is GateStatus.PASS
    assert "nccl_allreduce" not in _na(v) and "peer_bandwidth" not in _na(v)


def test_catalog_states_shapes_with_sources_and_the_spec_refuses_others() -> None:
    for sku in catalog.SKUS:
        assert sku.shapes and all(s.source for s in sku.shapes)
    h200 = catalog.lookup("h200")
    assert h200 is not None
    assert {(s.gpus, s.platform) for s in h200.shapes} >= {(8, "baremetal"), (4, "baremetal"), (2, "passthrough"),
                                                          (1, "passthrough")}
    with pytest.raises(ValidationError, match="does not come as 3 GPUs baremetal"):
        NodeGroup(name="g", sku="h200", gpus_per_node=3)


# ---- simulated hosts of every shape, the whole probe --------------------------------------------------------

SHAPES = [  # (gpus, platform, the n/a gates that shape must show)
    (8, "baremetal", set()),
    (4, "baremetal", {"services"}),  # HGX 4-GPU: NVLink, no NVSwitch
    (2, "passthrough", set()),  # a 2-GPU partition of an NVSwitch board (as the real h200x2 VM)
    (1, "passthrough", {"services", "nvlink", "peer_bandwidth", "nccl_allreduce"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("gpus", "platform", "na"), SHAPES)
def test_simulated_shape_certifies_with_its_na_set(gpus: int, platform: str, na: set[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = write_sim_tools(tmp_path / "bin")
    prof = HardwareProfile.sample("sim-a", gpus=gpus, platform=platform)  # type: ignore[arg-type]
    path = prof.write(tmp_path / "profile.json")
    simsysfs.write_tree(simcore.load(path), tmp_path / "sysfs")
    for k, val in {"GRIDREADY_SIM_PROFILE": str(path), "GRIDREADY_SYSFS_ROOT": str(tmp_path / "sysfs"),
                   "GRIDREADY_PROC_ROOT": str(tmp_path / "sysfs" / "proc"), "PATH": str(bindir),
                   "NCCL_NVLS_ENABLE": "0"}.items():
        monkeypatch.setenv(k, val)
    opts = {"profile": "standard", "dcgm_level": 3, "algo": "ring", "nccl_min_bytes": GiB, "nccl_max_bytes": 8 * GiB,
            "best_of": 1, "timeout": 60.0, "skip": ["torch", "hca"], "out": "-"}
    doc = Probe(opts).run()
    assert doc["nvidia_smi"]["q"]["format"] == "xml"  # the probe read NVIDIA's XML, not the text
    torch_na = NO_TORCH + (["peer_bandwidth"] if gpus > 1 else [])  # no torch in the sandbox
    v = judge_node(spec(profile="standard", not_applicable=torch_na), group(gpus=gpus, gdr=True, platform=platform),
                   doc, node="sim-a", driver_branch="580", rdma_stack="distro")  # the simulated host: inbox RDMA
    assert v.certified, v.blocking
    assert set(_na(v)) == na
    assert not [r for r in v.gates if r.status is GateStatus.ERROR]
