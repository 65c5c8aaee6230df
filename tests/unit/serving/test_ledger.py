"""The per-node ledger (gridready.ledger): merge rules, and serve, bench and reuse reading it (issue 31)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.contracts import CertifySummary, NodeCertification
from gridready.errors import InvalidInput, NotCertified
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from gridready.stages import bench, serve
from gridready.stages import certify as certify_stage
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve import render_hosts
from tests.summaries import certification, certified_ledger

A, B, C = "20261130T010000Z-aaaa", "20261130T020000Z-bbbb", "20261130T030000Z-cccc"


def test_a_limit_run_merges_and_serve_uses_every_certified_node(make_inv):
    """The live bug: `certify --limit gpu02 --force` wrote a summary of gpu02 alone and serve dropped gpu01."""
    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    path, book = certified_ledger(inv, ["gpu02"], run_id=B)
    assert book.nodes["gpu01"].run_id == A and book.nodes["gpu02"].run_id == B
    cert = topology.read_certification(inv, (path, book))
    assert sorted(cert.certified) == ["gpu01", "gpu02"] and cert.quarantined == []
    (plan,) = topology.plan_tiers(inv, cert)
    assert plan.pipeline_parallel == 2


def test_a_limit_run_that_quarantines_one_node_leaves_the_others(make_inv):
    inv = make_inv(3)
    certification(inv, ["gpu01", "gpu02", "gpu03"], run_id=A)
    path, book = certified_ledger(inv, [], ["gpu03"], run_id=B)
    assert {n: e.verdict for n, e in book.nodes.items()} == {
        "gpu01": "certified", "gpu02": "certified", "gpu03": "quarantined"}
    assert book.nodes["gpu03"].failing_gates == ["pcie_link"]
    cert = topology.read_certification(inv, (path, book))
    assert sorted(cert.certified) == ["gpu01", "gpu02"] and cert.quarantined == ["gpu03"]
    assert [(c.node, c.before, c.after) for c in book.changes()] == [("gpu03", "certified", "quarantined")]


def test_check_mode_and_error_runs_never_change_the_ledger(make_inv):
    inv = make_inv(2)
    path, before = certified_ledger(inv, ["gpu01", "gpu02"], run_id=A)
    _, after = certified_ledger(inv, [], ["gpu01"], run_id=B, check=True)
    assert after == before
    errored = CertifySummary(customer="acme", run_id=C, status="error", exit_code=1, started_at="2026-12-01T00:00:00",
                             profile="quick", failure_policy="quarantine", validity_hours=24,
                             hosts={"gpu01": {"status": "quarantined"}})
    assert ledger.record_certify(before.model_copy(deep=True), errored, path) == before


def test_a_node_expires_on_its_own_window(make_inv):
    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    path, book = ledger.read(*_root_and_customer(inv))
    book.nodes["gpu01"].valid_until = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    cert = topology.read_certification(inv, (path, book))
    assert list(cert.certified) == ["gpu02"] and cert.quarantined == ["gpu01"]
    assert "gpu01 (certification expired at" in cert.messages[-1]
    with pytest.raises(NotCertified):
        topology.read_certification(inv, (path, book), now=datetime.now(UTC) + timedelta(hours=30))


def test_a_drained_node_is_left_out_until_a_fresh_pass_returns_it(make_inv):
    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    root, customer = _root_and_customer(inv)
    book = ledger.update(root, customer, lambda b: ledger.drain(b, "gpu02", "xid 79"))
    assert book.nodes["gpu02"].drained and book.changes()[0].after == "drained"
    cert = topology.read_certification(inv, ledger.read(root, customer))
    assert list(cert.certified) == ["gpu01"] and "gpu02 (drained: xid 79)" in cert.messages[-1]
    _, quarantined = certified_ledger(inv, [], ["gpu02"], run_id=B)
    assert quarantined.nodes["gpu02"].drained, "a failed re-certification keeps the node out"
    _, back = certified_ledger(inv, ["gpu02"], run_id=C)
    assert not back.nodes["gpu02"].drained and back.changes()[0].after == "certified"


def test_a_rolls_drain_holds_through_a_fresh_pass_until_the_roll_returns_the_node(make_inv):
    """A rolling provision re-certifies a drained node before its engines answer again: the pass must not return
    it (an `invoke watch` sync then would send it traffic), only the roll's undrain after its health wait does."""
    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    root, customer = _root_and_customer(inv)
    ledger.update(root, customer, lambda b: ledger.drain(b, "gpu02", "rolling provision r1, batch 1", held=True))
    _, passed = certified_ledger(inv, ["gpu02"], run_id=B)
    assert passed.nodes["gpu02"].drained and passed.nodes["gpu02"].drain_held
    assert passed.nodes["gpu02"].verdict == "certified" and passed.nodes["gpu02"].run_id == B
    cert = topology.read_certification(inv, ledger.read(root, customer))
    assert list(cert.certified) == ["gpu01"]
    held = ledger.read(root, customer)[1]
    targeted = ledger.record_targeted(held, "gpu02", NodeCertification(status="certified"), ["dcgm"],
                                      root / "s.json", C)
    assert targeted.nodes["gpu02"].drained, "a targeted pass does not return a held node either"
    back = ledger.update(root, customer, lambda b: ledger.undrain(b, "gpu02", "returned"))
    assert not back.nodes["gpu02"].drained and not back.nodes["gpu02"].drain_held


