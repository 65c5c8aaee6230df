"""The README's first command, for real: `invoke provision certify serve` on a fresh 3-host sandbox fleet.

node3 carries the default sandbox fault (GPU 3's PCIe link down-trained to Gen4 x8): certification must quarantine
it, serving must run both tiers on node1 and node2, and a check-mode line afterwards must change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def _invoke(inv: Path, artifacts: Path, *tasks: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRIDREADY_INVENTORY": str(inv), "GRIDREADY_ARTIFACTS": str(artifacts), "CI": "1"}
    if check:
        env["INVOKE_GRIDREADY_CHECK"] = "1"
    return subprocess.run([sys.executable, "-m", "invoke", *tasks], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=2400, check=False)


def _summaries(artifacts: Path) -> dict[str, dict[str, dict]]:
    """{run_id: {stage: summary}}"""
    out: dict[str, dict[str, dict]] = {}
    for path in artifacts.glob("*/*/*/summary.json"):
        out.setdefault(path.parent.parent.name, {})[path.parent.name] = json.loads(path.read_text())
    return out


@pytest.fixture(scope="module")
def pipeline(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(3)
    artifacts = tmp_path_factory.mktemp("artifacts")
    first = _invoke(fleet.inventory, artifacts, "provision", "certify", "serve")
    return fleet, artifacts, first


def test_pipeline_exits_0_and_writes_three_summaries(pipeline):
    _, artifacts, first = pipeline
    assert first.returncode == 0, first.stderr[-4000:]
    (run,) = _summaries(artifacts).values()
    assert set(run) == {"provision", "certify", "serve"}
    assert all(s["exit_code"] == 0 for s in run.values())


def test_certification_quarantines_exactly_the_faulted_host(pipeline):
    _, artifacts, _ = pipeline
    (run,) = _summaries(artifacts).values()
    certify = run["certify"]
    assert sorted(certify["quarantined"]) == ["node3"]
    assert sorted(certify["certified"]) == ["node1", "node2"]
    report = (next(artifacts.glob("*/*/certify")) / "report.md").read_text()
    assert "GPU 3" in report and "x8" in report
    assert "## Fabric (multi-node)" in report and "| set | node1+node2 | pass |" in report


def test_serve_runs_both_tiers_on_certified_nodes_and_records_a_decision(pipeline):
    _, artifacts, _ = pipeline
    (run,) = _summaries(artifacts).values()
    serve = run["serve"]
    assert serve["hosts"]["node3"]["status"] == "skipped"
    assert {t: r["passed"] for t, r in serve["data"]["bench"].items()} == {"llama8b-vllm": True,
                                                                           "llama8b-trtllm": True}
    heads = {p["tier"]: p["replicas"][0]["head"] for p in serve["data"]["plan"]}
    assert set(heads.values()) <= {"node1", "node2"}
    decision = next(artifacts.glob("*/*/serve/decision/*/decision.json"))
    assert json.loads(decision.read_text())["winner"] in heads


def test_check_mode_afterwards_changes_nothing(pipeline):
    fleet, artifacts, _ = pipeline
    again = _invoke(fleet.inventory, artifacts, "provision", "certify", "serve", check=True)
    assert again.returncode == 0, again.stderr[-4000:]
    runs = _summaries(artifacts)
    latest = runs[max(runs)]
    assert set(latest) == {"provision", "certify", "serve"}
    assert all(s["check"] for s in latest.values())
    assert [h for h, o in latest["provision"]["hosts"].items() if o["changed"]] == []


def test_a_slo_set_too_tight_fails_invoke_bench_with_exit_3_naming_the_slo(pipeline):
    fleet, artifacts, _ = pipeline
    cluster = fleet.inventory / "cluster.yml"
    cluster.write_text(cluster.read_text().replace("ttft_ms_p99: 2000", "ttft_ms_p99: 1"))
    bench = _invoke(fleet.inventory, artifacts, "bench")
    assert bench.returncode == 3, bench.stderr[-4000:]
    assert "ttft_ms_p99" in bench.stderr
