"""The whole probe against the sandbox's SIMULATED tools (sandbox/sim, docs/simulator.md) and its fake
sysfs/procfs tree, then the gates: the healthy profile certifies; every injectable fault fails its gate, naming the
GPU. No fleet and no root: the simulated tools run as scripts on PATH with GRIDREADY_SIM_PROFILE."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready.certify.judge import NodeVerdict, judge_node
from gridready.certify.result import GateStatus
from gridready.probe.collect import Probe
from gridready.probe.profiles import GiB
from gridready.stages import certify as certify_stage
from sandbox.profile import Fault, HardwareProfile
from sandbox.sim import simcore
from sandbox.sim import sysfs as simsysfs
from tests.unit.certify.fixtures_io import group, spec, write_sim_tools

pytestmark = pytest.mark.slow  # ~9 s per probe run: each simulated tool call is a Python process

# no torch in the sandbox: the torch benchmarks are not applicable there (the sandbox spec says so too)
REPO = Path(__file__).resolve().parents[3]
NO_TORCH = ["gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth", "peer_bandwidth"]


@pytest.fixture
def simulate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """simulate(*faults) -> the node's verdict after a full probe run on that simulated profile."""
    bindir = write_sim_tools(tmp_path / "bin")

    def run(*faults: dict[str, Any], level: int = 3, skip: tuple[str, ...] = ()) -> NodeVerdict:
        prof = HardwareProfile.sample("sim-a", faults=[Fault(**f) for f in faults])
        path = prof.write(tmp_path / "profile.json")
        root = tmp_path / "sysfs"
        monkeypatch.setenv("GRIDREADY_SIM_PROFILE", str(path))
        simsysfs.write_tree(simcore.load(path), root)
        monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(root))
        monkeypatch.setenv("GRIDREADY_PROC_ROOT", str(root / "proc"))
        monkeypatch.setenv("PATH", str(bindir))
        monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
        state = tmp_path / "state"
        shutil.rmtree(state, ignore_errors=True)  # each probe run starts before any load
        monkeypatch.setenv("GRIDREADY_SIM_STATE", str(state))
        opts = {"profile": "standard", "dcgm_level": level, "algo": "ring", "nccl_min_bytes": GiB,
                "nccl_max_bytes": 8 * GiB, "best_of": 1, "timeout": 60.0, "skip": ["torch", "hca", *skip], "out": "-"}
        doc = Probe(opts).run()
        return judge_node(spec(profile="standard", not_applicable=NO_TORCH), group(gpus=8, gdr=True), doc,
                          node="sim-a", driver_branch="580", rdma_stack="distro")  # the simulated host: inbox RDMA

    return run


def _worst(v: NodeVerdict, gate: str) -> GateStatus | None:
    return v.worst(gate)


def _reasons(v: NodeVerdict, gate: str) -> str:
    return " | ".join(r.reason for r in v.gates if r.gate == gate and r.status is not GateStatus.PASS)


def test_healthy_simulated_node_certifies(simulate: Any) -> None:
    v = simulate()
    assert v.certified, v.blocking
    nccl = next(r for r in v.gates if r.gate == "nccl_allreduce")
    assert nccl.measured["source"] == "nccl-tests" and nccl.measured["max_busbw_gbps"] > 330
    assert _worst(v, "dcgm") is GateStatus.PASS and _worst(v, "peermem") is GateStatus.PASS
    acs = next(r for r in v.gates if r.gate == "acs")  # read from the simulated PCIe tree, not left unknown
    assert acs.status is GateStatus.PASS and acs.measured["bridges_checked"] >= 16, acs.reason


def test_a_gen1_link_of_the_bmc_is_no_fault_of_the_node(simulate: Any) -> None:
    """Issue 34, finding 1: the kernel's "limited by" line of a device that is neither GPU nor NIC (the BMC's VGA
    at Gen1 x1) failed pcie_link, labelled as a NIC."""
    v = simulate({"kind": "pcie_limited_other"})
    assert v.certified, v.blocking
    assert _worst(v, "pcie_link") is GateStatus.PASS


def test_replays_counted_since_the_last_reset_are_history(simulate: Any) -> None:
    """Issue 34, finding 3: a replay counter that stands at 500 since the GPU's last reset, and does not move during
    the certification, is no fault of this run."""
    v = simulate({"kind": "pcie_replays", "gpu": 1, "count": 500})
    assert v.certified, v.blocking
    assert _worst(v, "pcie_link") is GateStatus.WARN  # said, never blocking
    assert "500 PCIe replays since reset, 0 during this run" in _reasons(v, "pcie_link")


@pytest.mark.parametrize(("fault", "gate", "needle"), [
    ({"kind": "pcie_replays", "gpu": 1, "count": 500, "after_load": True}, "pcie_link", "GPU 1"),
    ({"kind": "hw_slowdown", "gpu": 4, "after_load": True}, "throttle", "GPU 4"),
    ({"kind": "xid", "gpu": 6, "code": 94, "after_load": True}, "xid", "GPU 6"),
])
def test_faults_the_load_brings_out_are_caught_after_it(simulate: Any, fault: dict[str, Any], gate: str,
                                                         needle: str) -> None:
    """Issue 34, finding 8: health was read only before the load; what the certification's own stress brings out
    (replays, throttling, an Xid) shows only in the snapshot after it."""
    v = simulate(fault, level=1)
    assert not v.certified
    assert _worst(v, gate) in (GateStatus.FAIL, GateStatus.ERROR), _reasons(v, gate) or v.blocking
    assert needle in _reasons(v, gate)