def test_reuse_reads_the_ledger_not_the_newest_summary(make_inv, monkeypatch):
    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    certification(inv, ["gpu02"], run_id=B)
    root, customer = _root_and_customer(inv)
    seen = []
    monkeypatch.setattr(certify_stage, "still_valid", lambda cert, spec: seen.append(cert) or True)
    monkeypatch.setattr(certify_stage.NodeVerdict, "model_validate", classmethod(lambda cls, d: d))
    for node, run in (("gpu01", A), ("gpu02", B)):
        cert_path = root / customer / run / "certify" / "nodes" / node / "certification.json"
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        cert_path.write_text(json.dumps({"node": node}))
    ctx = RunContext(customer=customer, run_id=C, root=root)
    found = certify_stage.reusable(ctx, inv.spec.certification, ["gpu01", "gpu02"])
    assert sorted(found) == ["gpu01", "gpu02"] and f"/{A}/" in found["gpu01"][0] and f"/{B}/" in found["gpu02"][0]


def test_bench_reads_the_deployment_never_a_render_or_refused_serve(make_inv, monkeypatch):
    """The live bug: a refused `serve --render` left a serve summary that bench read as the deployment."""
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    monkeypatch.setattr(serve_deploy, "hosts", lambda *a, **k: ("success", ExitCode.OK))
    inv = make_inv(1)
    root, customer = _root_and_customer(inv)
    certification(inv, ["gpu01"], run_id=A)
    assert serve.run(inv, RunContext(customer=customer, run_id=B, root=root)).exit_code == 0
    monkeypatch.setattr(serve_deploy, "kubernetes", lambda *a, **k: ("error", ExitCode.INVALID))
    # a hosts inventory's render goes through render_hosts (issue 44), a Kubernetes one through kubernetes()

    def refuse(*_a: object, **_k: object) -> None:
        raise InvalidInput("cluster.yml: serving: refused")

    monkeypatch.setattr(render_hosts, "render", refuse)
    refused = serve.run(inv, RunContext(customer=customer, run_id=C, root=root, render=True))
    assert refused.exit_code == 2
    _, book = ledger.read(root, customer)
    assert book.serving is not None and book.serving.run_id == B and book.serving.roles == {"gpu01": "llama70b head"}
    result = bench.run(inv, RunContext(customer=customer, run_id="20261130T040000Z-dddd", root=root))
    assert result.exit_code == 0 and f"/{B}/serve/summary.json" in (result.serve_summary or "")


def test_a_foreign_ledger_is_exit_2_naming_the_key(make_inv):
    inv = make_inv(1)
    certification(inv, ["gpu01"], run_id=A)
    root, customer = _root_and_customer(inv)
    path = ledger.path_of(root, customer)
    raw = json.loads(path.read_text())
    raw["nodes"]["gpu01"]["verdict"] = "fine"
    path.write_text(json.dumps(raw))
    with pytest.raises(InvalidInput) as err:
        ledger.read(root, customer)
    assert err.value.code == 2 and "ledger.json: nodes.gpu01.verdict: " in str(err.value)
    assert "\n" not in str(err.value)


def _root_and_customer(inv):
    return inv.path.parent.parent / "artifacts", inv.customer


