"""The single-node nccl-tests gates: which runs and rows count, the floor each collective is held to and where it
comes from, and the verdict and sentence for corrupt results, crashed runs, wrong rank counts, low bandwidth and
validation off. Built on the real 2 x H200 all_reduce_perf capture (max 346.98 GB/s at 4 GiB; floor 312 GB/s)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import nccl
from gridready.certify.result import Expected
from gridready.certify.result import GateStatus as S
from tests.unit.certify.fixtures_io import h200_doc
from tests.unit.certify.test_gates_public import exp

BASE = h200_doc()
RUN = BASE["nccl_tests"]["runs"][0]  # rc 0, 31 rows 8 B .. 8 GiB, validation 1, 2 ranks
ALL = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
GIB = 1 << 30
AR_FLOOR = Expected(floor=312, source="catalog: H200-SXM-141GB 2 GPUs ring all_reduce")


def _exp(gpus: int = 2, **spec: Any) -> Any:
    spec.setdefault("nccl", {})
    spec["nccl"] = {"collectives": ALL, **spec["nccl"]}
    return exp("h200", gpus, "passthrough", **spec)


def _run(rc: int | None = 0, timed_out: bool = False, scale: float = 1.0, **parsed: Any) -> dict[str, Any]:
    """The captured run with its busbw scaled and parsed fields replaced."""
    run = copy.deepcopy(RUN)
    run.update(rc=rc, timed_out=timed_out)
    for row in run["parsed"]["rows"]:
        for part in (row["oop"], row["ip"]):
            part["busbw"] = round(part["busbw"] * scale, 2)
    run["parsed"].update(parsed)
    return run


def _doc(*runs: dict[str, Any], collective: str = "all_reduce") -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["nccl_tests"] = {"present": True, "collectives": {collective: {"runs": list(runs)}}}
    return doc


def _gate(doc: dict[str, Any], collective: str = "all_reduce", **kw: Any) -> Any:
    (r,) = nccl.nccl_collective(doc, _exp(**kw), collective)
    return r


# ---- gate names, runs and points ------------------------------------------------------------------------------

@pytest.mark.parametrize(("collective", "gate"), [("all_reduce", "nccl_allreduce"), ("all_gather", "nccl_all_gather"),
                                                  ("reduce_scatter", "nccl_reduce_scatter"),
                                                  ("alltoall", "nccl_alltoall"), ("sendrecv", "nccl_sendrecv")])
def test_each_collective_has_its_gate(collective: str, gate: str) -> None:
    assert nccl.gate_name(collective) == gate
    fn = getattr(nccl, gate)
    (r,) = fn(_doc(_run(), collective=collective), _exp())
    assert r.gate == gate and r.evidence == f"raw.{collective}_perf" and r.measured["collective"] == collective


def test_a_collective_the_spec_does_not_choose_has_no_gate() -> None:
    e = exp("h200", 2, "passthrough")  # default: all_reduce only
    assert nccl.nccl_all_gather(_doc(_run(), collective="all_gather"), e) == []
    assert [r.gate for r in nccl.nccl_allreduce(_doc(_run()), e)] == ["nccl_allreduce"]


def test_runs_of_each_collective_and_the_legacy_all_reduce_key() -> None:
    a, b = {"rc": 0, "n": 1}, {"rc": 0, "n": 2}
    doc = {"nccl_tests": {"runs": [a], "collectives": {"all_gather": {"runs": [b]}}}}
    assert nccl.runs_of(doc) == [a]  # all_reduce falls back to the top-level runs
    assert nccl.runs_of(doc, "all_gather") == [b]
    assert nccl.runs_of(doc, "alltoall") == []
    assert nccl.runs_of({"nccl_tests": {"runs": [a], "collectives": {"all_reduce": {"runs": [b]}}}}) == [b]
    assert nccl.runs_of({"nccl_tests": {"runs": [a], "collectives": {"all_reduce": {"runs": []}}}}) == []
    assert nccl.runs_of({"nccl_tests": {"runs": [a], "collectives": {"all_reduce": {}}}}) == [a]
    assert nccl.runs_of({"nccl_tests": {"runs": [a], "collectives": {"all_gather": {"runs": [b]}}}}, "sendrecv") == []
    assert nccl.runs_of({"nccl_tests": None}) == [] and nccl.runs_of({}) == []


def test_sweep_points_of_the_capture() -> None:
    source, pts = nccl.sweep_points(_doc(_run(), _run(scale=0.5)))
    assert source == "nccl-tests" and len(pts) == 62
    assert pts[-1] == {"bytes": 8 * GIB, "busbw": 172.45, "run": 1, "wrong": 0}
    assert pts[30] == {"bytes": 8 * GIB, "busbw": 344.9, "run": 0, "wrong": 0}  # the larger of oop and ip
    assert pts[0] == {"bytes": 8, "busbw": 0.0, "run": 0, "wrong": 0}


@pytest.mark.parametrize(("oop", "ip", "validation", "busbw", "wrong"), [
    ({"busbw": 10.0, "wrong": 2}, {"busbw": 12.0, "wrong": 3}, 1, 12.0, 5),
    ({"busbw": 10.0, "wrong": 0}, {"busbw": 12.0, "wrong": None}, 1, 10.0, 0),  # sendrecv: in-place not checked
    ({"busbw": 10.0, "wrong": None}, {"busbw": 12.0, "wrong": None}, 1, 12.0, None),
    ({"busbw": 10.0, "wrong": 0}, {"busbw": 12.0, "wrong": 0}, 0, 12.0, None),  # -c 0: counts mean nothing
    ({"busbw": 10.0, "wrong": 4}, None, 1, 10.0, 4),
])
def test_sweep_point_wrong_counts(oop: Any, ip: Any, validation: int, busbw: float, wrong: int | None) -> None:
    run = {"rc": 0, "parsed": {"validation": validation, "rows": [{"bytes": 1024, "oop": oop, "ip": ip}]}}
    assert nccl.sweep_points({"nccl_tests": {"runs": [run]}}) == (
        "nccl-tests", [{"bytes": 1024, "busbw": busbw, "run": 0, "wrong": wrong}])


def test_torch_sweep_when_nccl_tests_did_not_run() -> None:
    doc = {"torch": {"allreduce": {"wrong": 0, "sizes": [{"bytes": GIB, "busbw_gbps": 300.0}]},
                     "collectives": {"all_gather": {"sizes": [{"bytes": 2 * GIB, "busbw_gbps": 280.0}]}}}}
    assert nccl.sweep_points(doc) == ("torch.distributed", [{"bytes": GIB, "busbw": 300.0, "run": 0, "wrong": 0}])
    assert nccl.sweep_points(doc, "all_gather") == (
        "torch.distributed", [{"bytes": 2 * GIB, "busbw": 280.0, "run": 0, "wrong": None}])
    assert nccl.sweep_points(doc, "alltoall") == (None, [])
    assert nccl.sweep_points({"torch": {"collectives": {"all_reduce": {"sizes": [{"bytes": 1, "busbw_gbps": 1}]}}}}
                             ) == (None, [])


# ---- floors ------------------------------------------------------------------------------------------------------

def test_catalog_and_spec_floors() -> None:
    assert nccl._expected(_exp(), "all_reduce") == AR_FLOOR
    assert nccl._expected(_exp(floors={"nccl_busbw_gbps": 400}), "all_reduce") == Expected(floor=400, source="spec")
    assert nccl._expected(_exp(floors={"nccl_busbw_gbps": 0}), "all_reduce") == Expected(floor=0, source="spec")
    spec = _exp(floors={"nccl_collectives_gbps": {"all_gather": 250}, "nccl_busbw_gbps": 400})
    assert nccl._expected(spec, "all_gather") == Expected(floor=250, source="spec")
    assert nccl._expected(spec, "reduce_scatter").source.startswith("catalog: H200-SXM-141GB 2 GPUs ring "
                                                                     "reduce_scatter")
    assert nccl._expected(_exp(nccl={"algo": "nvls"}), "all_reduce") is None


def test_catalog_floor_source_names_sku_count_algorithm_and_measurement() -> None:
    e = exp("h100", 8)
    assert nccl._expected(e, "all_reduce") == Expected(floor=330, source="catalog: H100-SXM5-80GB 8 GPUs ring "
                                                                         "all_reduce")
    assert nccl._expected(e, "alltoall") == Expected(
        floor=288, source="catalog: H100-SXM5-80GB 8 GPUs p2p alltoall (8 x H100 NCCL Tests alltoall busbw (NVIDIA "
                          "GTC25 S72583), 320 GB/s measured)")
    assert nccl._expected(exp("h100", 4, "slice"), "all_reduce") == Expected(
        floor=320, source="catalog: H100-SXM5-80GB 4 GPUs ring all_reduce slice")
    assert nccl._expected(exp("h200", 2, "passthrough"), "all_gather") == Expected(
        floor=282, source="catalog: H200-SXM-141GB 2 GPUs ring all_gather (2 x H200 nccl-tests 2.19.6 busbw peak, "
                          "measured (tests/fixtures/h200x2), 313 GB/s measured)")


@pytest.mark.parametrize(("collective", "key"), [("all_reduce", "nccl_busbw_gbps"),
                                                 ("all_gather", "nccl_collectives_gbps.all_gather")])
def test_no_floor_is_an_error_naming_the_spec_key(collective: str, key: str) -> None:
    r = _gate(_doc(_run(), collective=collective), collective, nccl={"algo": "nvls"})
    assert (r.status, r.unit) == (S.ERROR, "GB/s")
    assert r.reason == f"no {collective} floor for 2 x H200-SXM-141GB (nvls); set certification.floors.{key}"


def test_one_gpu_is_not_applicable() -> None:
    (r,) = nccl.nccl_collective(_doc(_run()), _exp(gpus=1), "all_gather")
    assert (r.gate, r.status, r.required) == ("nccl_all_gather", S.SKIPPED, False)
    assert r.reason == "n/a: one GPU: all_gather has no peer (nccl-tests prints busbw 0 for one rank by definition)"


# ---- verdicts ----------------------------------------------------------------------------------------------------

def test_healthy_capture_passes_with_its_measurements() -> None:
    r = _gate(_doc(_run()))
    assert (r.gate, r.status, r.unit, r.evidence, r.expected) == ("nccl_allreduce", S.PASS, "GB/s",
                                                                  "raw.all_reduce_perf", AR_FLOOR)
    assert r.reason == "all_reduce busbw 347.0 GB/s at 4096 MiB (nccl-tests, ring) (72.6% of raw NVLink peak)"
    m = dict(r.measured)
    sweep = m.pop("sweep")
    assert m == {"source": "nccl-tests", "collective": "all_reduce", "max_busbw_gbps": 346.98, "at_bytes": 4 * GIB,
                 "min_bytes": GIB, "algo": "ring", "wrong": 0, "out_of_bounds": 0, "validation": 1,
                 "check_iters": 1, "pct_of_nvlink_peak": 72.6, "avg_bus_bandwidth_not_gated": 110.211}
    assert len(sweep) == 31 and sweep[-1] == {"bytes": 8 * GIB, "busbw": 344.9, "run": 0}


def test_best_of_several_runs_counts() -> None:
    r = _gate(_doc(_run(scale=0.5), _run(), _run(scale=0.8)))
    assert r.status is S.PASS and r.measured["max_busbw_gbps"] == 346.98 and len(r.measured["sweep"]) == 93
    assert [p["run"] for p in r.measured["sweep"][::31]] == [0, 1, 2]


@pytest.mark.parametrize(("floor", "status"), [(346.98, S.PASS), (347.0, S.FAIL)])
def test_floor_at_its_edge(floor: float, status: S) -> None:
    r = _gate(_doc(_run()), floors={"nccl_busbw_gbps": floor})
    assert r.status is status and r.expected == Expected(floor=floor, source="spec")
    if status is S.FAIL:
        assert r.reason == ("all_reduce busbw max 347.0 GB/s at >= 1024 MiB across 2 GPUs is below 347 GB/s "
                            "(72.6% of raw NVLink peak)")


def test_below_the_catalog_floor_fails() -> None:
    r = _gate(_doc(_run(scale=0.5)), nccl={"min_bytes": 2 * GIB})
    assert r.status is S.FAIL
    assert r.reason == ("all_reduce busbw max 173.5 GB/s at >= 2048 MiB across 2 GPUs is below 312 GB/s "
                        "(36.3% of raw NVLink peak)")


def test_only_sizes_at_or_above_min_bytes_count() -> None:
    run = _run()
    for row in run["parsed"]["rows"]:
        if row["bytes"] < GIB:
            row["oop"]["busbw"] = row["ip"]["busbw"] = 999.0
    r = _gate(_doc(run))
    assert r.measured["max_busbw_gbps"] == 346.98 and r.measured["at_bytes"] == 4 * GIB


def test_validation_off_passes_only_as_a_warning() -> None:
    r = _gate(_doc(_run(validation=0)))
    assert r.status is S.WARN and r.measured["validation"] == 0
    assert r.reason == ("all_reduce busbw 347.0 GB/s at 4096 MiB (nccl-tests, ring) (72.6% of raw NVLink peak); "
                        "validation off (#wrong N/A)")


def test_wrong_results_fail_naming_the_first_size() -> None:
    run = _run()
    run["parsed"]["rows"][20]["oop"]["wrong"] = 2  # 8 MiB
    run["parsed"]["rows"][25]["ip"]["wrong"] = 1
    r = _gate(_doc(run))
    assert (r.status, r.measured["wrong"]) == (S.FAIL, 3)
    assert r.reason == ("all_reduce results wrong: #wrong=3 (first at 8388608 B), out of bounds 0: data corruption "
                        "on the node's GPUs or links")


def test_wrong_results_fail_even_below_min_bytes_and_in_a_second_run() -> None:
    bad = _run()
    bad["parsed"]["rows"][0]["oop"]["wrong"] = 1
    r = _gate(_doc(_run(), bad))
    assert r.status is S.FAIL and "#wrong=1 (first at 8 B)" in r.reason


@pytest.mark.parametrize("oob", [1, 2])
def test_out_of_bounds_values_fail(oob: int) -> None:
    r = _gate(_doc(_run(), _run(out_of_bounds=oob)))
    assert (r.status, r.measured["out_of_bounds"]) == (S.FAIL, oob)
    assert r.reason == (f"all_reduce results wrong: #wrong=0, out of bounds {oob}: data corruption on the node's "
                        "GPUs or links")


def test_old_builds_float_error_column_is_not_a_count() -> None:
    run = _run(wrong_kind="error")
    run["parsed"]["rows"][28]["oop"]["wrong"] = 1e-7
    r = _gate(_doc(run))
    assert r.status is S.PASS and r.measured["wrong"] == 0


@pytest.mark.parametrize(("runs", "why"), [
    ([_run(rc=1)], "run 1 exited 1"),
    ([_run(), _run(rc=137, errors=["Test NCCL failure common.cu:1 'unhandled cuda error'"])],
     "run 2 exited 137 (Test NCCL failure common.cu:1 'unhandled cuda error')"),
    ([_run(rc=None, timed_out=True)], "run 1 timed out"),
    ([_run(rc=1, timed_out=True)], "run 1 timed out"),
    ([_run(errors=["Test NCCL failure x", "second"])], "run 1: Test NCCL failure x"),
    ([_run(), _run(), _run(rc=2)], "run 3 exited 2"),
])
def test_runs_that_did_not_complete_do_not_certify(runs: list[dict[str, Any]], why: str) -> None:
    r = _gate(_doc(*runs))
    assert (r.status, r.unit, r.evidence) == (S.ERROR, "GB/s", "raw.all_reduce_perf")
    assert r.reason == f"all_reduce_perf did not complete: {why}; rows printed before a crash do not certify"


def test_crashed_is_none_for_clean_runs() -> None:
    assert nccl._crashed([_run(), _run(rc=None), {"rc": 0, "parsed": None}]) is None


def test_corrupt_results_outrank_a_crash() -> None:
    run = _run(rc=1)
    run["parsed"]["rows"][30]["oop"]["wrong"] = 5
    assert _gate(_doc(run)).status is S.FAIL


@pytest.mark.parametrize(("ranks", "status"), [(2, S.PASS), (0, S.PASS), (None, S.PASS), (4, S.ERROR)])
def test_rank_count_must_match_the_gpus(ranks: int | None, status: S) -> None:
    r = _gate(_doc(_run(ranks=ranks)))
    assert r.status is status
    if status is S.ERROR:  # the sweep's figures stay on the record
        assert r.reason == "nccl-tests ran on 4 ranks; the node has 2 GPUs"
        assert (r.measured["max_busbw_gbps"], r.expected, r.evidence) == (346.98, AR_FLOOR, "raw.all_reduce_perf")


def test_runs_without_rows_and_no_source() -> None:
    empty = _run()
    empty["parsed"]["rows"] = []
    doc = _doc(empty, collective="all_gather")
    doc.pop("torch")
    r = _gate(doc, "all_gather")
    assert (r.status, r.reason, r.evidence) == (S.ERROR, "nccl-tests all_gather_perf ran but printed no result rows",
                                                "raw.all_gather_perf")
    doc["nccl_tests"] = {}
    r = _gate(doc, "all_gather")
    assert r.reason == "neither nccl-tests all_gather_perf nor a torch.distributed all_gather sweep produced results"
    assert r.expected.floor == 282 and r.unit == "GB/s"


@pytest.mark.parametrize(("collective", "torch", "evidence"), [
    ("all_reduce", {"allreduce": {"wrong": 0, "sizes": [{"bytes": 2 * GIB, "busbw_gbps": 320.0}]}}, "torch.allreduce"),
    ("alltoall", {"collectives": {"alltoall": {"wrong": 0, "sizes": [{"bytes": 2 * GIB, "busbw_gbps": 320.0}]}}},
     "torch.collectives.alltoall"),
])
def test_torch_sweep_is_gated_when_nccl_tests_is_absent(collective: str, torch: dict[str, Any], evidence: str) -> None:
    doc = {"torch": torch, "nccl_tests": {}}
    r = _gate(doc, collective)
    assert (r.status, r.evidence, r.measured["source"]) == (S.PASS, evidence, "torch.distributed")
    assert r.reason == f"{collective} busbw 320.0 GB/s at 2048 MiB (torch.distributed, ring) (66.9% of raw NVLink peak)"
    assert r.measured["validation"] is None and r.measured["avg_bus_bandwidth_not_gated"] is None


def test_torch_sweep_without_a_result_check_warns() -> None:
    doc = {"torch": {"allreduce": {"sizes": [{"bytes": 2 * GIB, "busbw_gbps": 320.0}]}}}
    r = _gate(doc)
    assert r.status is S.WARN and r.reason.endswith("; validation off (#wrong N/A)")


def test_torch_sweep_with_wrong_results_fails() -> None:
    doc = {"torch": {"allreduce": {"wrong": 4, "sizes": [{"bytes": GIB, "busbw_gbps": 300.0},
                                                         {"bytes": 2 * GIB, "busbw_gbps": 320.0}]}}}
    r = _gate(doc)
    assert r.status is S.FAIL and r.reason.startswith("all_reduce results wrong: #wrong=8 (first at 1073741824 B)")


def test_direct_connect_board_derives_its_point_to_point_floors_from_its_links() -> None:
    """A 4-GPU slice of the NVSwitch board takes the board's alltoall floor; the 4-GPU direct-connect board (6 of
    its 18 NVLinks per pair) derives its own from the board's figures (issue 46: it was an error that blocked a
    healthy node): alltoall sends to 3 peers at once over 3 x 6 = 18 links, sendrecv to one over 6."""
    assert nccl._expected(exp("h100", 4, "slice"), "alltoall").floor == 288
    a2a, sr = (nccl._expected(exp("h100", 4, "baremetal"), c) for c in ("alltoall", "sendrecv"))
    assert a2a is not None and a2a.floor == 288 and "18/18 links" in (a2a.source or "")
    assert sr is not None and sr.floor == round(329 * 6 / 18, 1) and "6/18 links" in (sr.source or "")
    assert nccl._expected(exp("h100", 4, "baremetal"), "all_gather").floor == 282  # ring: the nearest count


def test_healthy_four_gpu_alltoall_passes_where_it_was_an_error() -> None:
    e = exp("h100", 4, "baremetal", nccl={"collectives": ["alltoall"]})
    (r,) = nccl.nccl_collective(_doc(_run(ranks=4), collective="alltoall"), e, "alltoall")
    assert r.status is S.PASS and r.expected is not None and r.expected.floor == 288
    (low,) = nccl.nccl_collective(_doc(_run(scale=0.5, ranks=4), collective="alltoall"), e, "alltoall")
    assert low.status is S.FAIL  # the derived floor still fails a slow board


def test_a_spec_floor_of_zero_passes_any_bandwidth() -> None:
    r = _gate(_doc(_run(scale=0.001)), floors={"nccl_busbw_gbps": 0})
    assert r.status is S.PASS and r.measured["max_busbw_gbps"] == 0.35
    assert r.reason == "all_reduce busbw 0.3 GB/s at 4096 MiB (nccl-tests, ring) (0.1% of raw NVLink peak)"
    r = _gate(_doc(_run(scale=0.0001)), floors={"nccl_busbw_gbps": 0})
    assert r.measured["pct_of_nvlink_peak"] == 0.0  # 0.0% names no share of the peak
    assert r.reason == "all_reduce busbw 0.0 GB/s at 1024 MiB (nccl-tests, ring)"


def test_no_size_at_or_above_min_bytes_is_an_error() -> None:
    r = _gate(_doc(_run()), nccl={"min_bytes": 16 * GIB})
    assert (r.status, r.measured["max_busbw_gbps"], r.measured["at_bytes"]) == (S.ERROR, None, None)
    assert r.measured["pct_of_nvlink_peak"] is None
    assert r.reason == "the all_reduce sweep has no size >= 17179869184 B (largest 8589934592 B)"


def test_a_run_that_printed_nothing_parsed_has_no_rows() -> None:
    doc = _doc({"rc": 1, "timed_out": False, "parsed": None})
    doc.pop("torch")
    r = _gate(doc)
    assert (r.status, r.reason) == (S.ERROR, "nccl-tests all_reduce_perf ran but printed no result rows")
