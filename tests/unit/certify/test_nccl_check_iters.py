"""nccl-tests' correctness check in the collective gates (issue 30): `-c N` from the spec on both the node's
`<collective>_perf` and the multi-node launch; `#wrong` fails (tests/unit/certify/test_trusted_verdicts.py and the
public nccl-tests fixtures cover the #wrong/out-of-bounds verdicts on real outputs)."""

from __future__ import annotations

from gridready.certify import multinode
from gridready.probe.__main__ import parse_args
from gridready.spec.certification import CertificationSpec
from gridready.spec.fabric import FabricSettings


def test_probe_flag_and_spec_default() -> None:
    assert parse_args(["--nccl-check-iters", "5"])["nccl_check_iters"] == 5
    assert parse_args([])["nccl_check_iters"] == 1
    assert CertificationSpec().nccl.check_iters == 1


def test_multinode_launch_checks_n_times() -> None:
    plan = multinode.mpirun_plan(["a", "b"], 8, {}, FabricSettings(check_iters=5))
    i = plan.argv.index("-c")
    assert plan.argv[i + 1] == "5"
