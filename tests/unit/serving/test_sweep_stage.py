"""The queue-delay sweep restarts a fixed-cost tier once per setting: serve runs it at deployment, bench (which
runs against live tiers) never does and says so."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gridready.artifacts import RunContext
from gridready.serving import topology
from gridready.stages.serve import verify as serve_verify
from tests.summaries import certified_ledger
from tests.unit.test_inventory_errors import EMBED


def _verify(make_inv: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, stage: str) -> tuple[list[str], list[str]]:
    tier = {**EMBED, "embedding": {**EMBED["embedding"], "sweep": {"max_queue_delay_microseconds": [0, 500]}}}
    inv = make_inv(1, [tier])
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01"]))
    plans = topology.plan_tiers(inv, cert)
    swept: list[str] = []
    report = SimpleNamespace(readiness=SimpleNamespace(ready=True), tier="embed",
                             gate=SimpleNamespace(passed=True, message="ok"), simulated=True)
    monkeypatch.setattr(serve_verify.bench, "verify_tier", lambda *a, **k: report)
    monkeypatch.setattr(serve_verify.bench, "write_tier_reports", lambda *a, **k: {})
    monkeypatch.setattr(serve_verify, "write_monitoring", lambda *a, **k: None)
    monkeypatch.setattr(serve_verify.serve_router, "measure_overhead", lambda *a, **k: None)
    monkeypatch.setattr(serve_verify, "unit_probes", lambda *a: (lambda: "", lambda: []))
    monkeypatch.setattr(serve_verify, "_queue_delay_sweep", lambda *a: swept.append(a[4].tier.name) or [])
    messages: list[str] = []
    ctx = RunContext(customer=inv.customer, run_id=f"20261201T040000Z-{stage}", root=tmp_path)
    serve_verify.verify_tiers(inv, ctx, cert, plans, {}, messages, stage=stage)
    return swept, messages


def test_serve_sweeps(make_inv, monkeypatch, tmp_path) -> None:
    swept, _ = _verify(make_inv, monkeypatch, tmp_path, "serve")
    assert swept == ["embed"]


def test_bench_does_not_restart_a_live_tier(make_inv, monkeypatch, tmp_path) -> None:
    swept, messages = _verify(make_inv, monkeypatch, tmp_path, "bench")
    assert swept == []
    assert "tier embed: queue-delay sweep not run by bench (it restarts the tier once per setting; serve runs it)" \
        in messages
