"""The SDC gates' every verdict as the whole record: the node gate `sdc` (no section, GPUs left out, no workload,
a workload that did not run, several workloads that do not repeat, the pass), `figures` (the consensus key from
either nvidia-smi source) and the fleet gate `sdc_consensus` over nodes without digests, GPUs with a non-repeating
workload before a repeating one, and several minority or tied workloads on one GPU."""

from __future__ import annotations

from typing import Any

from gridready import catalog
from gridready.certify import sdc
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec

H200 = catalog.lookup("h200")
assert H200 is not None
A, B, C = "a1" * 16, "b2" * 16, "c3" * 16
REPEAT = {"equals": "every repeat bit-identical", "floor": None, "ceiling": None,
          "source": "a GPU repeats the same seeded GEMM bit-identically (docs/certification.md, sdc)"}


def exp(gpus: int = 1) -> Expectations:
    return Expectations(node="n1", sku=H200, gpus=gpus, spec=CertificationSpec.model_validate({}))


def record(status: str, reason: str, gate: str = "sdc", node: str = "n1", **kw: Any) -> dict[str, Any]:
    base = {"gate": gate, "node": node, "gpu": None, "hca": None, "status": status, "measured": None,
            "expected": None, "unit": None, "reason": reason, "evidence": None, "required": True, "waived": False}
    return {**base, **kw}


def dump(results: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in results]


def work(*digests: str) -> dict[str, Any]:
    return {"digest": max(set(digests), key=digests.count), "digests": list(digests), "repeats": len(digests),
            "repeat_ok": len(set(digests)) == 1}


def section(*gpus: dict[str, Any], workloads: tuple[str, ...] = ("bf16", "fp8")) -> dict[str, Any]:
    return {"sdc": {"present": True, "workloads": list(workloads), "gpus": list(gpus)}}


def test_no_section_is_an_error_with_the_probe_reason_or_the_default():
    assert dump(sdc.sdc({}, exp())) == [record(
        "error", "no SDC digests: no SDC section in the probe document (probe without the sdc step)", evidence="sdc")]
    assert dump(sdc.sdc({"sdc": {"present": False, "reason": "torch absent"}}, exp())) == [record(
        "error", "no SDC digests: torch absent", evidence="sdc")]


def test_gpus_left_out_are_named_in_one_error_before_the_gpus_that_ran():
    doc = section({"index": 0, "workloads": {"bf16": work(A, A), "fp8": work(B, B)}})
    got = dump(sdc.sdc(doc, exp(gpus=3)))
    assert got[0] == record("error", "no SDC digests for GPU 1, 2 of 3", evidence="raw.sdc")
    assert [r["status"] for r in got] == ["error", "pass"]


def test_no_workload_listed_is_an_error_even_when_every_gpu_reported():
    doc = section({"index": 0, "workloads": {}}, workloads=())
    got = dump(sdc.sdc(doc, exp()))
    assert got[0] == record("error", "the SDC step ran no workload", evidence="raw.sdc")
    assert len(got) == 2


def test_a_workload_that_did_not_run_in_full():
    doc = section({"index": 0, "workloads": {"bf16": work(A, A)}}, workloads=("bf16", "fp8", "fp32"))
    assert dump(sdc.sdc(doc, exp())) == [record(
        "error", "GPU 0: workload(s) fp8, fp32 did not run", gpu=0, evidence="raw.sdc", expected=REPEAT,
        measured={"digests": {"bf16": A}, "repeats": {"bf16": 2}})]


def test_two_workloads_that_do_not_repeat_in_full():
    doc = section({"index": 1, "workloads": {"bf16": work(A, A, B), "fp8": work(A, B, C, C)}})
    got = dump(sdc.sdc(doc, exp(gpus=2)))
    assert got[0]["reason"] == "no SDC digests for GPU 0 of 2"
    assert got[1] == record(
        "fail", "GPU 1: does not repeat: bf16 gave 2 different digests in 3 runs (a1a1a1a1a1a1 x2, b2b2b2b2b2b2 x1); "
        "fp8 gave 3 different digests in 4 runs (c3c3c3c3c3c3 x2, a1a1a1a1a1a1 x1, b2b2b2b2b2b2 x1)", gpu=1,
        evidence="raw.sdc", expected=REPEAT, measured={"digests": {"bf16": A, "fp8": C},
                                                       "repeats": {"bf16": 3, "fp8": 4}})


def test_the_pass_in_full():
    doc = section({"index": 0, "workloads": {"bf16": work(A, A, A), "fp8": work(B, B)}})
    assert dump(sdc.sdc(doc, exp())) == [record(
        "pass", "GPU 0: 2 seeded workloads repeated bit-identically (bf16 x3, fp8 x2)", gpu=0, evidence="raw.sdc",
        expected=REPEAT, measured={"digests": {"bf16": A, "fp8": B}, "repeats": {"bf16": 3, "fp8": 2}})]


def probe(driver_q: str | None, query: list[dict[str, Any]]) -> dict[str, Any]:
    q = {"driver_version": driver_q} if driver_q else {}
    return {"nvidia_smi": {"q": q, "query": query},
            "sdc": {"present": True, "cuda": "12.8", "torch": "2.7.1", "workloads": ["bf16"],
                    "gpus": [{"index": 0, "name": "NVIDIA H200", "workloads": {"bf16": {**work(A, A)},
                                                                                  "fp8": {"digest": B}}}]}}