def test_status_shows_each_node_and_the_change_since_the_previous_state(make_inv, monkeypatch):
    from rich.console import Console

    from gridready.stages import status

    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    monkeypatch.setattr(serve_deploy, "hosts", lambda *a, **k: ("success", ExitCode.OK))
    inv = make_inv(3)
    root, customer = _root_and_customer(inv)
    certification(inv, ["gpu01", "gpu02", "gpu03"], run_id=A)
    assert serve.run(inv, RunContext(customer=customer, run_id=B, root=root)).exit_code == 0
    ledger.update(root, customer, lambda b: ledger.drain(b, "gpu03", "xid 79 on GPU 2"))
    doc = status.run(inv, RunContext(customer=customer, run_id=C, root=root))
    by_node = {r["node"]: r for r in doc["nodes"]}
    assert by_node["gpu01"]["verdict"] == "certified" and by_node["gpu01"]["serving"] == "llama70b head"
    assert by_node["gpu02"]["serving"] == "llama70b worker" and by_node["gpu01"]["certified_until"]
    assert by_node["gpu03"]["drained"] and by_node["gpu03"]["drain_reason"] == "xid 79 on GPU 2"
    assert [(c["node"], c["before"], c["after"]) for c in doc["changes"]] == [("gpu03", "certified", "drained")]
    certification(inv, [], ["gpu03"], run_id=C)
    doc = status.run(inv, RunContext(customer=customer, run_id=C, root=root))
    row = next(r for r in doc["nodes"] if r["node"] == "gpu03")
    assert (row["verdict"], row["failing_gates"], row["drained"]) == ("quarantined", ["pcie_link"], True)
    console = Console(record=True, width=200)
    for item in status.table(doc):
        console.print(item)
    text = console.export_text()
    assert "gpu03" in text and "pcie_link" in text and "changed since the previous state" in text
    later = status.view(inv, ledger.read(root, customer)[1], now=datetime.now(UTC) + timedelta(hours=30))
    assert [r["verdict"] for r in later["nodes"]] == ["expired", "expired", "quarantined"]


def test_status_of_a_fleet_never_certified(make_inv):
    from gridready.stages import status

    inv = make_inv(1)
    doc = status.run(inv, RunContext(customer="acme", run_id=A, root=_root_and_customer(inv)[0]))
    assert doc["revision"] == 0 and doc["nodes"][0]["verdict"] == "never" and doc["changes"] == []


def test_retention_keeps_the_last_valid_runs_and_every_run_the_ledger_points_to(make_inv):
    from gridready.artifacts import prunable
    from gridready.stages import prune

    inv = make_inv(2)
    root, customer = _root_and_customer(inv)
    runs = [f"20261130T0{i}0000Z-r{i}" for i in range(1, 7)]
    certification(inv, ["gpu01", "gpu02"], run_id=runs[0])  # the ledger's gpu01 stays on run 1
    certification(inv, ["gpu02"], run_id=runs[1])
    for i, run in enumerate(runs[2:], start=3):  # runs 3..6: certify summaries the ledger never took
        d = root / customer / run / "certify"
        d.mkdir(parents=True)
        raw = {"stage": "certify", "check": i == 4, "exit_code": 5 if i == 6 else 0,
               "finished_at": f"2026-11-30T0{i}:00:00+00:00"}
        (d / "summary.json").write_text(json.dumps(raw))
    for i, run in enumerate(runs[:2], start=1):  # the ledger's runs, dated before the others
        p = root / customer / run / "certify" / "summary.json"
        raw = json.loads(p.read_text())
        raw["finished_at"] = f"2026-11-30T0{i}:00:00+00:00"
        p.write_text(json.dumps(raw))
    _, book = ledger.read(root, customer)
    assert ledger.protected_runs(book) == {runs[0], runs[1]}
    # keep 1: run 5 is the newest valid one, run 6 (failed) is newer and stays; 3 and 4 go; 1 and 2 are the ledger's
    assert [p.name for p in prunable(root, customer, 1, ledger.protected_runs(book))] == [runs[2], runs[3]]
    done = prune.run(inv, RunContext(customer=customer, run_id=C, root=root), keep=1)
    assert done["removed"] == [runs[2], runs[3]]
    assert sorted(p.name for p in (root / customer).iterdir() if p.is_dir()) == [runs[0], runs[1], runs[4], runs[5]]
    with pytest.raises(InvalidInput, match="--keep: "):
        prunable(root, customer, 0, set())


