"""The HCA verdicts of `invoke certify` reach serve: on a provisioned 2-host sandbox where node2's mlx5_1 runs at
half rate and the spec waives the rate gates (the node stays in service on its other rails), the certify summary
records mlx5_1 as failed and the NCCL_IB_HCA that serve renders for node2 leaves it out."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_pipeline import _invoke

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]
HALF = [{"kind": "hca_half_rate", "hca": "mlx5_1"}]
WAIVE = "  waive: [hca_rate, hca_gdr_bw]\n"


def test_an_hca_that_failed_certification_is_absent_from_nccl_ib_hca(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(2, {"node2": {"faults": HALF}}, healthy=True)
    cluster = fleet.inventory / "cluster.yml"
    cluster.write_text(cluster.read_text().replace("  not_applicable: [", WAIVE + "  not_applicable: [", 1))
    artifacts = tmp_path_factory.mktemp("artifacts")
    run = _invoke(fleet.inventory, artifacts, "provision", "certify")
    assert run.returncode == 0, run.stderr[-4000:]
    (summary_path,) = artifacts.glob("*/*/certify/summary.json")
    certify = json.loads(summary_path.read_text())
    assert certify["certified"] == ["node1", "node2"], certify["hosts"]
    assert "mlx5_1" in certify["hosts"]["node2"]["hcas_failed"]
    assert "mlx5_1" not in certify["hosts"]["node2"]["hcas_passed"]
    assert "mlx5_1" in certify["hosts"]["node1"]["hcas_passed"]

    plan = _invoke(fleet.inventory, artifacts, "plan", "--json")
    assert plan.returncode == 0, plan.stderr[-4000:]
    hosts = json.loads(plan.stdout)["serve"]["rendered"]["hosts"]
    node2 = hosts["node2"]["env"]["NCCL_IB_HCA"].lstrip("=").split(",")
    node1 = hosts["node1"]["env"]["NCCL_IB_HCA"].lstrip("=").split(",")
    assert "mlx5_1" not in node2 and node2 == certify["hosts"]["node2"]["hcas_passed"]
    assert "mlx5_1" in node1 and len(node1) == 8
