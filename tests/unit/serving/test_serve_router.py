"""serve on hosts with `serving.router` on: the router play's variables, its port opened, split from a decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import inventory, ledger
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.serving import topology
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import router as serve_router
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_stage import _fake_playbook

TIERS = [vllm_tier(name="batch", tensor_parallel=8, pipeline_parallel=1),
         vllm_tier(name="hot", port=8001, tensor_parallel=8, pipeline_parallel=1)]
ROUTER = {"enabled": True, "port": 4000, "keys": [{"name": "ci", "vault_var": "vault_router_key_ci", "rpm_limit": 60}]}


def with_router(inv: inventory.Inventory, **router: Any) -> inventory.Inventory:
    path = inv.path / "cluster.yml"
    doc = yaml.safe_load(path.read_text())
    doc["serving"]["router"] = ROUTER | router
    path.write_text(yaml.safe_dump(doc))
    return inventory.load(inv.path)


def test_router_play_variables_and_its_port(make_inv, write_certify, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(4, TIERS))
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261201T040000Z-rout", root=root))
    assert result.exit_code == 0, result.messages
    routed = captured["extravars"]["gridready_serve_router"]
    head = routed["host"]
    assert routed["url"] == f"http://{routed['bind']}:4000"
    assert 4000 in captured["extravars"]["gridready_serve"]["hosts"][head]["api_ports"]
    deps = routed["config"]["model_list"]
    assert {d["model_info"]["id"] for d in deps} == {"llama-3.3-70b@batch-0", "llama-3.3-70b@hot-0"}
    assert routed["keys"] == [{"name": "ci", "vault_var": "vault_router_key_ci", "rpm_limit": 60, "tpm_limit": None}]
    assert "sk-" not in json.dumps(routed)  # key names and vault variables only, never a key


def test_split_from_decision_needs_a_record(make_inv, write_certify, tmp_path: Path):
    inv = with_router(make_inv(4, TIERS), routes=[{"model": "llama-3.3-70b", "split_from_decision": True,
                                                   "targets": [{"tier": "batch"}, {"tier": "hot"}]}])
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    cert = topology.read_certification(inv, ledger.read(root, "acme"))
    plans = topology.plan_tiers(inv, cert)
    with pytest.raises(InvalidInput, match=r"serving.router.routes\[0\].split_from_decision: no serve run"):
        serve_router.extravars(inv, root, cert, plans)


@pytest.mark.parametrize(("stage_timeout", "waited"), [(None, 900.0), (serve_router.LIVE_TIMEOUT_AFTER_SERVE_S, 60.0)])
def test_bench_waits_a_minute_for_a_router_serve_started_not_serves_start_up_timeout(
        make_inv, monkeypatch, stage_timeout, waited):
    """serve waits serving.wait_timeout_s (900 s) for the LiteLLM it just started; invoke bench, which finds it
    already up, waits a minute and then says the router is not live (a serve that failed before the router play
    left none), instead of hanging for 15 minutes."""
    inv = with_router(make_inv(4, TIERS))
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"]))
    asked: list[float] = []
    monkeypatch.setattr(serve_router, "wait_live", lambda url, timeout_s, **_: asked.append(timeout_s) or False)
    data: dict[str, Any] = {}
    error = serve_router.measure_overhead(inv, cert, topology.plan_tiers(inv, cert), data, [],
                                          live_timeout_s=stage_timeout)
    assert asked == [waited]
    assert error is not None and f"did not answer 200 within {waited:g} s" in error
    assert data["router"]["live_after_s"] is None


def test_haproxy_play_variables(make_inv, write_certify, monkeypatch):
    """proxy haproxy: the play gets HAProxy's files (no LiteLLM config), the models and the liveness path the
    stages wait on; the tiers' API key only as an environment name."""
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(4, TIERS), proxy="haproxy")
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261201T040000Z-hapx", root=root))
    assert result.exit_code == 0, result.messages
    routed = captured["extravars"]["gridready_serve_router"]
    assert routed["proxy"] == "haproxy" and routed["config"] == {}
    assert routed["models"] == ["llama-3.3-70b"] and routed["live_path"] == "/health/liveliness"
    files = routed["haproxy"]
    assert files["models_map"] == "llama-3.3-70b route_0\n"
    assert f"bind {routed['bind']}:4000" in files["config"]
    assert "{ sc_http_req_rate(0) gt 60 }" in files["config"]
    assert "%[env(GRIDREADY_TIER_BATCH_API_KEY)]" in files["config"]
    assert 4000 in captured["extravars"]["gridready_serve"]["hosts"][routed["host"]]["api_ports"]
    assert "sk-" not in json.dumps(routed)
