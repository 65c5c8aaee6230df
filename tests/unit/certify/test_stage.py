"""The certify stage with the playbook replaced by a fake that 'fetches' probe documents: judging, reports,
summary.json, the failure policy's exit codes and the validity window (re-run skips valid nodes unless --force)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gridready import ansible
from gridready.artifacts import RunContext
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.spec import ClusterSpec
from gridready.stages import certify as stage
from tests.unit.certify.fixtures_io import BEFORE_ISSUE30, probe_quick


def _inv(tmp: Path, policy: str = "quarantine", minimum: int = 1) -> Inventory:
    spec = ClusterSpec.model_validate({
        "customer": "acme",
        "node_groups": [{"name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 2, "platform": "passthrough",
                         "gpudirect_rdma": False}],
        # the h200x2 capture predates the sdc and goodput probe steps (fixtures_io.BEFORE_ISSUE30)
        "certification": {"profile": "quick", "not_applicable": ["dcgm", *BEFORE_ISSUE30], "failure_policy": policy,
                          "min_certified_nodes": minimum, "fabric": {"enabled": False}},
    })
    hosts = {"gpu-a": {}, "gpu-b": {}}
    return Inventory(name="acme", path=tmp, spec=spec, hosts=hosts, groups={"gpu_nodes": list(hosts)})


class FakeRunner:
    """Stands in for ansible.run_playbook: writes each host's probe JSON where the role's fetch would."""

    def __init__(self, docs: dict[str, dict[str, Any] | None]) -> None:
        self.docs, self.calls = docs, []

    def __call__(self, inv: Inventory, playbook: str, stage_dir: Path, **kw: Any) -> ansible.PlaybookResult:
        self.calls.append({"playbook": playbook, **kw})
        fetch = Path(kw["extravars"]["gridready_certify_fetch_dir"])
        hosts = {}
        for host, doc in self.docs.items():
            if kw.get("limit") and f"!{host}" in kw["limit"]:
                continue
            if doc is not None:
                (fetch / host).mkdir(parents=True, exist_ok=True)
                (fetch / host / "probe.json").write_text(json.dumps(doc))
            hosts[host] = ansible.HostStats(ok=5, changed=0, failures=0 if doc else 1, unreachable=0, skipped=0)
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts=hosts)


def _bad() -> dict[str, Any]:
    doc = copy.deepcopy(probe_quick())
    doc["torch"]["gpus"][1]["fp8_gemm_tflops"] = {"16384": 500.0}
    return doc


def _ctx(tmp: Path, run_id: str, force: bool = False) -> RunContext:
    return RunContext(customer="acme", run_id=run_id, root=tmp / "artifacts", force=force)


def test_quarantine_policy_certifies_the_healthy_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunner({"gpu-a": probe_quick(), "gpu-b": _bad()})
    monkeypatch.setattr(ansible, "run_playbook", fake)
    res = stage.run(_inv(tmp_path), _ctx(tmp_path, "20261130T030000Z-0001"))
    assert res.exit_code == ExitCode.OK and res.status == "success"
    assert res.certified == ["gpu-a"] and res.quarantined == ["gpu-b"]
    assert res.hosts["gpu-b"].status == "quarantined" and "GPU 1" in res.hosts["gpu-b"].blocking[0]
    assert any(m.startswith("warning:") for m in res.messages)
    ev = fake.calls[0]["extravars"]
    assert ev["gridready_certify_profile"] == "quick"
    assert ev["gridready_certify_skip"] == ["dcgm", "sdc", "goodput"]  # the collectors of the n/a gates
    d = tmp_path / "artifacts" / "acme" / "20261130T030000Z-0001" / "certify"
    for name in ("summary.json", "report.json", "junit.xml", "report.md", "report.html", "metrics.prom",
                 "quarantine.yml", "busbw.png", "per_gpu.png", "nodes/gpu-a/certification.json"):
        assert (d / name).is_file(), name
    assert json.loads((d / "summary.json").read_text())["certified"] == ["gpu-a"]


def test_stop_policy_and_too_few_nodes_exit_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ansible, "run_playbook", FakeRunner({"gpu-a": probe_quick(), "gpu-b": _bad()}))
    assert stage.run(_inv(tmp_path, "stop"), _ctx(tmp_path, "20261130T030000Z-0002")).exit_code == 5
    assert stage.run(_inv(tmp_path, "quarantine", 2), _ctx(tmp_path, "20261130T030000Z-0003")).exit_code == 5


def test_missing_probe_output_is_not_certified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ansible, "run_playbook", FakeRunner({"gpu-a": probe_quick(), "gpu-b": None}))
    res = stage.run(_inv(tmp_path), _ctx(tmp_path, "20261130T030000Z-0004"))
    assert res.quarantined == ["gpu-b"] and res.hosts["gpu-b"].blocking[0].startswith("probe: no probe output")


def test_rerun_skips_valid_nodes_unless_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunner({"gpu-a": probe_quick(), "gpu-b": probe_quick()})
    monkeypatch.setattr(ansible, "run_playbook", fake)
    inv = _inv(tmp_path)
    assert stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0005")).certified == ["gpu-a", "gpu-b"]
    again = stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0006"))
    assert again.reused == ["gpu-a", "gpu-b"] and again.exit_code == 0 and len(fake.calls) == 1
    assert again.hosts["gpu-a"].reused is True
    third = stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0007"))  # reuse chains to the original file
    assert third.reused == ["gpu-a", "gpu-b"]
    forced = stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0008", force=True))
    assert forced.reused == [] and len(fake.calls) == 2


def test_a_limited_forced_run_counts_the_nodes_certified_outside_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live bug (sandbox, issue 31): `certify --limit node2 --force` on a certified 2-node fleet with
    min_certified_nodes 2 exited 5 ("only 0 node(s) certified"): the node outside the limit was not counted."""
    from gridready import ledger

    inv = _inv(tmp_path, minimum=2)
    monkeypatch.setattr(ansible, "run_playbook", FakeRunner({"gpu-a": probe_quick(), "gpu-b": probe_quick()}))
    first = stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0001"))
    assert first.exit_code == ExitCode.OK and first.certified == ["gpu-a", "gpu-b"]
    ctx = _ctx(tmp_path, "20261130T040000Z-0002", force=True)
    ctx.limit = "gpu-b"
    again = stage.run(inv, ctx)
    assert again.exit_code == ExitCode.OK, again.messages
    assert list(again.hosts) == ["gpu-b"] and again.certified == ["gpu-a", "gpu-b"]
    assert any("outside --limit" in m and "gpu-a" in m for m in again.messages)
    _, book = ledger.read(tmp_path / "artifacts", "acme")
    assert book.nodes["gpu-a"].run_id == "20261130T030000Z-0001"
    assert book.nodes["gpu-b"].run_id == "20261130T040000Z-0002"


