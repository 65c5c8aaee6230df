"""`invoke serve --down` (issue 33, verbs) without a fleet: what reaches the ledger, check mode, --limit, and the
Kubernetes target (pulumi destroy of the serving stack only). The fleet side: tests/roles/test_serve_vllm.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridready import ansible, ledger
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.contracts import ServeSummary
from gridready.exitcodes import ExitCode
from gridready.stages.serve import down as serve_down
from tests.unit.serving.conftest import vllm_tier


def _serving(root: Path, customer: str, roles: dict[str, str]) -> None:
    summary = ServeSummary(customer=customer, run_id="20261201T000000Z-up", status="success", exit_code=0,
                           check=False, started_at="2026-12-01T00:00:00+00:00", seconds=1.0)
    ledger.update(root, customer, lambda b: ledger.record_serve(b, summary, root / "s.json", roles, deployed=True))


class FakeDown:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, inv, playbook, stage_dir, **kw) -> ansible.PlaybookResult:
        self.calls.append({"playbook": playbook, **kw})
        hosts = [h for h in inv.gpu_hosts() if not kw.get("limit") or h in kw["limit"].split(",")]
        events = [{"event": "runner_item_on_ok", "event_data": {"host": h, "task": "Stop and disable them",
                                                                "res": {"item": u}}}
                  for h in hosts for u in ("vllm-t.service", "ray-head.service")]
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, events=events,
                                      hosts={h: ansible.HostStats(ok=2, changed=1) for h in hosts})


@pytest.fixture
def hosts_inv(make_inv):
    return make_inv(2, [vllm_tier()])


def test_down_on_hosts_records_an_empty_deployment(hosts_inv, tmp_path, monkeypatch) -> None:
    fake = FakeDown()
    monkeypatch.setattr(ansible, "run_playbook", fake)
    _serving(tmp_path, "acme", {"gpu01": "t head", "gpu02": "t worker"})
    res = serve_down.run(hosts_inv, RunContext(customer="acme", run_id="20261202T000000Z-dn", root=tmp_path))
    assert res.exit_code == 0 and fake.calls[0]["playbook"] == "serve-down.yml"
    assert fake.calls[0]["extravars"]["gridready_serve_down_hosts"] == "gpu01,gpu02"
    assert res.data["stopped"]["gpu01"] == ["vllm-t.service", "ray-head.service"]
    _, book = ledger.read(tmp_path, "acme")
    assert book.serving.roles == {}
    down = [(c.node, c.before, c.after) for c in book.history if c.source == "serve 20261202T000000Z-dn"]
    assert sorted(down) == [("gpu01", "t head", "idle"), ("gpu02", "t worker", "idle")]  # what `status` shows


def test_check_mode_and_a_limit(hosts_inv, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ansible, "run_playbook", FakeDown())
    _serving(tmp_path, "acme", {"gpu01": "t head", "gpu02": "t worker"})
    serve_down.run(hosts_inv, RunContext(customer="acme", run_id="20261202T000000Z-c", root=tmp_path, check=True))
    assert ledger.read(tmp_path, "acme")[1].serving.roles == {"gpu01": "t head", "gpu02": "t worker"}
    serve_down.run(hosts_inv, RunContext(customer="acme", run_id="20261202T000000Z-l", root=tmp_path, limit="gpu02"))
    assert ledger.read(tmp_path, "acme")[1].serving.roles == {"gpu01": "t head"}  # only the limited node went down


def test_kubernetes_destroys_the_serving_stack_only(make_inv, tmp_path, monkeypatch) -> None:
    inv = make_inv(2, [vllm_tier()], target="kubernetes")
    monkeypatch.setattr(gpulumi, "cli_available", lambda: False)
    res = serve_down.run(inv, RunContext(customer="acme", run_id="20261202T000000Z-k1", root=tmp_path))
    assert res.exit_code == ExitCode.STAGE_FAILED and "nothing destroyed" in res.messages[0]
    destroyed = []
    monkeypatch.setattr(gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(gpulumi, "destroy", lambda stack, customer, state, **kw: destroyed.append((stack, customer)))
    res = serve_down.run(inv, RunContext(customer="acme", run_id="20261202T000000Z-k2", root=tmp_path))
    assert res.exit_code == 0 and destroyed == [("serving", "acme")]
