"""Re-deploying a swept fixed-cost tier is a step of its own: verify records the tiers it swept, and the redeploy
step puts each back on its configured queue delay whatever verify's outcome, failing the run (exit 3) when it
cannot."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gridready.artifacts import RunContext
from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from gridready.stages.serve import context, embedding, redeploy
from gridready.stages.serve import verify as serve_verify
from tests.summaries import certified_ledger
from tests.unit.test_inventory_errors import EMBED

SWEPT = {**EMBED, "embedding": {**EMBED["embedding"], "sweep": {"max_queue_delay_microseconds": [0, 500]}}}


def _deployed(make_inv: Any, tmp_path: Any) -> context.Deployed:
    inv = make_inv(1, [SWEPT])
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01"]))
    ctx = context.ServeContext(inv, RunContext(customer=inv.customer, run_id="20261201T050000Z-rdpl", root=tmp_path))
    return context.Deployed(ctx, cert, topology.plan_tiers(inv, cert))


def _quiet_verify(monkeypatch: pytest.MonkeyPatch, passed: bool) -> None:
    report = SimpleNamespace(readiness=SimpleNamespace(ready=True), tier="embed",
                             gate=SimpleNamespace(passed=passed, message="ok" if passed else "embed: e2e p99 over"),
                             simulated=True)
    monkeypatch.setattr(serve_verify.bench, "verify_tier", lambda *a, **k: report)
    monkeypatch.setattr(serve_verify.bench, "write_tier_reports", lambda *a, **k: {})
    monkeypatch.setattr(serve_verify, "write_monitoring", lambda *a, **k: None)
    monkeypatch.setattr(serve_verify.serve_router, "measure_overhead", lambda *a, **k: None)
    monkeypatch.setattr(serve_verify, "unit_probes", lambda *a: (lambda: "", lambda: []))
    monkeypatch.setattr(serve_verify, "_queue_delay_sweep", lambda *a: [])


@pytest.mark.parametrize("passed", [True, False])
def test_the_swept_tier_is_put_back_whatever_verify_said(make_inv, monkeypatch, tmp_path, passed) -> None:
    _quiet_verify(monkeypatch, passed)
    calls: list[tuple[str, int | None, str]] = []
    monkeypatch.setattr(embedding, "redeploy_embedding",
                        lambda inv, ctx, cert, plans, plan, delay, stage: calls.append((plan.tier.name, delay, stage)))
    verified = serve_verify.run(_deployed(make_inv, tmp_path))
    assert [p.tier.name for p in verified.swept] == ["embed"]
    assert verified.ctx.code == (ExitCode.OK if passed else ExitCode.STAGE_FAILED)
    done = redeploy.run(verified)
    assert calls == [("embed", None, "serve")]
    assert done.ctx.code == (ExitCode.OK if passed else ExitCode.STAGE_FAILED)


def test_a_failed_redeploy_fails_the_run_and_says_why(make_inv, monkeypatch, tmp_path) -> None:
    _quiet_verify(monkeypatch, True)

    def fails(*_a: Any) -> None:
        raise StageFailed("tier embed: redeploying with max_queue_delay_microseconds configured failed")

    monkeypatch.setattr(embedding, "redeploy_embedding", fails)
    done = redeploy.run(serve_verify.run(_deployed(make_inv, tmp_path)))
    assert (done.ctx.status, done.ctx.code) == ("failed", ExitCode.STAGE_FAILED)
    assert done.ctx.messages[-1] == "tier embed: redeploying with max_queue_delay_microseconds configured failed"


def test_nothing_is_redeployed_without_a_sweep(make_inv, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(embedding, "redeploy_embedding", lambda *a: pytest.fail("redeployed without a sweep"))
    deployed = _deployed(make_inv, tmp_path)
    done = redeploy.run(context.Verified.after(deployed))
    assert done.ctx.code == ExitCode.OK and done.swept == []