def test_watch_drains_on_a_fault_quarantines_then_returns_the_node(make_inv, tmp_path):
    """The lifecycle on the ledger: fault -> drained -> targeted re-certification (the fault's gates only, a run
    that records nothing itself) fails -> quarantined, still drained -> fault cleared -> a full re-certification
    passes -> returned; each step in the status view."""
    from gridready.health import XID_GATES
    from gridready.stages import status, watch

    inv = make_inv(3)
    root, customer = _root_and_customer(inv)
    certification(inv, ["gpu01", "gpu02", "gpu03"], run_id=A)
    fault = tmp_path / "signals.json"
    fault.write_text(json.dumps([{"node": "gpu02", "kind": "xid", "code": "79", "detail": "fallen off the bus"}]))
    healthy = {"now": False}
    runs: list[tuple[str, ...]] = []

    def recertify(inv_, sub):
        assert sub.limit == "gpu02" and sub.force and not sub.skip_gates
        runs.append(sub.gates)
        ok = ["gpu02"] if healthy["now"] else []
        return certification(inv_, ok, [] if ok else ["gpu02"], run_id=sub.run_id, root=sub.root,
                             record=not sub.gates)[1]

    ctx = RunContext(customer=customer, run_id=B, root=root)
    policy = watch.load_policy(None, None)
    first = watch.run(inv, ctx, str(fault), policy, recertify)
    assert runs == [tuple(sorted(XID_GATES[79]))]  # the gates of an Xid 79 only
    assert [(a["kind"], a["node"]) for a in first["actions"]] == [
        ("drain", "gpu02"), ("recertify", "gpu02"), ("quarantine", "gpu02")]
    entry = ledger.read(root, customer)[1].nodes["gpu02"]
    assert entry.run_id == first["recertify_run"] and entry.failing_gates == ["pcie_link"]
    assert entry.valid_until is None and entry.drained
    row = {r["node"]: r for r in status.run(inv, ctx)["nodes"]}["gpu02"]
    assert (row["verdict"], row["drained"]) == ("quarantined", True)
    cert = topology.read_certification(inv, ledger.read(root, customer))
    assert sorted(cert.certified) == ["gpu01", "gpu03"]
    healthy["now"] = True
    fault.write_text("[]")
    second = watch.run(inv, ctx, str(fault), policy, recertify)
    assert runs[1] == ()  # no fault left: every gate, and the run records itself
    assert [(a["kind"], a["node"]) for a in second["actions"]] == [("recertify", "gpu02"), ("return", "gpu02")]
    row = {r["node"]: r for r in status.run(inv, ctx)["nodes"]}["gpu02"]
    assert (row["verdict"], row["drained"]) == ("certified", False)
    assert sorted(topology.read_certification(inv, ledger.read(root, customer)).certified) == [
        "gpu01", "gpu02", "gpu03"]


def test_a_targeted_pass_returns_the_node_on_its_standing_certification(make_inv, tmp_path):
    """A fault whose gates pass again (the GPU recovered): the node returns with its certification window and
    evidence unchanged; the targeted run is named in the history."""
    from gridready.stages import watch

    inv = make_inv(2)
    root, customer = _root_and_customer(inv)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    before = ledger.read(root, customer)[1].nodes["gpu01"].model_copy()
    fault = tmp_path / "signals.json"
    fault.write_text(json.dumps([{"node": "gpu01", "kind": "dcgm_health", "code": "thermal"}]))

    def recertify(inv_, sub):
        assert sub.gates == ("clocks", "temperature", "throttle")
        return certification(inv_, ["gpu01"], run_id=sub.run_id, root=sub.root, record=False)[1]

    done = watch.run(inv, RunContext(customer=customer, run_id=B, root=root), str(fault),
                     watch.load_policy(None, None), recertify)
    assert [(a["kind"], a["node"]) for a in done["actions"]] == [
        ("drain", "gpu01"), ("recertify", "gpu01"), ("return", "gpu01")]
    book = ledger.read(root, customer)[1]
    after = book.nodes["gpu01"]
    assert not after.drained and after.verdict == "certified"
    assert (after.run_id, after.valid_until, after.evidence) == (before.run_id, before.valid_until, before.evidence)
    assert "targeted re-certification passed (clocks, temperature, throttle; run " in book.history[-1].reason


