"""serve and the watcher with `serving.router.tier_routers` on: a tier router per tier on the serving head, LiteLLM
reaching each tier through it, their ports opened, and a drain sent to the running tier router (no play, no
restart). The spec refuses tier router ports that fall on the router's or a tier's port."""

from __future__ import annotations

from typing import Any

import pytest

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.serving import router_drain
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import drain as serve_drain
from tests.summaries import certification, watch_fault
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import TIERS, with_router
from tests.unit.serving.test_serve_stage import _fake_playbook

TIER_ROUTERS = {"enabled": True, "port": 4100}


def test_litellm_reaches_each_tier_through_its_tier_router(make_inv, write_certify, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(4, TIERS), tier_routers=TIER_ROUTERS)
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    result = serve.run(inv, RunContext(customer="acme", run_id="20261206T040000Z-tier", root=root))
    assert result.exit_code == 0, result.messages
    routed = captured["extravars"]["gridready_serve_router"]
    bind = routed["bind"]
    trs = {t["tier"]: t for t in routed["tier_routers"]}
    assert [trs["batch"]["port"], trs["hot"]["port"]] == [4100, 4101]
    assert trs["batch"]["url"] == f"http://{bind}:4100"
    assert len(trs["batch"]["workers"]) == 1 and trs["hot"]["workers"][0].endswith(":8001")
    assert trs["hot"]["argv"][trs["hot"]["argv"].index("--policy") + 1] == "cache_aware"
    bases = {d["model_info"]["id"]: d["litellm_params"]["api_base"] for d in routed["config"]["model_list"]}
    assert bases == {"llama-3.3-70b@batch-0": f"http://{bind}:4100/v1", "llama-3.3-70b@hot-0": f"http://{bind}:4101/v1"}
    served = captured["extravars"]["gridready_serve"]
    host = served["hosts"][routed["host"]]
    # the router's port for its clients; the tier routers' (their admin API takes no key) for the router only
    assert 4000 in host["api_ports"] and not {4100, 4101} & set(host["api_ports"])
    assert {4100, 4101} <= set(host["routed_ports"]) and served["router_clients"] == [f"{bind}/32"]


def test_off_by_default_litellm_goes_to_the_replicas(make_inv, write_certify, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(4, TIERS))
    root = write_certify(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T041000Z-tier", root=root)).exit_code == 0
    routed = captured["extravars"]["gridready_serve_router"]
    assert routed["tier_routers"] == []
    assert all(d["litellm_params"]["api_base"].endswith((":8000/v1", ":8001/v1"))
               for d in routed["config"]["model_list"])


def test_a_drain_reaches_the_running_tier_router_with_no_play(make_inv, monkeypatch, tmp_path):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    tier = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1, replicas=2)
    inv = with_router(make_inv(3, [tier]), tier_routers=TIER_ROUTERS)
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[3]
    deployed: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(deployed))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T050000Z-serv", root=root)).exit_code == 0
    (tr,) = deployed["extravars"]["gridready_serve_router"]["tier_routers"]
    assert tr["workers"] == ["http://10.77.0.11:8000", "http://10.77.0.12:8000"]
    monkeypatch.setattr(serve_drain.ansible, "run_playbook", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("a drain through tier routers runs no play")))
    sent: list[dict[str, list[str]]] = []

    def sync_all(wanted, timeout_s=5.0):
        sent.append({k: list(v) for k, v in wanted.items()})
        return [router_drain.SyncResult(url, removed=["http://10.77.0.12:8000"]) for url in wanted]

    monkeypatch.setattr(serve_drain.router_drain, "sync_all", sync_all)
    done = watch_fault(inv, root, tmp_path, "gpu02", "20261206T051000Z-wat1")
    assert done["drained"] == ["gpu02"] and done["router"]["applied"], done["router"]
    assert sent == [{tr["url"]: ["http://10.77.0.11:8000"]}]
    assert done["router"]["tier_routers"][0]["removed"] == ["http://10.77.0.12:8000"]


