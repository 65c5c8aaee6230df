"""Every collective the spec may choose, judged per SKU x GPU count x algorithm x collective: nccl-tests output of
the simulated tools (the real text format; busbw from the catalog's per-collective references) and the real
one-GPU sendrecv capture (tests/fixtures/h200x1), read by the one nccl-tests parser."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import catalog
from gridready.certify import nccl
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus
from gridready.probe import nccl_tests
from gridready.probe.offline import doc_from_outputs
from gridready.spec import CertificationSpec

from .conftest import FIXTURES, call

GiB = 1 << 30
ALL = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]


def exp(gpus: int = 2, **floors: Any) -> Expectations:
    sku = catalog.lookup("h200")
    assert sku is not None
    spec = CertificationSpec(nccl={"collectives": ALL, "min_bytes": GiB}, floors=floors)  # type: ignore[arg-type]
    return Expectations(node="n", sku=sku, gpus=gpus, spec=spec, platform="passthrough")


def run(coll: str, *extra: str) -> str:
    rc, out = call("nccl_tests", ["-b", "8", "-e", "8G", "-f", "2", "-g", "2", "-n", "20", "-w", "5", *extra],
                   prog=f"{coll}_perf")
    assert rc == 0, out
    return out


@pytest.fixture
def two_gpus(use_profile, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    return lambda *faults: use_profile(*faults, gpus=2, platform="passthrough", hcas=0)


@pytest.mark.parametrize(("coll", "reference"), [("all_reduce", 347.0), ("all_gather", 313.0),
                                                 ("reduce_scatter", 296.0), ("sendrecv", 366.0)])
def test_each_collective_passes_its_own_floor_and_fails_below_it(two_gpus, coll: str, reference: float) -> None:
    floor = catalog.lookup("h200").nccl_floor(2, "ring", coll)  # type: ignore[union-attr]
    assert floor is not None and floor.reference_gbps == reference and floor.floor_gbps < reference
    two_gpus()
    (ok,) = nccl.nccl_collective(doc_from_outputs({f"{coll}_perf": run(coll)}), exp(), coll)
    assert ok.status is GateStatus.PASS, ok.reason
    assert ok.gate == nccl.gate_name(coll) and ok.measured["validation"] == 1
    assert 0.95 * reference <= ok.measured["max_busbw_gbps"] <= 1.02 * reference
    two_gpus({"kind": "low_nccl_busbw", "factor": 0.7})
    (low,) = nccl.nccl_collective(doc_from_outputs({f"{coll}_perf": run(coll)}), exp(), coll)
    assert low.status is GateStatus.FAIL and f"below {floor.floor_gbps:g} GB/s" in low.reason


def test_sendrecv_in_place_na_is_by_design_and_its_busbw_is_not_gated(two_gpus) -> None:
    """nccl-tests never validates sendrecv in place (src/sendrecv.cu): N/A there is no 'validation off' warning,
    and only the validated out-of-place column counts."""
    two_gpus()
    out = run("sendrecv")
    parsed = nccl_tests.parse_text(out)
    assert parsed["validation"] == 1 and all(r["ip"]["wrong"] is None and r["oop"]["wrong"] == 0
                                             for r in parsed["rows"])
    (r,) = nccl.nccl_collective(doc_from_outputs({"sendrecv_perf": out}), exp(), "sendrecv")
    assert r.status is GateStatus.PASS and "validation off" not in r.reason
    best = max(p["busbw"] for p in r.measured["sweep"] if p["bytes"] >= GiB)
    assert best == max(row["oop"]["busbw"] for row in parsed["rows"] if row["bytes"] >= GiB)


def test_validation_off_in_the_header_warns(two_gpus) -> None:
    two_gpus()
    (r,) = nccl.nccl_collective(doc_from_outputs({"all_gather_perf": run("all_gather", "-c", "0")}), exp(),
                                "all_gather")
    assert r.status is GateStatus.WARN and "validation off" in r.reason and r.measured["validation"] == 0


def test_real_one_gpu_sendrecv_reads_and_the_gate_is_na() -> None:
    text = (FIXTURES / "h200x1" / "sendrecv_perf_1gpu.txt").read_text()
    parsed = nccl_tests.parse_text(text)
    assert parsed["collective"] == "sendrecv" and parsed["ranks"] == 1 and parsed["validation"] == 1
    row = next(r for r in parsed["rows"] if r["bytes"] == 536870912)
    assert row["ip"]["wrong"] is None and row["ip"]["busbw"] == 323475  # the in-place no-op's absurd figure
    assert nccl_tests.validated_busbw(row) == 1891.3  # the validated out-of-place copy
    (r,) = nccl.nccl_collective(doc_from_outputs({"sendrecv_perf": text}), exp(gpus=1), "sendrecv")
    assert r.status is GateStatus.SKIPPED and r.reason.startswith("n/a: one GPU")


def test_alltoall_on_fewer_ranks_than_the_board_is_an_error_and_a_spec_floor_judges_it(two_gpus) -> None:
    """A 2-rank alltoall judged for a 4-GPU board is an error naming the ranks (the board's own figures give the
    4-GPU floor: tests/unit/certify/test_nccl_collective_verdicts.py); a spec floor judges the 2-GPU run."""
    two_gpus()
    doc = doc_from_outputs({"alltoall_perf": run("alltoall")})
    board4 = Expectations(node="n", sku=exp().sku, gpus=4, spec=exp().spec, platform="baremetal")
    (r,) = nccl.nccl_collective(doc, board4, "alltoall")
    assert r.status is GateStatus.ERROR and "2 ranks" in r.reason and "4 GPUs" in r.reason
    (ok,) = nccl.nccl_collective(doc, exp(nccl_collectives_gbps={"alltoall": 250.0}), "alltoall")
    assert ok.status is GateStatus.PASS and ok.expected.source == "spec"


def test_a_chosen_collective_that_did_not_run_is_an_error_and_unchosen_ones_have_no_gate() -> None:
    doc = doc_from_outputs({"all_reduce_perf": (FIXTURES / "h200x2" / "all_reduce_perf.txt").read_text()})
    (r,) = nccl.nccl_collective(doc, exp(), "all_gather")
    assert r.status is GateStatus.ERROR and "neither nccl-tests all_gather_perf nor" in r.reason
    only_ar = exp()
    only_ar = Expectations(node="n", sku=only_ar.sku, gpus=2, spec=CertificationSpec(), platform="passthrough")
    assert nccl.nccl_collective(doc, only_ar, "all_gather") == []
    (ar,) = nccl.nccl_collective(doc, only_ar, "all_reduce")
    assert ar.status is GateStatus.PASS and ar.measured["max_busbw_gbps"] == 346.98  # the real 2 x H200 peak (oop)



def run_on(coll: str, gpus: int) -> str:
    rc, out = call("nccl_tests", ["-b", "1G", "-e", "8G", "-f", "2", "-g", str(gpus), "-n", "20", "-w", "5"],
                   prog=f"{coll}_perf")
    assert rc == 0, out
    return out


@pytest.mark.parametrize("algo", ["ring", "nvls"])
@pytest.mark.parametrize(("coll", "floor"), [("all_gather", 325.0), ("reduce_scatter", 327.0), ("alltoall", 288.0),
                                             ("sendrecv", 333.0)])
def test_eight_gpus_judge_each_collective_against_its_published_floor(use_profile, monkeypatch, coll: str,
                                                                     floor: float, algo: str) -> None:
    """8 x H200 HGX: each collective has its own catalog floor for either algorithm setting (alltoall and sendrecv
    are point-to-point: NCCL's Ring/NVLS choice does not apply); a node at 70% of it fails naming that floor."""
    spec = CertificationSpec(nccl={"collectives": ALL, "min_bytes": GiB, "algo": algo})  # type: ignore[arg-type]
    eight = Expectations(node="n", sku=exp().sku, gpus=8, spec=spec, platform="baremetal")
    use_profile(gpus=8, hcas=0)
    if algo == "ring":
        monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    (ok,) = nccl.nccl_collective(doc_from_outputs({f"{coll}_perf": run_on(coll, 8)}), eight, coll)
    assert ok.status is GateStatus.PASS and ok.expected.floor == floor, ok.reason
    shown = "p2p" if coll in ("alltoall", "sendrecv") else algo
    assert ok.expected.source.startswith(f"catalog: H200-SXM-141GB 8 GPUs {shown} {coll}")
    use_profile({"kind": "low_nccl_busbw", "factor": 0.7}, gpus=8, hcas=0)
    (low,) = nccl.nccl_collective(doc_from_outputs({f"{coll}_perf": run_on(coll, 8)}), eight, coll)
    assert low.status is GateStatus.FAIL and f"below {floor:g} GB/s" in low.reason


@pytest.mark.parametrize("gpus", [2, 4])
def test_alltoall_on_a_slice_of_an_nvswitch_board_takes_the_boards_floor(use_profile, gpus: int) -> None:
    """Issue 30: 2 or 4 GPUs of an 8-GPU NVSwitch board keep each GPU's NVLink bandwidth, so alltoall takes the
    board's floor (288 GB/s, 90% of the 8-GPU figure) instead of asking for one."""
    use_profile(gpus=gpus, platform="passthrough", hcas=0)
    doc = doc_from_outputs({"alltoall_perf": run_on("alltoall", gpus)})
    fewer = Expectations(node="n", sku=exp().sku, gpus=gpus, spec=exp().spec, platform="passthrough")
    (r,) = nccl.nccl_collective(doc, fewer, "alltoall")
    assert r.status is GateStatus.PASS and r.expected.floor == 288.0 and "NVSwitch board" in r.expected.source
