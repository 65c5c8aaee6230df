"""The fleet lifecycle on a real sandbox fleet (2 healthy hosts serving ONE vLLM tier, one replica per node, behind
the LiteLLM router): the ledger across a `certify --limit` run, `invoke status`, signed evidence that `invoke
evidence.verify` accepts for its machine and refuses for another; then the acceptance of passive health: a fault
injected on node2 at runtime (Xid 48 and a volatile DRAM UE: sandbox.testfleet.Fleet.set_faults) raises its signal
(read by `invoke watch --once` from the node itself, no --signals file), the watcher drains node2, the router keeps
answering from node1, the targeted re-certification quarantines node2; clearing the fault and a second pass
re-certify it in full and return it, and the router has both replicas again. Each step is read from `invoke status
--json`; with GRIDREADY_LIFECYCLE_RECORD=<file> the steps' status lines are also written there
(docs/examples/sandbox/fleet-lifecycle-*.txt)."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gridready import vault
from tests.e2e.test_pipeline import _invoke

# extended: a fleet of its own for certify, limited re-certification, serve and two watch passes (about 25 min on
# the shared CI machine): the ledger, evidence, watcher and router-drain logic are unit-tested in the default suite
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]

# roles/gridready_router (gridready_router_dir): HAProxy's configuration (proxy haproxy) or LiteLLM's (litellm)
ROUTER_CONFIG = "/etc/gridready/router/haproxy.cfg /etc/gridready/router/config.yaml"
READ_ROUTER_CONFIG = "cat /etc/gridready/router/haproxy.cfg 2>/dev/null || cat /etc/gridready/router/config.yaml"


def upstream_count(cfg: str, address: str) -> int:
    """How many upstreams of a router configuration are at `address`: HAProxy's `server <name> <ip>:<port>` lines
    or LiteLLM's deployments' `api_base: http://<ip>:<port>/v1`."""
    servers = sum(1 for line in cfg.splitlines() if line.split()[:1] == ["server"] and
                  len(line.split()) > 2 and line.split()[2].startswith(f"{address}:"))
    return servers + cfg.count(f"//{address}:")


def _one_tier_two_replicas(inventory: Path) -> None:
    """The generated inventory's cluster.yml (a copy of inventories/sandbox's, router on): only the vLLM tier, with
    two replicas of tensor_parallel 8, one per node."""
    path = inventory / "cluster.yml"
    spec = yaml.safe_load(path.read_text())
    vllm = next(t for t in spec["serving"]["tiers"] if t["engine"] == "vllm")
    vllm.update(replicas=2, tensor_parallel=8)
    spec["serving"]["tiers"] = [vllm]
    assert spec["serving"]["router"]["enabled"], "inventories/sandbox/cluster.yml: serving.router.enabled"
    spec["serving"]["router"].pop("routes", None)  # one route per tier (the trtllm tier is gone)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def _chat(url: str, key: str, model: str) -> int:
    req = urllib.request.Request(
        url + "/v1/chat/completions", method="POST",
        data=json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            body = json.loads(resp.read())
            return resp.status if body["choices"][0]["message"]["content"] else 0
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return 0


def _answers(url: str, key: str, model: str, n: int = 6, ready_s: float = 180) -> list[int]:
    """Wait until the router answers once (the router play restarts it), then `n` requests in a row."""
    deadline = time.monotonic() + ready_s
    while _chat(url, key, model) != 200 and time.monotonic() < deadline:
        time.sleep(3)
    return [_chat(url, key, model) for _ in range(n)]


def test_ledger_evidence_and_the_lifecycle_of_a_serving_fleet(make_module_fleet, tmp_path_factory, monkeypatch):
    t0 = time.monotonic()
    fleet = make_module_fleet(2, healthy=True)
    _one_tier_two_replicas(fleet.inventory)
    artifacts = tmp_path_factory.mktemp("artifacts")
    keys = tmp_path_factory.mktemp("keys")
    private = Ed25519PrivateKey.generate()
    (keys / "evidence.key").write_bytes(private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    monkeypatch.setenv("GRIDREADY_EVIDENCE_KEY", str(keys / "evidence.key"))
    assert os.environ["GRIDREADY_EVIDENCE_KEY"]
    record = Path(os.environ.get("GRIDREADY_LIFECYCLE_RECORD") or artifacts / "lifecycle.txt")

    def note(text: str) -> None:
        with record.open("a") as f:
            f.write(f"[{time.monotonic() - t0:7.1f} s] {text}\n")

    def status(step: str) -> dict[str, dict]:
        out = _invoke(fleet.inventory, artifacts, "status", "--json")
        assert out.returncode == 0, out.stderr[-3000:]
        rows = {r["node"]: r for r in json.loads(out.stdout)["nodes"]}
        note(f"{step}: invoke status --json")
        for r in rows.values():
            note(f"    {r['node']}: verdict={r['verdict']} drained={r['drained']} serving={r['serving']} "
                 f"failing_gates={r['failing_gates']} drain_reason={r['drain_reason']!r}")
        return rows

    def router_upstreams() -> dict[str, int]:
        """How many upstreams of the router's configuration are at each node's address."""
        for n in fleet.names:
            cfg = fleet.ssh(n, READ_ROUTER_CONFIG, check=False)
            if cfg.returncode == 0:
                return {h: upstream_count(cfg.stdout, a) for h, a in fleet.addresses.items()}
        raise AssertionError(f"no host has {ROUTER_CONFIG}")

    # -- certify, the ledger across a --limit run, evidence
    first = _invoke(fleet.inventory, artifacts, "provision", "certify")
    assert first.returncode == 0, first.stderr[-4000:]
    before = status("provision certify")
    assert {n: r["verdict"] for n, r in before.items()} == {"node1": "certified", "node2": "certified"}

    again = _invoke(fleet.inventory, artifacts, "certify", "--limit", "node2", "--force")
    assert again.returncode == 0, again.stderr[-4000:]
    after = status("certify --limit node2 --force")
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

    # -- serve: one vLLM tier, a replica per node, behind the router
    served = _invoke(fleet.inventory, artifacts, "serve")
    assert served.returncode == 0, served.stderr[-4000:]
    serving = status("serve")
    assert {n: bool(r["serving"]) for n, r in serving.items()} == {"node1": True, "node2": True}
    summary = json.loads(max(artifacts.glob("*/*/serve/summary.json"), key=lambda p: p.stat().st_mtime).read_text())
    routed = summary["data"]["router"]
    (model,) = routed["routes"]
    key = vault.read(fleet.name, fleet.inventory)["vault_gridready_router_key_sandbox"]
    upstreams = router_upstreams()
    note(f"serve: router {routed['url']} route {model}; upstreams per node {upstreams}")
    by_address = any(upstreams.values())  # the upstreams name the nodes by their 10.77.0.x address
    assert not by_address or (upstreams["node1"] >= 1 and upstreams["node2"] >= 1), upstreams
    codes = _answers(routed["url"], key, model)
    note(f"serve: chat through the router: {codes}")
    assert codes == [200] * len(codes)

    # -- a fault on node2 at runtime: Xid 48 in its kernel log, a volatile DRAM UE (nvidia-smi, DCGM health)
    fleet.set_faults("node2", [{"kind": "ecc_uncorrectable", "gpu": 2}])
    note("fault injected: node2 ecc_uncorrectable on GPU 2 (Fleet.set_faults)")
    watched = _invoke(fleet.inventory, artifacts, "watch", "--once", "--max-drain-share", "0.5", "--json")
    assert watched.returncode == 0, watched.stderr[-4000:]
    report = json.loads(watched.stdout)
    signals = [(s["node"], s["kind"], s["code"]) for s in report["signals"]]
    kinds = [(a["kind"], a["node"]) for a in report["actions"]]
    note(f"watch --once (no --signals): signals {signals}")
    note(f"    actions {kinds}; recertify_runs {report['recertify_runs']}")
    note(f"    router {report['router']}")
    assert ("node2", "xid", "48") in signals, signals  # the kernel log (dmesg where journald has none)
    assert ("node2", "dcgm_health", "memory") in signals, signals  # dcgmi health -c
    assert not [s for s in signals if s[0] == "node1"], signals
    assert kinds == [("drain", "node2"), ("recertify", "node2"), ("quarantine", "node2")], kinds
    assert report["router"]["applied"] and report["router"]["drained_replicas"] == ["node2"], report["router"]
    out = status("watch pass 1 (fault)")
    assert out["node2"]["verdict"] == "quarantined" and out["node2"]["drained"], out["node2"]
    assert {"ecc", "xid"} & set(out["node2"]["failing_gates"]), out["node2"]
    assert out["node1"]["verdict"] == "certified" and not out["node1"]["drained"]
    upstreams = router_upstreams()
    note(f"watch pass 1: upstreams per node {upstreams}")
    assert not by_address or (upstreams["node2"] == 0 and upstreams["node1"] >= 1), upstreams
    codes = _answers(routed["url"], key, model)
    note(f"watch pass 1: chat through the router while node2 is out: {codes}")
    assert codes == [200] * len(codes)

    # -- the fault cleared: a full re-certification returns node2, the router takes its replica back
    fleet.set_faults("node2", [])
    note("fault cleared: node2 (Fleet.set_faults [])")
    back = _invoke(fleet.inventory, artifacts, "watch", "--once", "--max-drain-share", "0.5", "--json")
    assert back.returncode == 0, back.stderr[-4000:]
    report = json.loads(back.stdout)
    kinds = [(a["kind"], a["node"]) for a in report["actions"]]
    note(f"watch --once: signals {[(s['node'], s['kind'], s['code']) for s in report['signals']]}")
    note(f"    actions {kinds}; recertify_runs {report['recertify_runs']}")
    note(f"    router {report['router']}")
    assert kinds == [("recertify", "node2"), ("return", "node2")], kinds
    assert report["recertify_runs"][0]["gates"] == "all"
    assert report["router"]["applied"] and report["router"]["drained_replicas"] == [], report["router"]
    final = status("watch pass 2 (fault cleared)")
    assert final["node2"]["verdict"] == "certified" and not final["node2"]["drained"], final["node2"]
    upstreams = router_upstreams()
    note(f"watch pass 2: upstreams per node {upstreams}")
    assert not by_address or (upstreams["node1"] >= 1 and upstreams["node2"] >= 1), upstreams
    codes = _answers(routed["url"], key, model)
    note(f"watch pass 2: chat through the router: {codes}")
    assert codes == [200] * len(codes)
    note("done")
