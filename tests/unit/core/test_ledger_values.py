"""gridready.ledger by value, in process: what a certify run, a serve deployment, the watcher and a roll change in
the per-node ledger (and what they leave alone), what is written and read back, which files are refused with which
line, and when a node is usable by serve (boundaries of its certification window)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gridready import ledger
from gridready.contracts import CertifySummary, NodeCertification, ServeSummary
from gridready.errors import InvalidInput

AT = "2026-12-01T10:00:00+00:00"
LATER = "2026-12-02T10:00:00+00:00"


def certify_summary(hosts: dict[str, NodeCertification], *, run_id: str = "run1", check: bool = False,
                    status: str = "success", finished_at: str | None = AT,
                    simulated: tuple[str, ...] = ()) -> CertifySummary:
    return CertifySummary(customer="acme", run_id=run_id, status=status, exit_code=0, check=check,
                          started_at="2026-12-01T09:00:00+00:00", finished_at=finished_at, profile="quick",
                          failure_policy="quarantine", validity_hours=168, hosts=hosts, simulated=list(simulated))


def serve_summary(*, run_id: str = "serve1", check: bool = False, exit_code: int = 0,
                  finished_at: str | None = AT) -> ServeSummary:
    return ServeSummary(customer="acme", run_id=run_id, status="success" if exit_code == 0 else "failed",
                        exit_code=exit_code, check=check, started_at="2026-12-01T09:00:00+00:00",
                        finished_at=finished_at)


def entry(**kw) -> ledger.NodeEntry:
    base = {"verdict": "certified", "run_id": "run0", "judged_at": AT, "valid_until": LATER, "profile": "quick",
            "summary": "/a/certify/run0/summary.json"}
    return ledger.NodeEntry(**{**base, **kw})


def book(**nodes: ledger.NodeEntry) -> ledger.Ledger:
    return ledger.Ledger(customer="acme", nodes=dict(nodes))


PASS = NodeCertification(status="certified", valid_until=LATER, certification="/a/c/gpu01.json",
                         hcas_passed=["mlx5_0"])
FAIL = NodeCertification(status="quarantined", blocking=["pcie: gen 4 < 5", "xid: 79 on GPU 0", "pcie: width 8"],
                         hcas_failed=["mlx5_1"])


# ---- small pure functions

def test_path_of_is_the_customers_ledger_json(tmp_path):
    assert ledger.path_of(tmp_path, "acme") == tmp_path / "acme" / "ledger.json"


def test_failing_gates_are_the_sorted_distinct_names_before_the_first_colon():
    assert ledger.failing_gates(["xid: 79: fell off the bus", " pcie : gen 4", "pcie: width", "", "  ", "nccl"]) == [
        "nccl", "pcie", "xid"]
    assert ledger.failing_gates([]) == []


def test_state_is_absent_drained_or_the_verdict():
    assert ledger.state(None) == "absent"
    assert ledger.state(entry()) == "certified"
    assert ledger.state(entry(verdict="quarantined")) == "quarantined"
    assert ledger.state(entry(verdict="quarantined", drained=True)) == "drained"


def test_changes_are_those_of_the_latest_revision_or_the_one_asked():
    b = book(n1=entry(), n2=entry())
    ledger.drain(b, "n1", "xid", at=AT)
    ledger.drain(b, "n2", "ecc", at=LATER)
    assert [(c.revision, c.node) for c in b.changes()] == [(2, "n2")]
    assert [(c.revision, c.node) for c in b.changes(1)] == [(1, "n1")]
    assert b.changes(3) == []


def test_protected_runs_are_every_nodes_run_and_the_deployment():
    b = book(n1=entry(run_id="r1"), n2=entry(run_id="r2"), n3=entry(run_id="r1"))
    assert ledger.protected_runs(b) == {"r1", "r2"}
    b.serving = ledger.Deployment(run_id="s1", summary="/a/serve/s1/summary.json", at=AT)
    assert ledger.protected_runs(b) == {"r1", "r2", "s1"}
    assert ledger.protected_runs(ledger.Ledger(customer="acme")) == set()


def test_stamp_bumps_the_revision_and_keeps_the_last_thousand_changes():
    b = book()
    b.history = [ledger.Change(revision=0, at=AT, node=f"old{i}", before=None, after="certified", source="s")
                 for i in range(999)]
    ledger._stamp(b, LATER, [("a", None, "certified", "r1"), ("b", "certified", "drained", "r2")], "watch")
    assert (b.revision, b.updated_at, len(b.history)) == (1, LATER, 1000)
    assert b.history[0].node == "old1"  # the oldest one went
    assert b.history[-1] == ledger.Change(revision=1, at=LATER, node="b", before="certified", after="drained",
                                          source="watch", reason="r2")
    assert ledger.HISTORY_KEEP == 1000
    ledger._stamp(b, LATER, [("c", None, "certified", "")], "x")
    assert b.revision == 2 and len(b.history) == 1000 and b.history[0].node == "old2"


# ---- record_certify

def test_record_certify_writes_each_judged_node_with_its_verdict_gates_and_evidence():
    summary = certify_summary({"gpu01": PASS, "gpu02": FAIL}, simulated=("gpu02",))
    b = ledger.record_certify(book(), summary, Path("/a/certify/run1/summary.json"),
                              groups={"gpu01": "h200", "gpu02": None},
                              evidence={"gpu01": ("/a/certify/run1/evidence/gpu01/statement.dsse.json", "ab12")})
    assert b.nodes["gpu01"] == ledger.NodeEntry(
        verdict="certified", group="h200", run_id="run1", judged_at=AT, valid_until=LATER, profile="quick",
        failing_gates=[], blocking=[], summary="/a/certify/run1/summary.json", certification="/a/c/gpu01.json",
        evidence="/a/certify/run1/evidence/gpu01/statement.dsse.json", identity="ab12", hcas_passed=["mlx5_0"],
        hcas_failed=[], simulated=False, drained=False, drain_reason=None, drained_at=None, drain_held=False)
    assert b.nodes["gpu02"] == ledger.NodeEntry(
        verdict="quarantined", group=None, run_id="run1", judged_at=AT, valid_until=None, profile="quick",
        failing_gates=["pcie", "xid"], blocking=FAIL.blocking, summary="/a/certify/run1/summary.json",
        certification=None, evidence=None, identity=None, hcas_passed=None, hcas_failed=["mlx5_1"], simulated=True)
    assert (b.revision, b.updated_at) == (1, AT)
    assert [(c.node, c.before, c.after, c.reason, c.source) for c in b.history] == [
        ("gpu01", "absent", "certified", "first certification", "certify run1"),
        ("gpu02", "absent", "quarantined", "pcie, xid", "certify run1")]


def test_record_certify_merges_keeps_other_nodes_and_a_groupless_node_keeps_its_group():
    b = book(gpu01=entry(group="h200"), gpu09=entry(group="b200", run_id="run0"))
    b = ledger.record_certify(b, certify_summary({"gpu01": PASS}), Path("/s.json"), at=LATER)
    assert b.nodes["gpu01"].group == "h200" and b.nodes["gpu01"].run_id == "run1"
    assert b.nodes["gpu01"].judged_at == LATER and b.updated_at == LATER
    assert b.nodes["gpu09"] == entry(group="b200", run_id="run0")
    assert [(c.node, c.before, c.after, c.reason) for c in b.history] == [
        ("gpu01", "certified", "certified", "re-certified")]
    b = ledger.record_certify(b, certify_summary({"gpu01": PASS}, run_id="run2"), Path("/s.json"), groups={})
    assert b.nodes["gpu01"].group == "h200"
    b = ledger.record_certify(b, certify_summary({"gpu01": PASS}, run_id="run3"), Path("/s.json"),
                              groups={"gpu01": "new"})
    assert b.nodes["gpu01"].group == "new"


def test_record_certify_changes_nothing_for_check_mode_an_error_or_reused_nodes():
    before = book(gpu01=entry(verdict="quarantined"))
    for summary in (certify_summary({"gpu01": PASS}, check=True),
                    certify_summary({"gpu01": PASS}, status="error"),
                    certify_summary({"gpu01": NodeCertification(status="certified", reused=True)})):
        b = ledger.record_certify(before.model_copy(deep=True), summary, Path("/s.json"))
        assert b == before and b.revision == 0 and b.history == []
    # a failed run (not an error) is recorded
    b = ledger.record_certify(before.model_copy(deep=True), certify_summary({"gpu01": FAIL}, status="failed"),
                              Path("/s.json"))
    assert b.revision == 1 and b.nodes["gpu01"].run_id == "run1"


def test_record_certify_skips_a_reused_node_and_goes_on_with_the_next():
    reused = NodeCertification(status="certified", reused=True)
    b = ledger.record_certify(book(gpu01=entry(run_id="run0")), certify_summary({"gpu01": reused, "gpu02": FAIL}),
                              Path("/s.json"))
    assert b.nodes["gpu01"].run_id == "run0" and b.nodes["gpu02"].run_id == "run1"
    assert [c.node for c in b.history] == ["gpu02"]


def test_record_certify_stamps_the_current_time_without_a_finish_time(monkeypatch):
    monkeypatch.setattr(ledger, "now_iso", lambda: "2026-12-03T00:00:00+00:00")
    b = ledger.record_certify(book(), certify_summary({"gpu01": PASS}, finished_at=None), Path("/s.json"))
    assert b.nodes["gpu01"].judged_at == "2026-12-03T00:00:00+00:00" == b.updated_at


@pytest.mark.parametrize(("held", "result", "drained"), [
    (False, PASS, False),  # a fresh pass returns a watcher's drain
    (True, PASS, True),  # a roll's drain stays until the roll returns it
    (False, FAIL, True),
    (True, FAIL, True),
])
def test_record_certify_returns_a_drained_node_only_on_a_pass_not_held_by_a_roll(held, result, drained):
    b = book(gpu01=entry(drained=True, drain_reason="xid 79", drained_at=AT, drain_held=held))
    b = ledger.record_certify(b, certify_summary({"gpu01": result}), Path("/s.json"), at=LATER)
    e = b.nodes["gpu01"]
    assert (e.drained, e.drain_reason, e.drained_at, e.drain_held) == (
        (True, "xid 79", AT, held) if drained else (False, None, None, False))
    assert (b.history[-1].before, b.history[-1].after) == ("drained", "drained" if drained else "certified")


def test_record_certify_of_a_node_never_drained_leaves_it_in_service():
    b = ledger.record_certify(book(gpu01=entry(drain_held=True)), certify_summary({"gpu01": FAIL}), Path("/s"))
    e = b.nodes["gpu01"]
    assert (e.drained, e.drain_reason, e.drained_at, e.drain_held) == (False, None, None, False)


# ---- record_serve

def test_record_serve_records_a_deployment_and_each_changed_role():
    b = book()
    b.serving = ledger.Deployment(run_id="s0", summary="/s0.json", at=AT,
                                  roles={"n1": "chat head", "n2": "chat worker", "n3": "embed head"})
    roles = {"n1": "chat head", "n2": "chat head", "n4": "chat worker"}
    b = ledger.record_serve(b, serve_summary(), Path("/a/serve/serve1/summary.json"), roles, deployed=True)
    assert b.serving == ledger.Deployment(run_id="serve1", summary="/a/serve/serve1/summary.json", at=AT,
                                          roles=roles)
    assert b.serving.roles is not roles
    assert [(c.node, c.before, c.after, c.reason, c.source) for c in b.history] == [
        ("n2", "chat worker", "chat head", "serve", "serve serve1"),
        ("n3", "embed head", "idle", "serve", "serve serve1"),
        ("n4", "idle", "chat worker", "serve", "serve serve1")]
    assert (b.revision, b.updated_at) == (1, AT)


def test_record_serve_of_the_same_roles_bumps_the_revision_with_no_change():
    b = ledger.record_serve(book(), serve_summary(), Path("/s.json"), {}, deployed=True, at=LATER)
    assert (b.revision, b.updated_at, b.history) == (1, LATER, [])
    assert b.serving is not None and b.serving.at == LATER


def test_record_serve_stamps_now_without_a_finish_time(monkeypatch):
    monkeypatch.setattr(ledger, "now_iso", lambda: "2026-12-03T00:00:00+00:00")
    b = ledger.record_serve(book(), serve_summary(finished_at=None), Path("/s.json"), {"n": "t head"}, deployed=True)
    assert b.serving.at == "2026-12-03T00:00:00+00:00" == b.history[0].at


@pytest.mark.parametrize(("summary", "deployed"), [
    (serve_summary(), False), (serve_summary(check=True), True), (serve_summary(exit_code=1), True),
    (serve_summary(exit_code=-1), True)])
def test_record_serve_leaves_the_last_deployment_for_anything_but_a_deployment(summary, deployed):
    before = book()
    before.serving = ledger.Deployment(run_id="s0", summary="/s0.json", at=AT, roles={"n1": "chat head"})
    b = ledger.record_serve(before.model_copy(deep=True), summary, Path("/s.json"), {}, deployed=deployed)
    assert b == before


# ---- drain, undrain, record_targeted

def test_drain_takes_a_node_out_with_reason_and_time():
    b = ledger.drain(book(n1=entry(verdict="quarantined")), "n1", "xid 79", at=LATER)
    e = b.nodes["n1"]
    assert (e.drained, e.drain_reason, e.drained_at, e.drain_held) == (True, "xid 79", LATER, False)
    assert [(c.node, c.before, c.after, c.reason, c.source, c.revision) for c in b.history] == [
        ("n1", "quarantined", "drained", "xid 79", "watch", 1)]
    held = ledger.drain(book(n1=entry()), "n1", "roll", at=LATER, held=True)
    assert held.nodes["n1"].drain_held is True


def test_drain_stamps_now_by_default(monkeypatch):
    monkeypatch.setattr(ledger, "now_iso", lambda: "2026-12-03T00:00:00+00:00")
    assert ledger.drain(book(n1=entry()), "n1", "x").nodes["n1"].drained_at == "2026-12-03T00:00:00+00:00"


def test_drain_of_an_unknown_or_drained_node_changes_nothing_but_a_rolls_hold():
    assert ledger.drain(book(), "n1", "x") == book()
    before = book(n1=entry(drained=True, drain_reason="xid", drained_at=AT))
    assert ledger.drain(before.model_copy(deep=True), "n1", "other", at=LATER) == before
    b = ledger.drain(before.model_copy(deep=True), "n1", "roll", at=LATER, held=True)
    e = b.nodes["n1"]
    assert (e.drain_held, e.drain_reason, e.drained_at, b.revision, b.history) == (True, "xid", AT, 0, [])


def test_undrain_puts_a_drained_node_back_under_its_verdict():
    b = ledger.undrain(book(n1=entry(drained=True, drain_reason="r", drained_at=AT, drain_held=True)), "n1",
                       "engines answer", at=LATER)
    e = b.nodes["n1"]
    assert (e.drained, e.drain_reason, e.drained_at, e.drain_held) == (False, None, None, False)
    assert [(c.node, c.before, c.after, c.reason, c.source, c.at) for c in b.history] == [
        ("n1", "drained", "certified", "engines answer", "watch", LATER)]
    assert ledger.undrain(book(), "n1", "x") == book()
    assert ledger.undrain(book(n1=entry()), "n1", "x") == book(n1=entry())


def test_undrain_stamps_now_by_default(monkeypatch):
    monkeypatch.setattr(ledger, "now_iso", lambda: "2026-12-03T00:00:00+00:00")
    assert ledger.undrain(book(n1=entry(drained=True)), "n1", "x").updated_at == "2026-12-03T00:00:00+00:00"


def test_targeted_pass_returns_a_watchers_drain_on_the_standing_certification():
    before = entry(drained=True, drain_reason="xid", drained_at=AT, evidence="/e.json")
    b = ledger.record_targeted(book(n1=before), "n1", PASS, ["xid", "pcie"], Path("/t.json"), "t1", at=LATER)
    e = b.nodes["n1"]
    assert e == entry(evidence="/e.json")  # run, window and evidence unchanged
    assert [(c.before, c.after, c.reason, c.source) for c in b.history] == [
        ("drained", "certified", "targeted re-certification passed (pcie, xid; run t1)", "watch")]


def test_targeted_pass_leaves_a_node_in_service_or_held_by_a_roll_alone():
    assert ledger.record_targeted(book(), "n1", PASS, ["xid"], Path("/t"), "t1") == book()
    assert ledger.record_targeted(book(n1=entry()), "n1", PASS, ["xid"], Path("/t"), "t1") == book(n1=entry())
    held = book(n1=entry(drained=True, drain_held=True, drain_reason="roll"))
    assert ledger.record_targeted(held.model_copy(deep=True), "n1", PASS, ["xid"], Path("/t"), "t1") == held


def test_targeted_fail_quarantines_and_drains_naming_the_run_and_gates():
    b = ledger.record_targeted(book(n1=entry()), "n1", FAIL, ["xid", "pcie"], Path("/a/t1/summary.json"), "t1",
                               at=LATER)
    e = b.nodes["n1"]
    assert (e.verdict, e.run_id, e.judged_at, e.summary, e.valid_until) == (
        "quarantined", "t1", LATER, "/a/t1/summary.json", None)
    assert (e.blocking, e.failing_gates) == (FAIL.blocking, ["pcie", "xid"])
    assert (e.drained, e.drain_reason, e.drained_at) == (True, "targeted re-certification: pcie, xid", LATER)
    assert [(c.before, c.after, c.reason, c.source) for c in b.history] == [
        ("certified", "quarantined", "targeted re-certification failed: pcie, xid (run t1)", "watch")]


def test_targeted_fail_of_a_drained_node_keeps_its_drain_and_names_the_status_without_gates():
    b = ledger.record_targeted(book(n1=entry(drained=True, drain_reason="xid", drained_at=AT)), "n1",
                               NodeCertification(status="unreachable"), [], Path("/t"), "t2", at=LATER)
    e = b.nodes["n1"]
    assert (e.verdict, e.drained, e.drain_reason, e.drained_at, e.failing_gates) == (
        "unreachable", True, "xid", AT, [])
    assert [(c.before, c.after, c.reason) for c in b.history] == [
        ("drained", "unreachable", "targeted re-certification failed: unreachable (run t2)")]


def test_targeted_stamps_now_by_default(monkeypatch):
    monkeypatch.setattr(ledger, "now_iso", lambda: "2026-12-03T00:00:00+00:00")
    b = ledger.record_targeted(book(n1=entry()), "n1", FAIL, ["xid"], Path("/t"), "t1")
    assert b.nodes["n1"].judged_at == "2026-12-03T00:00:00+00:00" == b.updated_at


# ---- expires, usable

def test_expires_is_the_earlier_of_valid_until_and_todays_window():
    e = entry(judged_at="2026-12-01T10:00:00+00:00", valid_until="2026-12-08T10:00:00+00:00")
    assert ledger.expires(e, 168) == datetime(2026, 12, 8, 10, tzinfo=UTC)
    assert ledger.expires(e, 24) == datetime(2026, 12, 2, 10, tzinfo=UTC)
    assert ledger.expires(e, 169) == datetime(2026, 12, 8, 10, tzinfo=UTC)
    naive = entry(judged_at="2026-12-01T10:00:00", valid_until="2026-12-01T12:00:00+02:00")  # 10:00 UTC
    assert ledger.expires(naive, 1) == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert ledger.expires(naive, 1).tzinfo is not None
    assert ledger.expires(entry(valid_until=None), 24) is None
    assert ledger.expires(entry(verdict="quarantined"), 24) is None


def test_usable_until_the_exact_expiry_then_not():
    e = entry(judged_at="2026-12-01T10:00:00+00:00", valid_until="2026-12-08T10:00:00+00:00")
    until = datetime(2026, 12, 2, 10, tzinfo=UTC)
    assert ledger.usable(e, 24, until - timedelta(microseconds=1)) == (True, "certified")
    assert ledger.usable(e, 24, until) == (False, "certification expired at 2026-12-02T10:00:00+00:00")
    assert ledger.usable(e, 24, until + timedelta(seconds=1)) == (False,
                                                                  "certification expired at 2026-12-02T10:00:00+00:00")
    assert ledger.usable(entry(valid_until=None), 24, until) == (False, "certification expired at ?")


def test_usable_says_why_not():
    now = datetime(2026, 12, 1, 11, tzinfo=UTC)
    assert ledger.usable(None, 24, now) == (False, "never certified")
    assert ledger.usable(entry(verdict="quarantined", failing_gates=["pcie", "xid"]), 24, now) == (
        False, "quarantined (pcie, xid)")
    assert ledger.usable(entry(verdict="unreachable"), 24, now) == (False, "unreachable")
    assert ledger.usable(entry(drained=True, drain_reason="xid 79"), 24, now) == (False, "drained: xid 79")


def test_usable_reads_the_clock_when_not_given():
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    recent = entry(judged_at=datetime.now(UTC).isoformat(), valid_until=future)
    assert ledger.usable(recent, 24) == (True, "certified")
    old = entry(judged_at="2020-01-01T00:00:00+00:00", valid_until=future)
    assert ledger.usable(old, 24) == (False, "certification expired at 2020-01-02T00:00:00+00:00")


# ---- read, update

def write(root: Path, raw) -> Path:
    path = root / "acme" / "ledger.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw))
    return path


def refused(root: Path, customer: str = "acme") -> list[str]:
    with pytest.raises(InvalidInput) as err:
        ledger.read(root, customer)
    assert err.value.code == 2
    return err.value.lines


def test_read_of_no_file_is_an_empty_ledger(tmp_path):
    path, b = ledger.read(tmp_path, "acme")
    assert path == tmp_path / "acme" / "ledger.json"
    assert b.model_dump() == {"schema_version": "gridready.ledger/1", "customer": "acme", "revision": 0,
                              "updated_at": None, "nodes": {}, "serving": None, "history": []}


def passing(root: Path) -> NodeCertification:
    return PASS.model_copy(update={"certification": str(root / "acme/certify/run1/gpu01.json")})


def test_update_writes_the_change_and_read_gives_it_back(tmp_path):
    got = ledger.update(tmp_path, "acme", lambda b: ledger.drain(ledger.record_certify(
        b, certify_summary({"gpu01": passing(tmp_path), "gpu02": FAIL}), tmp_path / "acme/certify/run1/summary.json"),
        "gpu02", "xid", at=LATER))
    path, back = ledger.read(tmp_path, "acme")
    assert back == got and back.revision == 2
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == "gridready.ledger/1" and raw["revision"] == 2
    assert raw["nodes"]["gpu02"]["drain_reason"] == "xid"


def test_update_that_changes_nothing_writes_nothing_and_leaves_the_stored_ledger(tmp_path):
    assert ledger.update(tmp_path, "acme", lambda b: b) == ledger.Ledger(customer="acme")
    assert not (tmp_path / "acme" / "ledger.json").exists()
    ledger.update(tmp_path, "acme", lambda b: ledger.record_serve(b, serve_summary(), tmp_path / "s", {},
                                                                   deployed=True))
    path = tmp_path / "acme" / "ledger.json"
    os.utime(path, (0, 0))
    seen: list[ledger.Ledger] = []

    def change(b: ledger.Ledger) -> ledger.Ledger:
        seen.append(b)
        return b

    ledger.update(tmp_path, "acme", change)
    assert path.stat().st_mtime == 0
    assert seen[0].revision == 1


def test_update_gives_the_change_a_copy_not_the_stored_state(tmp_path):
    ledger.update(tmp_path, "acme", lambda b: ledger.record_certify(
        b, certify_summary({"gpu01": passing(tmp_path)}), tmp_path / "acme/s.json"))

    def mutate_in_place(b: ledger.Ledger) -> ledger.Ledger:
        b.nodes["gpu01"].drained = True
        return b

    after = ledger.update(tmp_path, "acme", mutate_in_place)
    assert after.nodes["gpu01"].drained is True
    assert ledger.read(tmp_path, "acme")[1].nodes["gpu01"].drained is True


def test_read_refuses_a_ledger_that_is_a_link_even_to_a_good_one(tmp_path):
    good = write(tmp_path, {"schema_version": "gridready.ledger/1", "customer": "acme"})
    good.rename(tmp_path / "acme" / "kept.json")
    good.symlink_to(tmp_path / "acme" / "kept.json")
    assert refused(tmp_path) == [
        f"{good}: (file): cannot read: a symbolic link, which is never followed here (or a loop of links)"]


def test_update_never_writes_through_a_link_put_on_the_way_after_the_read(tmp_path):
    """A link that appears between the read and the write (another actor, or the change itself) is refused at the
    write as well: the write stays beneath the artifacts root."""
    root, outside = tmp_path / "artifacts", tmp_path / "outside"
    (root / "acme").mkdir(parents=True)
    outside.mkdir()

    def swap_then_change(b: ledger.Ledger) -> ledger.Ledger:
        (root / "acme").rmdir()
        (root / "acme").symlink_to(outside)
        return ledger.record_serve(b, serve_summary(), root / "acme/s.json", {}, deployed=True)

    with pytest.raises(InvalidInput) as err:
        ledger.update(root, "acme", swap_then_change)
    assert err.value.lines == [
        f"{root / 'acme/ledger.json'}: (file): acme/ on the way is a symbolic link, which is never followed here"]
    assert list(outside.iterdir()) == []


def test_read_refuses_a_file_that_is_not_an_object(tmp_path):
    path = write(tmp_path, [1])
    assert refused(tmp_path) == [f"{path}: (file): the ledger is a JSON object, got list"]


@pytest.mark.parametrize("version", ["gridready.ledger/2", None])
def test_read_refuses_another_schema_version(tmp_path, version):
    path = write(tmp_path, {"customer": "acme"} | ({"schema_version": version} if version else {}))
    assert refused(tmp_path) == [
        f"{path}: schema_version: {version!r} is not 'gridready.ledger/1' (written by another gridready version); "
        "move it aside and run `invoke certify`"]


def test_read_names_the_first_drifted_key(tmp_path):
    path = write(tmp_path, {"schema_version": "gridready.ledger/1", "customer": "acme", "revision": "x",
                            "nodes": {"gpu01": {"verdict": "ok"}}})
    assert refused(tmp_path) == [f"{path}: revision: Input should be a valid integer, unable to parse string as an "
                                 "integer"]
    path = write(tmp_path, {"schema_version": "gridready.ledger/1", "customer": "acme", "colour": "red"})
    assert refused(tmp_path) == [f"{path}: colour: Extra inputs are not permitted"]
    node = entry().model_dump() | {"verdict": "ok"}
    path = write(tmp_path, {"schema_version": "gridready.ledger/1", "customer": "acme", "nodes": {"gpu01": node}})
    assert refused(tmp_path) == [
        f"{path}: nodes.gpu01.verdict: Input should be 'certified', 'quarantined' or 'unreachable'"]


def test_read_refuses_another_customers_ledger(tmp_path):
    path = write(tmp_path, {"schema_version": "gridready.ledger/1", "customer": "other"})
    assert refused(tmp_path) == [f"{path}: customer: 'other' is not 'acme'"]


def _with_paths(root: Path, *, summary: str, certification: str | None = None, evidence: str | None = None,
                serving: str | None = None) -> Path:
    raw = ledger.Ledger(customer="acme", nodes={"gpu01": entry(summary=summary, certification=certification,
                                                               evidence=evidence)})
    if serving is not None:
        raw.serving = ledger.Deployment(run_id="s", summary=serving, at=AT)
    return write(root, raw.model_dump())


def test_read_accepts_recorded_paths_under_the_root_or_relative_without_climbing(tmp_path):
    root = tmp_path / "artifacts"
    _with_paths(root, summary=str(root / "acme/certify/r/summary.json"), certification="acme/certify/r/c.json",
                evidence=str(root / "acme/e.json"), serving=str(root / "acme/serve/s/summary.json"))
    assert ledger.read(root, "acme")[1].nodes["gpu01"].certification == "acme/certify/r/c.json"


@pytest.mark.parametrize(("key", "value"), [
    ("nodes.gpu01.summary", "/etc/passwd"),
    ("nodes.gpu01.summary", "{root}/../x/summary.json"),
    ("nodes.gpu01.summary", "{root}"),
    ("nodes.gpu01.summary", "{root}-other/summary.json"),
    ("nodes.gpu01.certification", "../acme/c.json"),
    ("nodes.gpu01.certification", "acme/../../c.json"),
    ("nodes.gpu01.evidence", "/tmp/e.json"),
    ("serving.summary", "/srv/summary.json"),
])
def test_read_refuses_a_recorded_path_that_leads_out_of_the_artifacts_root(tmp_path, key, value):
    root = tmp_path / "artifacts"
    value = value.format(root=root)
    good = str(root / "acme/s.json")
    where = key.split(".")[-1] if key.startswith("nodes") else "serving"
    path = _with_paths(root, summary=value if where == "summary" else good,
                       **({where: value} if where in ("certification", "evidence") else {}),
                       serving=value if where == "serving" else None)
    assert refused(root) == [f"{path}: {key}: not a path under {root}"]


def test_beneath_takes_the_root_as_written_or_resolved(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert ledger._beneath(str(real / "a/b.json"), tmp_path / "link")
    assert ledger._beneath(str(tmp_path / "link/a/b.json"), tmp_path / "link")
    assert ledger._beneath(str(tmp_path / "link/a/../b.json"), tmp_path / "link")
    assert not ledger._beneath(str(tmp_path / "link/../b.json"), tmp_path / "link")
    assert not ledger._beneath(str(tmp_path / "linkage/b.json"), tmp_path / "link")
    assert ledger._beneath(str(real / "x"), Path(str(real) + "/"))
    assert ledger._beneath("a/b.json", tmp_path) and ledger._beneath("b.json", tmp_path)
    assert not ledger._beneath("a/../../b.json", tmp_path)
    assert not ledger._beneath("..", tmp_path)


def test_beneath_a_root_of_slash_or_one_whose_name_ends_in_other_characters():
    assert ledger._beneath("/srv/a.json", Path("/"))
    assert ledger._beneath("/srv/artifactsX/a.json", Path("/srv/artifactsX"))
    assert not ledger._beneath("/srv/artifacts/a.json", Path("/srv/artifactsX"))