def test_figures_key_and_digests_in_full():
    assert sdc.figures(probe("570.133.20", [{"driver_version": "550.1"}])) == {
        "key": {"driver": "570.133.20", "cuda": "12.8", "torch": "2.7.1"},
        "gpus": [{"gpu": 0, "name": "NVIDIA H200", "digests": {"bf16": A, "fp8": B},
                  "repeat_ok": {"bf16": True, "fp8": False}}]}


def test_figures_driver_from_the_first_query_row_that_has_one():
    fig = sdc.figures(probe(None, [{"index": 0}, {"driver_version": "580.95.05"}, {"driver_version": "1"}]))
    assert fig is not None and fig["key"]["driver"] == "580.95.05"
    assert sdc.figures(probe(None, []))["key"]["driver"] is None  # type: ignore[index]


def test_figures_without_digests_is_none():
    assert sdc.figures({}) is None
    assert sdc.figures({"sdc": {"present": False}}) is None


def fig(*gpus: dict[str, str | None], repeat: dict[str, bool] | None = None) -> dict[str, Any]:
    return {"key": {"driver": "580.95.05", "cuda": "13.0", "torch": "2.9.0"},
            "gpus": [{"gpu": i, "name": "H200", "digests": dict(d),
                      "repeat_ok": {w: (repeat or {}).get(w, True) for w in d}} for i, d in enumerate(gpus)]}


LABEL = "H200, driver 580.95.05, CUDA 13.0, torch 2.9.0"
MAJORITY = {"equals": "the majority digest of the GPUs with the same key", "floor": None, "ceiling": None,
            "source": f"fleet: {LABEL}"}
KEY = {"driver": "580.95.05", "cuda": "13.0", "torch": "2.9.0"}


def test_a_node_without_digests_listed_first_stops_neither_the_votes_nor_the_others():
    out = sdc.consensus({"n0": ("H200", None), "n1": ("H200", fig({"w": A}, {"w": A})),
                         "n2": ("H200", fig({"w": A}, {"w": B}))})
    assert list(out) == ["n1", "n2"]
    assert [r.status for r in out["n2"]] == [S.PASS, S.FAIL]
    assert dump(out["n1"])[0] == record(
        "pass", f"GPU 0: 1 workload digests equal the majority of the GPUs with key {LABEL}", gate="sdc_consensus",
        gpu=0, evidence="raw.sdc", expected=MAJORITY, measured={"key": KEY, "digests": {"w": A},
                                                               "majority": {"w": A}})


def test_a_non_repeating_workload_sorted_first_leaves_the_next_one_judged():
    """GPU 1's `a` did not repeat (no vote), its `b` did: `b` still meets the majority."""
    nodes = {"n1": ("H200", fig({"a": A, "b": B}, {"a": C, "b": B}, {"a": A, "b": C}))}
    nodes["n1"][1]["gpus"][1]["repeat_ok"]["a"] = False
    out = sdc.consensus(nodes)["n1"]
    assert [r.status for r in out] == [S.PASS, S.PASS, S.FAIL]
    assert out[1].reason == f"GPU 1: 1 workload digests equal the majority of the GPUs with key {LABEL}"
    assert out[1].measured["majority"] == {"a": A, "b": B}


def test_two_minority_workloads_in_full():
    nodes = {"n1": ("H200", fig({"x": A, "y": B}, {"x": A, "y": B}, {"x": C, "y": C}))}
    got = dump(sdc.consensus(nodes)["n1"])
    assert got[2] == record(
        "fail", f"GPU 2: silent data corruption suspected: x: digest {C} differs from the majority's {A} (2 of 3 "
        f"GPUs); y: digest {C} differs from the majority's {B} (2 of 3 GPUs)", gate="sdc_consensus", gpu=2,
        evidence="raw.sdc", expected=MAJORITY, measured={"key": KEY, "digests": {"x": C, "y": C},
                                                         "majority": {"x": A, "y": B}})


def test_two_tied_workloads_in_full():
    nodes = {"n1": ("H200", fig({"x": A, "y": B}, {"x": C, "y": A}))}
    got = dump(sdc.consensus(nodes)["n1"])
    assert got[0] == record(
        "error", "GPU 0: x: no majority among 2 GPUs (a1a1a1a1a1a1 x1, c3c3c3c3c3c3 x1); y: no majority among 2 GPUs "
        "(b2b2b2b2b2b2 x1, a1a1a1a1a1a1 x1)", gate="sdc_consensus", gpu=0, evidence="raw.sdc", expected=MAJORITY,
        measured={"key": KEY, "digests": {"x": A, "y": B}, "majority": {"x": A, "y": B}})


def test_the_only_gpu_of_its_key_in_full():
    got = dump(sdc.consensus({"n1": ("H200", fig({"x": A}))})["n1"])
    assert got == [record("skipped", f"GPU 0: the only GPU with key {LABEL}: nothing to compare (digests recorded "
                          "for later runs)", gate="sdc_consensus", gpu=0, evidence="raw.sdc", expected=MAJORITY,
                          required=False, measured={"key": KEY, "digests": {"x": A}, "majority": {"x": A}})]
