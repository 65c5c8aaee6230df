"""Stage contracts: summaries made by the stages' writers, read back only through `contracts.read`/`latest`;
a foreign or older summary stops the reading stage with exit 2 and one line naming the file, and the HCAs
certification failed never reach NCCL_IB_HCA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gridready import contracts
from gridready.artifacts import RunContext
from gridready.certify.judge import judge_fleet
from gridready.contracts import BenchSummary, CertifySummary, ServeSummary
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.stages import bench, serve
from gridready.stages import certify as certify_stage
from gridready.stages.serve import deploy as serve_deploy
from tests.summaries import HCAS, certification
from tests.unit.serving.conftest import vllm_tier


def _ctx(root: Path, **flags: Any) -> RunContext:
    return RunContext(customer="acme", run_id="20261130T040000Z-bbbb", root=root, **flags)


def _rewrite(path: Path, **changes: Any) -> None:
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


def test_a_summary_round_trips_through_its_writer_and_reader(make_inv):
    inv = make_inv(2)
    path, written = certification(inv, ["gpu01"], ["gpu02"])
    read = contracts.read(path, CertifySummary)
    assert read == written
    assert read.schema_version == CertifySummary.SCHEMA and read.finished_at
    assert read.hosts["gpu02"].status == "quarantined" and read.hosts["gpu02"].blocking


@pytest.mark.parametrize(("changes", "key"), [
    ({"schema_version": "gridready.ledger/0"}, "schema_version"),
    ({"customer": "other"}, "customer"),
    ({"nodes": {"gpu01": {"verdict": "maybe"}}}, "nodes.gpu01.verdict"),
    ({"hcas": {"gpu01": HCAS}}, "hcas"),
])
def test_serve_refuses_a_foreign_ledger_with_exit_2_and_one_line(make_inv, changes, key):
    inv = make_inv(1)
    path, _ = certification(inv, ["gpu01"])
    _rewrite(path.parents[2] / "ledger.json", **changes)
    result = serve.run(inv, _ctx(path.parents[3]))
    assert result.exit_code == ExitCode.INVALID == 2
    assert len(result.messages) == 1
    assert "acme/ledger.json: " in result.messages[0] and f"ledger.json: {key}: " in result.messages[0]


def test_a_summary_that_is_not_json_is_refused_naming_the_file(make_inv, tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("{not json")
    with pytest.raises(InvalidInput) as err:
        contracts.read(path, CertifySummary)
    assert err.value.code == 2 and str(err.value).count("\n") == 0 and "summary.json: (file): " in str(err.value)


def test_a_waived_hca_failure_keeps_the_node_but_not_the_hca(make_inv):
    """The live bug: certify recorded no per-node HCAs, so serve handed NCCL every HCA of the spec."""
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2)])
    passed = [h for h in HCAS if h != "mlx5_1"]
    path, summary = certification(inv, ["gpu01", "gpu02"], hcas={"gpu02": passed})
    assert summary.hosts["gpu02"].status == "certified"
    assert summary.hosts["gpu02"].hcas_passed == passed and summary.hosts["gpu02"].hcas_failed == ["mlx5_1"]
    view = serve.render(inv, _ctx(path.parents[3]))
    assert view["hosts"]["gpu02"]["env"]["NCCL_IB_HCA"] == "=" + ",".join(passed)
    assert view["hosts"]["gpu01"]["env"]["NCCL_IB_HCA"] == "=" + ",".join(HCAS)


def test_serve_records_its_endpoints_and_bench_reads_them(make_inv, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(1)
    path, _ = certification(inv, ["gpu01"])
    root = path.parents[3]
    monkeypatch.setattr(serve_deploy, "hosts", lambda *a, **k: ("success", ExitCode.OK))
    served = serve.run(inv, _ctx(root))
    assert served.exit_code == 0
    (ep,) = contracts.latest(root, "acme", ServeSummary)[1].endpoints
    assert (ep.tier, ep.url, ep.heads) == ("llama70b", "http://10.77.0.11:8000", ["gpu01"])
    result = bench.run(inv, RunContext(customer="acme", run_id="20261130T050000Z-cccc", root=root))
    assert result.exit_code == 0 and result.serve_summary and result.serve_summary.endswith("serve/summary.json")


def test_bench_refuses_a_serve_summary_of_another_schema(make_inv, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    monkeypatch.setattr(serve_deploy, "hosts", lambda *a, **k: ("success", ExitCode.OK))
    inv = make_inv(1)
    path, _ = certification(inv, ["gpu01"])
    root = path.parents[3]
    assert serve.run(inv, _ctx(root)).exit_code == 0
    _rewrite(root / "acme" / "20261130T040000Z-bbbb" / "serve" / "summary.json", schema_version=1)
    result = bench.run(inv, RunContext(customer="acme", run_id="20261130T050000Z-cccc", root=root))
    assert result.exit_code == 2 and len(result.messages) == 1
    assert "serve/summary.json: schema_version: 1 is not 'gridready.serve-summary/2'" in result.messages[0]


def test_bench_without_a_serve_run_is_exit_2(make_inv):
    inv = make_inv(1)
    path, _ = certification(inv, ["gpu01"])
    result = bench.run(inv, RunContext(customer="acme", run_id="20261130T050000Z-cccc", root=path.parents[3]))
    assert result.exit_code == 2 and "run `invoke serve` first" in result.messages[0]


def test_a_summary_takes_its_own_stage_and_schema_and_no_other():
    made = dict(customer="acme", run_id="r", status="success", exit_code=0, started_at="2026-12-01T00:00:00+00:00")
    served = ServeSummary(**made)
    assert (served.stage, served.schema_version) == ("serve", "gridready.serve-summary/2")
    for wrong in ({"stage": "bench"}, {"schema_version": "gridready.serve-summary/1"}):
        with pytest.raises(ValueError, match=next(iter(wrong))):
            ServeSummary(**made, **wrong)
    with pytest.raises(ValueError, match="stage 'serve' is not 'bench'"):
        BenchSummary.model_validate(served.model_dump(exclude={"certification", "endpoints"}))


def test_a_certify_run_that_reached_no_node_says_so_with_exit_4(make_inv, tmp_path):
    inv = make_inv(2)
    hosts = ["gpu01", "gpu02"]
    verdicts = certify_stage.judge_probes(inv, hosts, tmp_path / "no-probe-came-back")
    fleet = judge_fleet(inv.spec.certification, verdicts, customer="acme", run_id="r")
    ctx = RunContext(customer="acme", run_id="20261201T010000Z-unre", root=tmp_path)
    summary = certify_stage.write_summary(inv, ctx, fleet, hosts=hosts, unreachable=hosts)
    assert summary.exit_code == 4 == ExitCode.UNREACHABLE and summary.status == "unreachable"
    assert "no node reachable: gpu01, gpu02" in summary.messages