def test_an_unreachable_tier_router_fails_the_sync_and_says_which(make_inv, monkeypatch, tmp_path):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    tier = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1, replicas=2)
    inv = with_router(make_inv(3, [tier]), tier_routers=TIER_ROUTERS)
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[3]
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook({}))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T060000Z-serv", root=root)).exit_code == 0
    ledger.update(root, "acme", lambda b: ledger.drain(b, "gpu02", "xid 79"))
    monkeypatch.setattr(serve_drain.router_drain, "sync_all", lambda wanted, timeout_s=5.0: [
        router_drain.SyncResult(url, error="HttpError: connection refused") for url in wanted])
    done = serve_drain.sync_serving(inv, RunContext(customer="acme", run_id="20261206T061000Z-wat", root=root))
    assert not done["applied"] and done["exit_code"] == int(ExitCode.STAGE_FAILED)
    assert "connection refused" in done["reason"] and ":4100" in done["reason"]


@pytest.mark.parametrize(("port", "clash"), [(3999, "4000, router.port"), (7999, "8000, the port of tier batch")])
def test_tier_router_ports_on_a_taken_port_are_refused(make_inv, port, clash):
    with pytest.raises(InvalidInput) as err:
        with_router(make_inv(4, TIERS), tier_routers={"enabled": True, "port": port})
    line = str(err.value)
    assert "cluster.yml" in line and "router.tier_routers.port" in line and clash in line and "\n" not in line


def test_status_shows_what_each_tier_router_holds_against_the_drains(make_inv, monkeypatch, tmp_path):
    from rich.console import Console

    from gridready.stages import status

    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    tier = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1, replicas=2)
    inv = with_router(make_inv(3, [tier]), tier_routers=TIER_ROUTERS)
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[3]
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook({}))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T070000Z-serv", root=root)).exit_code == 0
    ledger.update(root, "acme", lambda b: ledger.drain(b, "gpu02", "xid 79"))
    both = ["http://10.77.0.11:8000", "http://10.77.0.12:8000"]
    monkeypatch.setattr(serve_drain.router_drain, "held_all", lambda urls, timeout_s=3.0: {u: (both, None)
                                                                                          for u in urls})
    doc = status.run(inv, RunContext(customer="acme", run_id="20261206T071000Z-stat", root=root))
    (state,) = doc["tier_routers"]
    assert state["router"].endswith(":4100") and state["holds"] == both
    assert state["wants"] == ["http://10.77.0.11:8000"] and state["in_sync"] is False
    console = Console(width=200, record=True)
    for part in status.table(doc):
        console.print(part)
    assert "tier routers (live)" in console.export_text()
    monkeypatch.setattr(serve_drain.router_drain, "held_all", lambda urls, timeout_s=3.0: {
        u: (["http://10.77.0.11:8000"], None) for u in urls})
    synced = status.run(inv, RunContext(customer="acme", run_id="20261206T072000Z-stat", root=root))
    assert synced["tier_routers"][0]["in_sync"] is True


def test_serve_measures_the_first_tiers_tier_router_beside_direct_access(make_inv, monkeypatch):
    from gridready.bench.router_overhead import PathLatency, RouterOverhead
    from gridready.serving import topology
    from gridready.stages.serve import router as serve_router
    from tests.summaries import certified_ledger

    inv = with_router(make_inv(4, TIERS), tier_routers=TIER_ROUTERS)
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02", "gpu03", "gpu04"]))
    monkeypatch.setattr(serve_router, "wait_live", lambda url, timeout_s, **_: True)
    monkeypatch.setenv(serve_router.KEY_ENV, "sk-client")
    measured: list[tuple[str, str, str | None]] = []

    async def measure(direct, routed, model, key, direct_key=None, n=100):
        measured.append((routed, key, direct_key))
        path = PathLatency(p50_ms=10.0, p99_ms=20.0, errors=0)
        return RouterOverhead(requests=n, model=model, direct=path, routed=path, added_p50_ms=1.5, added_p99_ms=3.0)

    monkeypatch.setattr(serve_router, "measure", measure)
    data: dict[str, Any] = {}
    messages: list[str] = []
    assert serve_router.measure_overhead(inv, cert, topology.plan_tiers(inv, cert), data, messages,
                                         api_key="sk-tier") is None
    (front, key, _), (tier, tier_key, direct_key) = measured
    assert front.endswith(":4000") and key == "sk-client"
    # the tier router is reached with the tier's own key, which its replicas check
    assert tier.endswith(":4100") and tier_key == direct_key == "sk-tier"
    assert data["router"]["tier_router"]["overhead"]["added_p50_ms"] == 1.5
    assert any(m.startswith("tier router of batch adds p50 1.5 ms") for m in messages)
