"""Fleet outliers: the leave-one-out bar (median of the others - k x max(1.4826 x MAD, 3% of the median)), its
boundary, the action (warn / fail), small groups, and the per-node HCA write bandwidth figure."""

from __future__ import annotations

import pytest

from gridready.certify.outliers import flag_outliers, hca_bw_per_node, judge_fleet_outliers, mad
from gridready.certify.result import Expected, GateResult
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec

G = {n: "h200" for n in "abcd"}


def _by_node(results: list[GateResult]) -> dict[str, GateResult]:
    return {r.node: r for r in results}


def test_mad_is_median_and_median_absolute_deviation() -> None:
    assert mad([1.0, 2.0, 4.0, 10.0]) == (3.0, 1.5)


def test_a_node_far_below_its_peers_warns_with_the_bar_and_the_spread() -> None:
    out = _by_node(flag_outliers("bf16_gemm_tflops", {"a": 700.0, "b": 710.0, "c": 690.0, "d": 500.0}, G))
    d = out["d"]
    # peers 690, 700, 710: median 700, 1.4826 x MAD 10 = 14.8 < 3% of 700 = 21: spread 21, bar 700 - 4 x 21
    assert (d.gate, d.status, d.measured, d.unit, d.required) == ("outlier_bf16_gemm_tflops", S.WARN, 500.0,
                                                                 "TFLOP/s", False)
    assert d.expected == Expected(floor=616.0, source="fleet: median 700 of the 3 other nodes of group h200 - 4 x "
                                  "spread 21 (1.4826 x MAD, at least 3% of the median)")
    assert d.reason == "bf16_gemm_tflops 500 is 9.5 spreads below the h200 median 700 (of the 3 other nodes)"
    a = out["a"]  # peers 500, 690, 710: median 690, MAD 20 -> 29.652 > 20.7
    assert (a.status, a.measured, a.required) == (S.PASS, 700.0, False)
    assert a.expected == Expected(floor=round(690 - 4 * 1.4826 * 20, 3), source="fleet: median 690 of the 3 other "
                                  "nodes of group h200 - 4 x spread 29.7 (1.4826 x MAD, at least 3% of the median)")
    assert a.reason == "bf16_gemm_tflops 700 within the h200 fleet (median of the others 690)"


def test_fail_action_blocks() -> None:
    out = _by_node(flag_outliers("hbm_copy_tbps", {"a": 4.0, "b": 4.0, "c": 4.0, "d": 3.0}, G, action="fail"))
    assert (out["d"].status, out["d"].required, out["d"].unit) == (S.FAIL, True, "TB/s")
    assert (out["a"].status, out["a"].required) == (S.PASS, True)


@pytest.mark.parametrize(("value", "status"), [(88.0, S.PASS), (87.999, S.WARN), (100.0, S.PASS)])
def test_the_bar_is_twelve_percent_below_identical_peers(value: float, status: S) -> None:
    # identical peers: MAD 0, so the spread is 3% of the median and the bar 100 - 4 x 3 = 88
    out = _by_node(flag_outliers("nccl_busbw_gbps", {"a": 100.0, "b": 100.0, "c": 100.0, "d": value}, G))
    assert out["d"].status is status and out["d"].expected.floor == 88.0
    assert out["d"].unit == "GB/s"


def test_threshold_and_rel_floor_move_the_bar() -> None:
    vals = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 95.0}
    assert _by_node(flag_outliers("x", vals, G, threshold=1.0))["d"].status is S.WARN  # bar 97
    assert _by_node(flag_outliers("x", vals, G, threshold=2.0))["d"].status is S.PASS  # bar 94
    r = _by_node(flag_outliers("x", vals, G, threshold=2.0, rel_floor=0.01))["d"]  # bar 98
    assert r.status is S.WARN and r.expected.floor == 98.0
    assert r.expected.source.endswith("- 2 x spread 1 (1.4826 x MAD, at least 1% of the median)")


