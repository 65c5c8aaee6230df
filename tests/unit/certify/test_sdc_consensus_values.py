"""SDC consensus at the value level: the strict-majority boundary (n/2 is a tie, n/2 + 1 a majority), votes only
within one key (SKU, driver, CUDA, torch) over mixed fleets, non-repeating GPUs without a vote, exact reasons."""

from __future__ import annotations

from typing import Any

import pytest

from gridready.certify.result import GateStatus as S
from gridready.certify.sdc import consensus, figures

A, B, C = "a" * 64, "b" * 64, "c" * 64


def fig(*digests: str, driver: str = "580.95.05", repeat: bool = True, workload: str = "gemm") -> dict[str, Any]:
    return {"key": {"driver": driver, "cuda": "13.0", "torch": "2.9.0"},
            "gpus": [{"gpu": i, "name": "H200", "digests": {workload: d}, "repeat_ok": {workload: repeat}}
                     for i, d in enumerate(digests)]}


def statuses(out: dict[str, list]) -> dict[str, list[S]]:
    return {n: [r.status for r in rs] for n, rs in out.items()}


@pytest.mark.parametrize(("digests", "want"), [
    ((A, A, B), [S.PASS, S.PASS, S.FAIL]),          # 2 of 3: a strict majority
    ((A, A, B, B), [S.ERROR] * 4),                   # 2 of 4: a tie, nobody named
    ((A, A, A, B), [S.PASS, S.PASS, S.PASS, S.FAIL]),
    ((A, B), [S.ERROR, S.ERROR]),
    ((A, A), [S.PASS, S.PASS]),
    ((A,), [S.SKIPPED]),
])
def test_strict_majority_boundary(digests, want):
    out = consensus({"n1": ("H200", fig(*digests))})
    assert statuses(out) == {"n1": want}


def test_the_minority_reason_names_both_digests_and_the_count():
    (bad,) = [r for r in consensus({"n1": ("H200", fig(A, A, B))})["n1"] if r.status is S.FAIL]
    assert bad.reason == (f"GPU 2: silent data corruption suspected: gemm: digest {B} differs from the majority's "
                          f"{A} (2 of 3 GPUs)")
    assert bad.gate == "sdc_consensus" and bad.gpu == 2 and bad.measured["majority"] == {"gemm": A}


def test_a_tie_names_every_digest_with_its_count():
    r = consensus({"n1": ("H200", fig(A, B))})["n1"][0]
    assert r.reason == "GPU 0: gemm: no majority among 2 GPUs (aaaaaaaaaaaa x1, bbbbbbbbbbbb x1)"


def test_votes_count_across_nodes_of_the_same_key():
    out = consensus({"n1": ("H200", fig(A, A)), "n2": ("H200", fig(A, B))})
    assert statuses(out) == {"n1": [S.PASS, S.PASS], "n2": [S.PASS, S.FAIL]}
    assert out["n2"][1].reason.endswith("(3 of 4 GPUs)")


@pytest.mark.parametrize("other", [("H100", "580.95.05"), ("H200", "570.1.1")])
def test_mixed_keys_never_vote_together(other):
    """A different SKU or driver computes other bytes: its GPUs are compared only among themselves."""
    sku, driver = other
    out = consensus({"n1": ("H200", fig(A, A)), "n2": (sku, fig(B, driver=driver))})
    assert statuses(out) == {"n1": [S.PASS, S.PASS], "n2": [S.SKIPPED]}
    r = out["n2"][0]
    assert r.required is False
    assert r.reason == (f"GPU 0: the only GPU with key {sku}, driver {driver}, CUDA 13.0, torch 2.9.0: nothing to "
                        "compare (digests recorded for later runs)")


def test_pass_reason_and_expected_source():
    r = consensus({"n1": ("H200", fig(A, A))})["n1"][0]
    assert r.reason == "GPU 0: 1 workload digests equal the majority of the GPUs with key H200, driver 580.95.05, " \
                       "CUDA 13.0, torch 2.9.0"
    assert r.expected.source == "fleet: H200, driver 580.95.05, CUDA 13.0, torch 2.9.0"


def test_non_repeating_gpus_do_not_vote():
    """Two GPUs that do not repeat carry digest B; they neither outvote the one A nor get a consensus result."""
    n2 = fig(B, B, repeat=False)
    out = consensus({"n1": ("H200", fig(A, A)), "n2": ("H200", n2)})
    assert statuses(out) == {"n1": [S.PASS, S.PASS], "n2": []}


def test_a_node_without_figures_gets_nothing():
    out = consensus({"n1": ("H200", fig(A, A)), "n2": ("H200", None)})
    assert "n2" not in out and len(out["n1"]) == 2


def test_figures_key_and_driver_from_the_query_rows():
    doc = {"sdc": {"present": True, "cuda": "13.0", "torch": "2.9.0", "gpus": [
        {"index": 0, "name": "H200", "workloads": {"gemm": {"digest": A, "repeat_ok": True}}}]},
        "nvidia_smi": {"query": [{"index": 0}, {"index": 1, "driver_version": "580.95.05"}]}}
    f = figures(doc)
    assert f == {"key": {"driver": "580.95.05", "cuda": "13.0", "torch": "2.9.0"},
                 "gpus": [{"gpu": 0, "name": "H200", "digests": {"gemm": A}, "repeat_ok": {"gemm": True}}]}
    doc["nvidia_smi"]["q"] = {"driver_version": "580.1.1"}
    assert figures(doc)["key"]["driver"] == "580.1.1"
    assert figures({"sdc": {"present": False}}) is None and figures({}) is None