@pytest.mark.parametrize(("fault", "gate", "status", "needle"), [
    # finding 7: rows up to 1 GiB parse, then the run dies: its exit code and NCCL's line must fail it
    ({"kind": "nccl_crash"}, "nccl_allreduce", None, ""),
    # finding 9: a MIG instance's Xid names the GPU by its PCI address with GPU-I; an empty kernel log and a wrapped
    # ring buffer are missing evidence, never "no Xid"
    ({"kind": "xid_mig", "gpu": 4, "code": 95, "after_load": True}, "xid", GateStatus.FAIL, "GPU 4"),
    ({"kind": "kernel_log_empty"}, "xid", GateStatus.ERROR, "kernel log"),
    ({"kind": "kernel_log_wrapped"}, "xid", GateStatus.ERROR, "wrapped"),
])
def test_evidence_faults_block_the_node(simulate: Any, fault: dict[str, Any], gate: str,
                                        status: GateStatus | None, needle: str) -> None:
    v = simulate(fault)
    assert not v.certified
    got = _worst(v, gate)
    assert got in ((status,) if status else (GateStatus.FAIL, GateStatus.ERROR)), _reasons(v, gate) or v.blocking
    assert needle in _reasons(v, gate)


def test_an_xid_logged_before_the_run_on_a_recovered_gpu_warns(simulate: Any) -> None:
    """An Xid logged before the run (MIG form) on a GPU that reads recovered after the load is history: it warns,
    naming the GPU, and does not block. The simulated dmesg keeps one boot time per host, so the same line reads the
    same in the snapshots before and after the load (a drifting stamp made it look new, and the verdict hung on
    the clock)."""
    v = simulate({"kind": "xid_mig", "gpu": 4, "code": 95})
    assert v.certified, v.blocking
    assert _worst(v, "xid") is GateStatus.WARN
    assert "GPU 4" in _reasons(v, "xid") and "before the run" in _reasons(v, "xid")


@pytest.mark.parametrize(("fault", "gate", "needle"), [
    ({"kind": "pcie_downtrained", "gpu": 3}, "pcie_link", "GPU 3"),
    ({"kind": "nvlink_inactive", "gpu": 5, "count": 4}, "nvlink", "GPU 5"),
    # logged during the run: an Xid at boot on a GPU that reads healthy after the load only warns (xid gate)
    ({"kind": "xid", "gpu": 2, "code": 79, "after_load": True}, "xid", "GPU 2"),
    ({"kind": "ecc_uncorrectable", "gpu": 6}, "ecc", "GPU 6"),
    ({"kind": "row_remap_pending", "gpu": 1}, "row_remap", "GPU 1"),
    ({"kind": "hw_slowdown", "gpu": 4}, "throttle", "GPU 4"),
    ({"kind": "power_brake", "gpu": 0}, "throttle", "HW Power Brake"),
    ({"kind": "thermal_throttle", "gpu": 7}, "throttle", "GPU 7"),
    ({"kind": "low_nccl_busbw", "factor": 0.6}, "nccl_allreduce", "below"),
    ({"kind": "dcgm_level3_failure", "gpu": 2}, "dcgm", "GPU 2"),
    # the switch port above GPU 2 (3a:00.0) redirects peer-to-peer traffic to the root complex
    ({"kind": "acs_redirect", "gpu": 2}, "acs", "0000:39:00.0 (above 0000:3a:00.0)"),
])
def test_each_injectable_fault_fails_its_gate(simulate: Any, fault: dict[str, Any], gate: str, needle: str) -> None:
    v = simulate(fault)
    assert not v.certified
    assert _worst(v, gate) is GateStatus.FAIL, _reasons(v, gate) or v.blocking
    assert needle in _reasons(v, gate)


def test_check_mode_loads_nothing_and_judges_the_read_only_gates(simulate: Any) -> None:
    """Issue 33, dry runs: `certify --check` ran the whole probe (DCGM diagnostics, NCCL, GEMM burn). With the
    collectors the certify role skips in check mode, no load tool runs (the simulator records every load), the load
    gates are reported as not run, and a fault the read-only snapshots show still fails its gate."""
    skip = tuple(yaml.safe_load((REPO / "roles/gridready_certify/vars/main.yml").read_text())[
        "__gridready_certify_check_skip"])
    v = certify_stage.dry_verdict(simulate({"kind": "ecc_uncorrectable", "gpu": 6}, skip=skip),
                                  spec(profile="standard", not_applicable=NO_TORCH))
    assert not simcore.load_seen()
    not_run = {r.gate for r in v.gates if r.reason == certify_stage.CHECK_NOT_RUN}
    assert {"dcgm", "nccl_allreduce"} <= not_run <= certify_stage.LOAD_GATES
    assert all(r.status is GateStatus.SKIPPED and not r.required for r in v.gates if r.gate in not_run)
    assert _worst(v, "ecc") is GateStatus.FAIL and "GPU 6" in _reasons(v, "ecc")
    healthy = certify_stage.dry_verdict(simulate(skip=skip), spec(profile="standard", not_applicable=NO_TORCH))
    assert healthy.certified, healthy.blocking  # nothing read-only is wrong; the load gates do not block
