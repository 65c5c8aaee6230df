"""Fleet-relative outliers (median + MAD per SKU group) and the quarantine outputs."""

from __future__ import annotations

import json

import yaml

from gridready.certify.outliers import flag_outliers, judge_fleet_outliers
from gridready.certify.quarantine import k8s_node_patches, quarantine_yml, slurm_drain_commands, write_outputs
from gridready.spec.certification import CertificationSpec

GEMM = {"a": 790.0, "b": 801.0, "c": 795.0, "d": 798.0, "e": 700.0, "f": 803.0}
GROUPS = dict.fromkeys(GEMM, "h100")


def test_node_far_below_the_median_is_flagged_even_above_the_floor():
    res = {r.node: r for r in flag_outliers("bf16_gemm_tflops", GEMM, GROUPS)}
    assert res["e"].status == "warn" and "below the h100 median" in res["e"].reason
    assert all(res[n].status == "pass" for n in "abcdf")
    assert not res["e"].blocks_certification
    fail = {r.node: r for r in flag_outliers("bf16_gemm_tflops", GEMM, GROUPS, action="fail")}
    assert fail["e"].status == "fail" and fail["e"].blocks_certification


def test_identical_fleet_does_not_flag_noise():
    vals = {"a": 388.0, "b": 388.0, "c": 388.0, "d": 387.0}
    assert {r.status for r in flag_outliers("pair_busbw_gbps", vals, dict.fromkeys(vals, "g"))} == {"pass"}


def test_groups_are_judged_separately_and_small_groups_skipped():
    vals = {"h1": 800.0, "h2": 805.0, "h3": 798.0, "x1": 600.0, "x2": 610.0}
    groups = {"h1": "h200", "h2": "h200", "h3": "h200", "x1": "h100nvl", "x2": "h100nvl"}
    res = {r.node: r for r in flag_outliers("bf16_gemm_tflops", vals, groups)}
    assert {res[n].status for n in ("h1", "h2", "h3")} == {"pass"}
    assert res["x1"].status == "skipped" and not res["x1"].blocks_certification


def test_spec_threshold_and_action():
    spec = CertificationSpec(outlier_mad_threshold=50, outlier_action="fail")
    res = judge_fleet_outliers({"bf16_gemm_tflops": GEMM, "hbm_copy_tbps": {"a": 4.1, "b": None}}, GROUPS, spec)
    assert {r.status for r in res if r.gate == "outlier_bf16_gemm_tflops"} == {"pass"}
    assert [r.node for r in res if r.gate == "outlier_hbm_copy_tbps"] == ["a"]


def test_quarantine_outputs(tmp_path):
    q = {"gpu03": "fabric: failed pairwise all-reduce with 2 partners (gpu04 194 GB/s, gpu01 194 GB/s)"}
    inv = yaml.safe_load(quarantine_yml(q, "run-1"))
    hosts = inv["all"]["children"]["gridready_quarantine"]["hosts"]
    assert list(hosts) == ["gpu03"] and hosts["gpu03"]["gridready_quarantine_run"] == "run-1"
    patches = {p["node"]: p for p in k8s_node_patches(["gpu01", "gpu02"], q)}
    assert patches["gpu01"]["labels"] == {"gridready.io/certified": "true"} and patches["gpu01"]["taints"] == []
    assert patches["gpu03"]["labels"] == {"gridready.io/certified": "false"}
    assert patches["gpu03"]["taints"] == [{"key": "gridready.io/quarantined", "value": "true",
                                           "effect": "NoSchedule"}]
    cmd = slurm_drain_commands(q)[0]
    assert cmd.startswith("scontrol update nodename=gpu03 state=drain reason='gridready: fabric: failed")
    paths = write_outputs(tmp_path, ["gpu01"], q)
    assert json.loads(paths["k8s"].read_text())[1]["node"] == "gpu03"
    assert "scontrol update nodename=gpu03" in paths["slurm"].read_text()
    assert yaml.safe_load(quarantine_yml({}))["all"]["children"]["gridready_quarantine"]["hosts"] == {}
