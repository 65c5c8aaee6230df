"""Issue 31 on a real sandbox fleet (2 healthy hosts): the ledger across a `certify --limit` run, `invoke status`,
signed evidence that `invoke evidence.verify` accepts for its machine and refuses for another, and one watcher pass
that drains a node on an Xid, re-certifies it and returns it."""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.e2e.test_pipeline import _invoke

# extended: a fleet of its own for certify, serve, limited re-certification and a watch pass (about 17 min on the
# shared CI machine, 2026-12-02): the ledger, evidence and watcher logic are unit-tested in the default suite
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]


def test_ledger_status_evidence_and_watch_on_a_fleet(make_module_fleet, tmp_path_factory, monkeypatch):
    fleet = make_module_fleet(2, healthy=True)
    artifacts = tmp_path_factory.mktemp("artifacts")
    keys = tmp_path_factory.mktemp("keys")
    private = Ed25519PrivateKey.generate()
    (keys / "evidence.key").write_bytes(private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    monkeypatch.setenv("GRIDREADY_EVIDENCE_KEY", str(keys / "evidence.key"))
    assert os.environ["GRIDREADY_EVIDENCE_KEY"]

    def status() -> dict[str, dict]:
        out = _invoke(fleet.inventory, artifacts, "status", "--json")
        assert out.returncode == 0, out.stderr[-3000:]
        return {r["node"]: r for r in json.loads(out.stdout)["nodes"]}

    first = _invoke(fleet.inventory, artifacts, "provision", "certify")
    assert first.returncode == 0, first.stderr[-4000:]
    before = status()
    assert {n: r["verdict"] for n, r in before.items()} == {"node1": "certified", "node2": "certified"}

    again = _invoke(fleet.inventory, artifacts, "certify", "--limit", "node2", "--force")
    assert again.returncode == 0, again.stderr[-4000:]
    after = status()
    assert after["node1"]["run_id"] == before["node1"]["run_id"], "a --limit run left node1's entry untouched"
    assert after["node2"]["run_id"] != before["node2"]["run_id"]
    plan = _invoke(fleet.inventory, artifacts, "plan", "--json")
    assert plan.returncode == 0, plan.stderr[-4000:]
    assert set(json.loads(plan.stdout)["serve"]["rendered"]["hosts"]) == {"node1", "node2"}

    ok = _invoke(fleet.inventory, artifacts, "evidence.verify", "--node", "node1")
    assert ok.returncode == 0, ok.stderr[-3000:]
    other = _invoke(fleet.inventory, artifacts, "evidence.verify", "--node", "node1", "--bundle",
                    after["node2"]["evidence"])
    assert other.returncode == 5 and "machine:node2" in other.stderr, other.stderr[-3000:]

    signals = tmp_path_factory.mktemp("signals") / "signals.json"
    signals.write_text(json.dumps([{"node": "node2", "kind": "xid", "code": "79", "detail": "fallen off the bus"}]))
    watched = _invoke(fleet.inventory, artifacts, "watch", "--once", "--signals", str(signals),
                      "--max-drain-share", "0.5", "--json")
    assert watched.returncode == 0, watched.stderr[-4000:]
    kinds = [(a["kind"], a["node"]) for a in json.loads(watched.stdout)["actions"]]
    assert kinds == [("drain", "node2"), ("recertify", "node2"), ("return", "node2")]
    final = status()
    assert final["node2"]["verdict"] == "certified" and not final["node2"]["drained"]