def test_a_diagnostic_run_of_one_gate_probes_for_it_and_records_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33, verbs: `certify --gates gemm_fp8` runs the collectors that gate needs and judges it alone; a node
    failing it exits 5, and the ledger (what serve reads) stays as the last full run left it."""
    from gridready import ledger

    fake = FakeRunner({"gpu-a": probe_quick(), "gpu-b": probe_quick()})
    monkeypatch.setattr(ansible, "run_playbook", fake)
    full = stage.run(_inv(tmp_path), _ctx(tmp_path, "20261130T030000Z-0011"))
    assert full.certified == ["gpu-a", "gpu-b"]
    before = ledger.read(tmp_path / "artifacts", "acme")
    fake.docs["gpu-b"] = _bad()  # its fp8 GEMM falls short now
    ctx = _ctx(tmp_path, "20261130T030000Z-0012")
    ctx.gates = ("gemm_fp8",)
    diag = stage.run(_inv(tmp_path), ctx)
    skip = fake.calls[-1]["extravars"]["gridready_certify_skip"]
    assert "torch" not in skip and {"nccl_tests", "gpu_burn", "sdc", "goodput", "hca"} <= set(skip)
    assert diag.quarantined == ["gpu-b"] and diag.certified == ["gpu-a"]  # this run's verdicts (policy quarantine)
    assert "GPU 1" in " ".join(diag.hosts["gpu-b"].blocking) and "gemm_fp8" in diag.hosts["gpu-b"].blocking[0]
    cert = json.loads(Path(diag.hosts["gpu-a"].certification).read_text())
    judged = {g["gate"] for g in cert["gates"] if g["reason"] != stage.NOT_SELECTED}
    assert judged == {"gemm_fp8"}
    assert ledger.read(tmp_path / "artifacts", "acme") == before  # nothing recorded: serve sees the full run
    assert any("diagnostic run" in m for m in diag.messages)
    assert not (tmp_path / "artifacts/acme/20261130T030000Z-0012/certify/evidence").exists()  # nothing signed


@pytest.mark.parametrize(("gates", "skip", "needle"), [
    (("gemm_fp9",), (), "--gates: (command line): unknown gate gemm_fp9"),
    (("dcgm",), ("xid",), "choose the gates one way, not both"),
    ((), ("nosuch",), "--skip-gates: (command line): unknown gate nosuch"),
])
def test_a_bad_gate_selection_is_a_usage_error(gates, skip, needle) -> None:
    ctx = RunContext(customer="acme", run_id="r", root=Path("/nonexistent"), gates=gates, skip_gates=skip)
    with pytest.raises(stage.InvalidInput) as err:
        stage.selected_gates(ctx)
    assert needle in str(err.value)
