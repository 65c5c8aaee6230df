"""Issue 34: verdicts a real fleet can trust. Each test reproduces a wrong verdict of the old gates on a real capture
(or a real line edited as the test says) and pins the corrected one."""

from __future__ import annotations

from typing import Any

from gridready import catalog
from gridready.certify import nccl
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import pub


def exp(sku: str = "h100", gpus: int = 8, platform: str = "baremetal", **spec: Any) -> Expectations:
    found = catalog.lookup(sku)
    assert found is not None
    return Expectations(node="n1", sku=found, gpus=gpus, spec=CertificationSpec(**spec), platform=platform)


# ---- 7: a crashed nccl-tests run does not certify ------------------------------------------------------------

CRASHED = pub("nccl-tests", "FAIL-crashed-after-16G-rows")


def test_run_that_crashed_after_its_large_rows_is_an_error() -> None:
    """nccl-tests#322: 367 GB/s at 16 GiB, then `Test NCCL failure`; the old gate passed it on the rows alone."""
    (r,) = nccl.nccl_allreduce(doc_from_outputs({"all_reduce_perf": CRASHED}), exp("h200"))
    assert r.status is S.ERROR and "Test NCCL failure common.cu:1204" in r.reason


def test_nonzero_exit_or_timeout_is_an_error_even_with_clean_rows() -> None:
    healthy = pub("nccl-tests", "1node-8xH100-NVLS")
    for edit in ({"rc": 134}, {"timed_out": True, "rc": None}):
        doc = doc_from_outputs({"all_reduce_perf": healthy})
        doc["nccl_tests"]["collectives"]["all_reduce"]["runs"][0].update(edit)
        (r,) = nccl.nccl_allreduce(doc, exp(nccl={"algo": "nvls"}))
        assert r.status is S.ERROR and ("exited 134" in r.reason or "timed out" in r.reason)
    (ok,) = nccl.nccl_allreduce(doc_from_outputs({"all_reduce_perf": healthy}), exp(nccl={"algo": "nvls"}))
    assert ok.status is S.PASS