def test_every_gate_the_watcher_asks_for_is_a_gate() -> None:
    from gridready.health import DCGM_GATES, ENGINE_GATES, XID_DEFAULT, XID_GATES
    from gridready.stages.certify import is_known_gate

    asked = {g for gs in [*XID_GATES.values(), *DCGM_GATES.values(), ENGINE_GATES, XID_DEFAULT] for g in gs}
    assert asked and all(is_known_gate(g) for g in asked), sorted(g for g in asked if not is_known_gate(g))


def test_watch_reads_xid_and_dcgm_health_from_the_nodes(make_inv):
    from gridready.stages import watch
    from gridready.stages.fabric import CommandResult

    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    root, customer = _root_and_customer(inv)

    class Runner:
        def run(self, host, argv, timeout):
            if argv[0] == "journalctl" and host == "gpu01":
                return CommandResult(0, "Dec 02 06:00:01 gpu01 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1, "
                                        "GPU has fallen off the bus.\n")
            if argv[0] == "dcgmi" and host == "gpu02":
                return CommandResult(0, "| PCIe system | Failure: replay rate exceeded |\n| Memory | Healthy |\n")
            return CommandResult(0, "")

    book = ledger.read(root, customer)[1]
    found = watch.collect(inv, book, Runner())
    assert [(s.node, s.kind, s.code) for s in found] == [("gpu01", "xid", "79"), ("gpu02", "dcgm_health", "pcie")]
    judged = datetime.fromisoformat(book.nodes["gpu01"].judged_at)
    assert watch.since(book.nodes["gpu01"], judged + timedelta(minutes=5)) == f"{judged:%Y-%m-%d %H:%M:%S} UTC"
    assert watch.since(book.nodes["gpu01"], judged + timedelta(hours=1)) == (
        f"{judged + timedelta(minutes=45):%Y-%m-%d %H:%M:%S} UTC")
    with pytest.raises(InvalidInput, match="--max-drain-share: "):
        watch.load_policy(1.5, None)


def test_watch_falls_back_to_dmesg_after_the_verdict_and_sets_dcgm_watches(make_inv):
    """journald holds no kernel line (a container, a volatile journal): the watcher reads `dmesg --time-format iso`
    and keeps only lines newer than the same bound as journalctl's --since; dcgmi with no watch set gets them set
    (`dcgmi health -s a`) and is checked again."""
    from gridready.stages import watch
    from gridready.stages.fabric import CommandResult

    inv = make_inv(2)
    certification(inv, ["gpu01", "gpu02"], run_id=A)
    root, customer = _root_and_customer(inv)
    book = ledger.read(root, customer)[1]
    judged = datetime.fromisoformat(book.nodes["gpu02"].judged_at)
    judged = judged if judged.tzinfo else judged.replace(tzinfo=UTC)

    def iso(at: datetime) -> str:
        return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S,123456+00:00")

    old = f"{iso(judged - timedelta(minutes=1))} NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus."
    new = f"{iso(judged + timedelta(minutes=2))} NVRM: Xid (PCI:0000:2a:00): 48, pid='<unknown>', name=<unknown>, DBE"
    calls: list[tuple[str, tuple[str, ...]]] = []
    watches: set[str] = set()

    class Runner:
        def run(self, host, argv, timeout):
            calls.append((host, tuple(argv[:3])))
            if argv[0] == "journalctl":
                return CommandResult(0, "-- No entries --\n")
            if argv[0] == "dmesg":
                return CommandResult(0, f"{old}\n{new}\nno stamp here\n" if host == "gpu02" else "")
            if argv[:3] == ["dcgmi", "health", "-s"]:
                watches.add(host)
                return CommandResult(0, "Health monitor systems set successfully.\n")
            if host not in watches:
                return CommandResult(253, "Error: Health watches not enabled. Please enable watches. \n")
            return CommandResult(0, "| Overall Health            | Healthy |\n")

    found = watch.collect(inv, book, Runner(), now=judged + timedelta(minutes=5))
    assert [(s.node, s.kind, s.code) for s in found] == [("gpu02", "xid", "48")]
    assert ("gpu01", ("dmesg", "--time-format", "iso")) in calls
    assert calls.count(("gpu02", ("dcgmi", "health", "-s"))) == 1 and watches == {"gpu01", "gpu02"}
    assert watch.newer_dmesg(f"{old}\n{new}", judged) == new