def test_groups_are_judged_apart_and_small_groups_are_skipped() -> None:
    vals = {"a": 100.0, "b": 100.0, "c": 60.0, "x": 10.0, "y": None}
    out = flag_outliers("pair_busbw_gbps", vals, {"a": "g1", "b": "g1", "c": "g1", "x": "g2", "y": "g2"},
                        min_group=3)
    assert [r.node for r in out] == ["a", "b", "c", "x"]
    x = out[3]
    assert x == GateResult(gate="outlier_pair_busbw_gbps", node="x", status=S.SKIPPED, required=False, measured=10.0,
                           unit="GB/s", reason="group g2 has 1 nodes (< 3): no fleet comparison")
    assert out[2].status is S.WARN


def test_the_minimum_group_size_is_a_setting() -> None:
    vals = {"a": 100.0, "b": 100.0, "c": 10.0}
    assert {r.status for r in flag_outliers("x", vals, G, min_group=4)} == {S.SKIPPED}
    r = flag_outliers("x", vals, G, min_group=4)[0]
    assert r.reason == "group h200 has 3 nodes (< 4): no fleet comparison" and r.unit is None
    assert _by_node(flag_outliers("x", vals, G))["c"].status is S.WARN


def test_nodes_without_a_group_share_the_unknown_group_and_units_can_be_given() -> None:
    out = flag_outliers("hca_write_bw_gbits", {"a": 400.0, "b": 400.0, "c": 390.0}, {}, unit="Gbit/s")
    assert [(r.node, r.status, r.unit) for r in out] == [("a", S.PASS, "Gbit/s"), ("b", S.PASS, "Gbit/s"),
                                                         ("c", S.PASS, "Gbit/s")]
    assert out[0].reason == "hca_write_bw_gbits 400 within the ? fleet (median of the others 395)"
    assert flag_outliers("hca_write_bw_gbits", {"a": 1.0}, {})[0].unit == "Gb/s"


def test_values_are_rounded_to_three_places() -> None:
    out = _by_node(flag_outliers("x", {"a": 1.23456, "b": 1.0, "c": 1.0}, G))
    assert out["a"].measured == 1.235 and out["b"].expected.floor == round(1.11728 - 4 * 1.4826 * 0.11728, 3)


@pytest.mark.parametrize(("spec", "status", "required"), [
    (None, S.WARN, False),
    (CertificationSpec(profile="quick", outlier_action="fail"), S.FAIL, True),
    (CertificationSpec(profile="quick", outlier_mad_threshold=40.0), S.PASS, False),
])
def test_fleet_outliers_follow_the_spec(spec: CertificationSpec | None, status: S, required: bool) -> None:
    figs = {"bf16_gemm_tflops": {"a": 700.0, "b": 700.0, "c": 700.0, "d": 350.0},
            "hbm_copy_tbps": {"a": 4.0, "b": 4.0, "c": 4.0, "d": None}}
    out = judge_fleet_outliers(figs, G, spec)
    assert [(r.gate, r.node) for r in out] == [("outlier_bf16_gemm_tflops", n) for n in "abcd"] + [
        ("outlier_hbm_copy_tbps", n) for n in "abc"]
    d = out[3]
    assert (d.status, d.required) == (status, required)


def test_hca_bandwidth_per_node_is_its_slowest_hca() -> None:
    probe_hca = {
        "n1": {"ib_write_bw": {"mlx5_0": {"parsed": {"avg_gbits": 390.5}}, "mlx5_1": {"parsed": {"avg_gbits": 200.0}},
                               "mlx5_2": {"parsed": {"avg_gbits": None}}, "mlx5_3": {"parsed": None}}},
        "n2": {"ib_write_bw": {"mlx5_0": {"parsed": {}}}},
        "n3": {"ib_write_bw": None},
        "n4": {},
    }
    assert hca_bw_per_node(probe_hca) == {"n1": 200.0, "n2": None, "n3": None, "n4": None}
