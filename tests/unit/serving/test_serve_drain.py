"""Drain from live serving on target hosts: the watcher drains a node of a serving tier with two replicas; the
router's upstreams lose that replica (the router stays on its host, the other replica keeps answering), and get it
back when the node returns. The deployment is the one `serve` recorded in the ledger; a ledger deployment that
the inventory no longer plans the same way leaves the router alone and says why."""

from __future__ import annotations

import json
from typing import Any

from gridready import ansible, ledger
from gridready.artifacts import RunContext
from gridready.stages import serve, watch
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import drain as serve_drain
from tests.summaries import certification, watch_fault
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import with_router
from tests.unit.serving.test_serve_stage import _fake_playbook

TIER = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1, replicas=2)


def _api_bases(extravars: dict[str, Any]) -> set[str]:
    return {d["litellm_params"]["api_base"] for d in extravars["gridready_serve_router"]["config"]["model_list"]}


def _served(make_inv, monkeypatch, tmp_path):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(3, [TIER]))
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[3]
    deployed: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(deployed))
    result = serve.run(inv, RunContext(customer="acme", run_id="20261202T050000Z-serv", root=root))
    assert result.exit_code == 0, result.messages
    return inv, root, deployed["extravars"]


def test_a_drained_replica_leaves_the_router_and_comes_back(make_inv, monkeypatch, tmp_path):
    inv, root, served = _served(make_inv, monkeypatch, tmp_path)
    assert _api_bases(served) == {"http://10.77.0.11:8000/v1", "http://10.77.0.12:8000/v1"}
    host = served["gridready_serve_router"]["host"]
    plays: list[dict[str, Any]] = []

    def router_play(inv_, playbook, stage_dir, **kw):
        plays.append({"playbook": playbook, **kw})
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts={}, events=[])

    monkeypatch.setattr(serve_drain.ansible, "run_playbook", router_play)
    signals = tmp_path / "signals.json"
    signals.write_text(json.dumps([{"node": "gpu02", "kind": "xid", "code": "79"}]))

    def recertify(inv_, sub):  # the fault's gates fail: quarantined, still drained
        return certification(inv_, [], ["gpu02"], run_id=sub.run_id, root=sub.root, record=False)[1]

    ctx = RunContext(customer="acme", run_id="20261202T051000Z-wat1", root=root)
    first = watch.run(inv, ctx, str(signals), watch.load_policy(None, None), recertify)
    assert first["drained"] == ["gpu02"] and first["router"]["applied"], first["router"]
    (play,) = plays
    assert play["playbook"] == "serve.yml" and play["tags"] == "router"
    assert _api_bases(play["extravars"]) == {"http://10.77.0.11:8000/v1"}
    assert play["extravars"]["gridready_serve_router"]["host"] == host  # the router stays where serve put it
    assert play["extravars"]["gridready_serve"] == served["gridready_serve"]  # the deployment itself unchanged

    signals.write_text("[]")

    def passes(inv_, sub):
        return certification(inv_, ["gpu02"], run_id=sub.run_id, root=sub.root)[1]

    second = watch.run(inv, RunContext(customer="acme", run_id="20261202T052000Z-wat2", root=root), str(signals),
                       watch.load_policy(None, None), passes)
    assert second["drained"] == [] and second["router"]["applied"]
    assert _api_bases(plays[-1]["extravars"]) == _api_bases(served)
    third = watch.run(inv, RunContext(customer="acme", run_id="20261202T053000Z-wat3", root=root), str(signals),
                      watch.load_policy(None, None), passes)
    assert third["router"] is None and len(plays) == 2  # nothing changed: the router is left alone


def test_a_deployment_the_inventory_plans_differently_is_left_alone(make_inv, monkeypatch, tmp_path):
    _, root, _ = _served(make_inv, monkeypatch, tmp_path)
    monkeypatch.setattr(serve_drain.ansible, "run_playbook", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the router play ran")))
    ledger.update(root, "acme", lambda b: ledger.drain(b, "gpu02", "xid 79"))
    one = with_router(make_inv(3, [{**TIER, "replicas": 1}]))  # the inventory changed since serve
    done = serve_drain.sync_serving(one, RunContext(customer="acme", run_id="20261202T054000Z-wat4", root=root))
    assert not done["applied"] and "`invoke serve` re-plans it" in done["reason"]


def test_without_leaves_out_every_replica_on_a_drained_node(make_inv, monkeypatch, tmp_path):
    inv, root, _ = _served(make_inv, monkeypatch, tmp_path)
    _, plans = serve_drain.deployed(inv, ledger.read(root, "acme")[1])
    assert [r.nodes for r in plans[0].replicas] == [("gpu01",), ("gpu02",)]
    assert [r.nodes for r in serve_drain.without(plans, {"gpu01"})[0].replicas] == [("gpu02",)]
    assert serve_drain.without(plans, {"gpu01", "gpu02"})[0].replicas == ()


def test_bench_says_in_words_which_deployment_differs(make_inv, monkeypatch, tmp_path):
    """bench measures only the deployment the inventory plans today; the refusal names tiers and heads in words."""
    import pytest

    from gridready.errors import InvalidInput
    from gridready.serving import topology
    from gridready.stages import bench
    from gridready.stages.serve import plan as serve_plan

    _, root, _ = _served(make_inv, monkeypatch, tmp_path)
    one = with_router(make_inv(3, [{**TIER, "replicas": 1}]))
    ctx = RunContext(customer="acme", run_id="20261202T055000Z-bnch", root=root)
    plans = topology.plan_tiers(one, serve_plan.current_certification(one, ctx))
    with pytest.raises(InvalidInput) as err:
        bench.deployed(one, ctx, plans)
    assert "served chat on gpu01, gpu02, but the current certification plans chat on gpu01" in str(err.value)
    assert "{" not in str(err.value) and "[" not in str(err.value)


def test_haproxy_keeps_listening_on_its_head_when_that_heads_replica_is_drained(make_inv, monkeypatch, tmp_path):
    """proxy haproxy: draining the serving head's own replica re-renders HAProxy's upstreams from the replica left,
    while its listener stays on the head serve put it on (the firewall opened the router's port there)."""
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router(make_inv(3, [TIER]), proxy="haproxy")
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03"])
    root = path.parents[3]
    deployed: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(deployed))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261202T050000Z-hapx", root=root)).exit_code == 0
    served = deployed["extravars"]["gridready_serve_router"]
    assert served["bind"] == "10.77.0.11" and "    bind 10.77.0.11:4000" in served["haproxy"]["config"]
    plays: list[dict[str, Any]] = []

    def router_play(inv_, playbook, stage_dir, **kw):
        plays.append(kw)
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts={}, events=[])

    monkeypatch.setattr(serve_drain.ansible, "run_playbook", router_play)
    done = watch_fault(inv, root, tmp_path, "gpu01", "20261202T051000Z-hap1")
    assert done["drained"] == ["gpu01"] and done["router"]["applied"], done["router"]
    config = plays[0]["extravars"]["gridready_serve_router"]["haproxy"]["config"]
    assert "    bind 10.77.0.11:4000" in config and "bind 10.77.0.12" not in config
    assert [ln.split()[2] for ln in config.splitlines() if ln.strip().startswith("server ")] == ["10.77.0.12:8000"]
